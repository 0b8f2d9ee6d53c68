"""A response that calls a function its own prompt never names (detectors/toolcalls.py, detectors/signals/toolcall.py,
ADR 0019): the answer to another request. An agent's tool call is too short for content to trace, and its source may
never have received it; its name gives it away."""

from __future__ import annotations

import pickle
from collections.abc import Callable

import orjson
import pytest
from factories import request, response
from hypothesis import given
from hypothesis import strategies as st

from detectors.monitor import Monitor
from detectors.settings import DetectionSettings
from detectors.signals.toolcall import ToolCallDetector
from detectors.toolcalls import MAX_NAMES, ToolNames, called, name_like
from schemas.alert import SEVERITY_RANK, Alert
from schemas.exchange import Exchange, TextFingerprint
from tests.support.live import observe_now

AGENT_PROMPT = (
    "<|im_start|>system\nYou can call these tools:\n"
    '[{"type": "function", "function": {"name": "get_ticket", "description": "Fetch a ticket by id", '
    '"parameters": {"type": "object", "properties": {"ticket_id": {"type": "string"}}}}}, '
    '{"type": "function", "function": {"name": "searchDocs", "parameters": {}}}]<|im_end|>\n'
    "<|im_start|>user\nWhat is the status of ticket f4a5c4?<|im_end|>\n<|im_start|>assistant\n"
)
TRANSLATE_PROMPT = "<|im_start|>user\nTranslate to English: Die Anfrage konnte nicht gelesen werden.<|im_end|>\n"
B_AGENT_PROMPT = (
    'system: tools: [{"name": "lookup_order", "parameters": {"order_id": "string"}}]\nuser: where is my order?'
)


def _call(name: str, call_id: str = "call_22dc5393f65dc5286d4424e4") -> str:
    args = orjson.dumps({"ticket_id": "f4a5c4"}).decode()
    fn = {"name": name, "arguments": args}
    return orjson.dumps({"tool_calls": [{"id": call_id, "type": "function", "function": fn}]}).decode()


def _settings(**kw: object) -> DetectionSettings:
    return DetectionSettings.model_validate({"fingerprint_key": "tool-tests"} | kw)


def _exchange(m: Monitor, rid: str, tenant: str, ts: float, prompt: str, output: str, status: int = 200) -> list[Alert]:
    return observe_now(m, request(rid, tenant, ts, text=prompt)) + observe_now(
        m, response(rid, tenant, ts + 1, text=output, status=status)
    )


def _agent_history(
    m: Monitor,
    tenant: str,
    n: int = 3,
    prompt: str = B_AGENT_PROMPT,
    start: float = 10,
    output: Callable[[int], str] | None = None,
) -> list[Alert]:
    """`n` sessions of the tenant's own agent, each calling a function its prompt declares (the producer logs
    declarations): what counts is a session's first call of a function. `output`: session i's answer (default: a JSON
    call of `lookup_order`). Returns the alerts they raised."""
    alerts: list[Alert] = []
    for i in range(n):
        rid, session = f"{tenant}-own{start}-{i}", f"{tenant}-h{start}-{i}"
        alerts += observe_now(m, request(rid, tenant, start + i, text=prompt, session_id=session))
        out = _call("lookup_order", f"call_{tenant}{i}") if output is None else output(i)
        alerts += observe_now(m, response(rid, tenant, start + i + 0.5, text=out, session_id=session))
    return alerts


def _undeclared(alerts: list[Alert], rid: str) -> list[Alert]:
    return [a for a in alerts if rid in a.request_ids and any(e.name == "undeclared_tool_call" for e in a.evidence)]


# --- reading the names --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "output, names",
    [
        (_call("get_ticket"), ["get_ticket"]),
        ('{"function_call": {"name": "lookup_order", "arguments": "{}"}}', ["lookup_order"]),
        ('[{"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "a_b"}}]}]', ["a_b"]),
        ('{"content": [{"type": "text", "text": "hi"}, {"type": "tool_use", "name": "getWeather"}]}', ["getWeather"]),
        ('{"choices": [{"message": {"tool_calls": [{"function": {"name": "x-y"}}]}}]}', ["x-y"]),
        ("Sure, here is the status of the ticket.", None),
        ('{"name": "Alice", "age": 3}', None),  # JSON that calls nothing
        ('{"tool_calls": [{"function": {"name": "no spaces allowed"}}]}', None),
        ('{"tool_calls": [', None),  # cut short
        # A ReAct agent's call in text (LangChain's and LlamaIndex's format), with the step numbers LangChain allows.
        ('Thought: I need a tool.\nAction: get_ticket\nAction Input: {"ticket_id": "f4a5c4"}', ["get_ticket"]),
        ("Thought: first\nAction 1: read_file\nAction 1 Input: a.txt\n", ["read_file"]),
        (
            "  Action: searchDocs  \r\n  Action Input: x\nAction: get_ticket\nAction Input: y",
            ["searchDocs", "get_ticket"],
        ),
        ("The next Action: get_ticket\nAction Input: x", None),  # not at a line's start: a sentence, no call
        ("Action: get_ticket\nThought: no input follows\n", None),  # no `Action Input:` right after it
        ("Action: get ticket now\nAction Input: x", None),  # no valid function name
        # An answer that shows a step as an example, in a fenced code block, made no call; one after the block did.
        ("A ReAct agent writes:\n```text\nAction: get_weather\nAction Input: Paris\n```\nThat is all.", None),
        ("~~~\nAction: get_weather\nAction Input: Paris\n~~~\nAction: read_file\nAction Input: a", ["read_file"]),
    ],
)
def test_called_reads_the_common_tool_call_forms(output: str, names: list[str] | None) -> None:
    assert called(output) == names


def test_plain_word_functions_are_not_checked() -> None:
    # A prompt holds plain words for many reasons; a missing one proves nothing, so the output names no checked call.
    tools = ToolNames(b"k")
    assert not name_like("search") and name_like("get_ticket") and name_like("searchDocs") and name_like("web-search")
    assert tools.calls(_call("search")) is None
    assert tools.calls(_call("get_ticket")) == frozenset({tools.keyed("get_ticket")})


def test_a_prompt_declares_every_name_like_word_under_the_key() -> None:
    a, b = ToolNames(b"key-a"), ToolNames(b"key-a")
    declared = a.declared(AGENT_PROMPT)
    assert declared is not None
    assert {a.keyed("get_ticket"), a.keyed("searchDocs"), a.keyed("ticket_id")} <= declared
    assert b.declared(AGENT_PROMPT) == declared  # same key, same hashes: the staged workers agree
    assert ToolNames(b"key-b").keyed("get_ticket") != a.keyed("get_ticket")  # keyed: no name is readable
    assert a.keyed("get_ticket") not in (a.declared(TRANSLATE_PROMPT) or ())


def test_a_prompt_with_too_many_names_is_unknown() -> None:
    text = " ".join(f"name_{i}" for i in range(MAX_NAMES + 1))
    assert ToolNames(b"k").declared(text) is None


@given(st.text(max_size=400))
def test_reading_any_text_never_raises(text: str) -> None:
    tools = ToolNames(b"k")
    tools.calls(text)
    tools.declared(text)


# --- the signal, end to end through the monitor ---------------------------------------------------------------------


def test_a_tool_call_its_prompt_never_declared_is_a_high_alert() -> None:
    # Content cannot trace it (no other text of the call in the domain): the name alone is the finding.
    m = Monitor(_settings())
    _agent_history(m, "B")
    alerts = _exchange(m, "foreign", "B", 110, TRANSLATE_PROMPT, _call("get_ticket")) + m.flush()
    found = _undeclared(alerts, "foreign")
    assert found and SEVERITY_RANK[found[0].severity] >= SEVERITY_RANK["high"]
    assert found[0].kind == "undeclared_tool_call"
    signal = next(e for e in found[0].evidence if e.name == "undeclared_tool_call")
    assert signal.figures["undeclared"] == 1 and signal.figures["tool_calls"] == 1
    assert signal.figures["declared_before"] == 3


REACT_PROMPT = (
    "Answer the following questions as best you can. You have access to the following tools:\n\n"
    "lookup_order: find an order by its id\n\nUse the following format:\n\nThought: you should always think\n"
    "Action: the action to take, should be one of [lookup_order]\nAction Input: the input to the action\n"
    "Observation: the result of the action\n\nQuestion: where is my order 7731?\nThought:"
)


def _react(name: str, arg: str = "7731") -> str:
    return f"I should look it up.\nAction: {name}\nAction Input: {arg}"


def test_a_react_call_its_prompt_never_declared_is_a_high_alert() -> None:
    # An agent framework's text-form call (no JSON): the tenant's own ReAct calls name what their prompts list, so its
    # prompts are known to carry declarations; a call of another tenant's tool handed to it is the finding.
    m = Monitor(_settings())
    own = _agent_history(m, "B", prompt=REACT_PROMPT, output=lambda i: _react("lookup_order", f"77{i}")) + m.flush()
    assert not [a for a in own if any(e.name == "undeclared_tool_call" for e in a.evidence)]
    alerts = _exchange(m, "foreign", "B", 110, REACT_PROMPT, _react("get_ticket", "f4a5c4")) + m.flush()
    found = _undeclared(alerts, "foreign")
    assert found and found[0].kind == "undeclared_tool_call"
    assert SEVERITY_RANK[found[0].severity] >= SEVERITY_RANK["high"]
    again = _exchange(m, "own-again", "B", 120, REACT_PROMPT, _react("lookup_order", "7740")) + m.flush()
    assert not _undeclared(again, "own-again")


def test_beside_it_the_content_names_the_source() -> None:
    # The agent A's own call is declared; the same answer delivered to B is A's: a mechanism finding makes the content
    # match a victim (the verdict's mechanism rule), so the alert names A.
    m = Monitor(_settings())
    _agent_history(m, "B")
    alerts = _exchange(m, "own", "A", 100, AGENT_PROMPT, _call("get_ticket"))
    assert not _undeclared(alerts, "own")
    alerts = _exchange(m, "foreign", "B", 110, TRANSLATE_PROMPT, _call("get_ticket")) + m.flush()
    found = _undeclared(alerts, "foreign")
    assert found and SEVERITY_RANK[found[0].severity] >= SEVERITY_RANK["high"]
    assert {a.source_tenant_id for a in found} == {"A"} and found[0].kind == "cross_tenant_contamination"


def test_a_tenant_whose_prompts_do_not_carry_its_declarations_is_never_judged() -> None:
    # A producer that logs the messages but not the request's `tools`: every session's first call reads as undeclared.
    m = Monitor(_settings())
    alerts: list[Alert] = []
    for i in range(12):
        observe_now(m, request(f"c{i}", "C", 10 + 5 * i, text="user: where is my order?", session_id=f"C-{i}"))
        alerts += observe_now(
            m, response(f"c{i}", "C", 11 + 5 * i, text=_call("lookup_order", f"c{i}"), session_id=f"C-{i}")
        )
    _agent_history(m, "C", n=20, start=200)  # now some declared ones too, but not four times as many
    alerts += _exchange(m, "late", "C", 400, TRANSLATE_PROMPT, _call("get_ticket")) + m.flush()
    assert not [a for a in alerts if any(e.name == "undeclared_tool_call" for e in a.evidence)]


def test_a_history_that_re_sends_the_calls_does_not_open_the_check() -> None:
    # The gateway logs no declarations, but each turn re-sends the session so far, earlier calls included: every call
    # after a session's first names a function its prompt holds. Only first calls count, so the tenant is never
    # judged, and its agent's first call of a new function raises nothing.
    m = Monitor(_settings())
    alerts: list[Alert] = []
    for s in range(4):
        history = "user: where is my order?"
        for turn in range(6):
            rid, ts = f"d{s}-{turn}", 10 + 100 * s + 10 * turn
            out = _call("lookup_order", f"call_{s}_{turn}")
            observe_now(m, request(rid, "D", ts, text=history, session_id=f"D-{s}"))
            alerts += observe_now(m, response(rid, "D", ts + 1, text=out, session_id=f"D-{s}"))
            history += "\nassistant: " + out + "\ntool: shipped\nuser: and now?"
    alerts += _exchange(m, "new", "D", 900, "user: any open tickets?", _call("get_ticket")) + m.flush()
    assert not [a for a in alerts if any(e.name == "undeclared_tool_call" for e in a.evidence)]


def test_a_tenant_that_never_called_a_tool_is_not_judged() -> None:
    m = Monitor(_settings())
    _agent_history(m, "B", n=2)  # one short of tool_calls_min_declared
    alerts = _exchange(m, "foreign", "B", 110, TRANSLATE_PROMPT, _call("get_ticket")) + m.flush()
    assert not _undeclared(alerts, "foreign")


@pytest.mark.parametrize("status", [429, 500])
def test_a_failed_response_is_not_judged(status: int) -> None:
    m = Monitor(_settings())
    _agent_history(m, "B")
    alerts = _exchange(m, "r", "B", 110, TRANSLATE_PROMPT, _call("get_ticket"), status=status) + m.flush()
    assert not _undeclared(alerts, "r")


def test_off_or_without_prompt_text_it_says_nothing() -> None:
    m = Monitor(_settings(tool_calls=False))
    _agent_history(m, "B")
    alerts = _exchange(m, "r", "B", 110, TRANSLATE_PROMPT, _call("get_ticket")) + m.flush()
    assert not _undeclared(alerts, "r")
    m = Monitor(_settings())
    _agent_history(m, "B")
    alerts = observe_now(m, request("q", "B", 110)) + observe_now(m, response("q", "B", 111, text=_call("get_ticket")))
    assert not _undeclared(alerts + m.flush(), "q")


def _tool_exchange(tenant: str, ts: float, declared: set[int], calls: set[int]) -> Exchange:
    prompt, out = TextFingerprint([1, 2, 3], 10), TextFingerprint([4, 5], 8)
    prompt.tools, out.tools = frozenset(declared), frozenset(calls)
    session = f"{tenant}-{ts}"  # a session each: its first call is what counts
    req, resp = (
        request(f"q{ts}", tenant, ts, session_id=session),
        response(f"q{ts}", tenant, ts + 1, session_id=session),
    )
    return Exchange(ts, req, resp, prompt, out)


def test_the_record_is_bounded_and_survives_a_snapshot() -> None:
    det = ToolCallDetector(_settings(tool_calls_max_tenants=2))
    ts = 0.0
    for tenant in ("B", "D", "E"):
        for _ in range(3):
            ts += 1
            ex = _tool_exchange(tenant, ts, {7}, {7})
            assert det.observe(ex, None) == []  # type: ignore[arg-type]
            det.learn(ex)
    assert list(det.tenants) == ["D", "E"]  # B, least recently seen, was evicted
    assert len(det.seen) == 8  # and the first calls are bounded too (4 per tenant bound)
    restored = pickle.loads(pickle.dumps(det))
    assert restored.observe(_tool_exchange("E", 50, {7}, {9}), None)  # type: ignore[arg-type]
    assert not restored.observe(_tool_exchange("B", 51, {7}, {9}), None)  # type: ignore[arg-type]  # unknown again


def test_the_names_survive_the_wire_and_a_snapshot() -> None:
    # The staged topology sends prints as wire fingerprints (ingest -> join) and as print records (join -> domain).
    from detectors.fingerprint import Fingerprinter
    from schemas.events import Fingerprint
    from streams.kafka import records

    fp = Fingerprinter("tool-tests", 5, 4)
    tp = fp.fingerprint_text(AGENT_PROMPT)
    tp.tools = ToolNames(b"x").declared(AGENT_PROMPT)
    back = fp.from_wire(Fingerprint.model_validate(fp.wire_fields(tp)))
    assert back.tools == tp.tools
    assert records._print_of(orjson.loads(orjson.dumps(records._print_values(tp)))).tools == tp.tools  # type: ignore[union-attr]
    old = TextFingerprint([1, 2], 7)
    state = old.__getstate__()[:4]  # a print pickled before `tools` existed
    restored = TextFingerprint.__new__(TextFingerprint)
    restored.__setstate__(state)
    assert restored.tools is None and restored.hashes == [1, 2]
    assert pickle.loads(pickle.dumps(tp)).tools == tp.tools


def test_a_tenant_whose_gateway_stops_logging_declarations_is_soon_no_longer_judged() -> None:
    # Every first call counts, a flagged one too: after the change, about a quarter of the declared count is flagged,
    # then the tenant reads as one whose prompts do not carry declarations.
    m = Monitor(_settings())
    _agent_history(m, "B", n=8)
    alerts: list[Alert] = []
    for i in range(10):
        observe_now(m, request(f"after{i}", "B", 100 + 5 * i, text="user: where is my order?", session_id=f"B-a{i}"))
        out = _call("lookup_order", f"c{i}")
        alerts += observe_now(m, response(f"after{i}", "B", 101 + 5 * i, text=out, session_id=f"B-a{i}"))
    alerts += m.flush()
    flagged = {r for a in alerts if any(e.name == "undeclared_tool_call" for e in a.evidence) for r in a.request_ids}
    assert flagged == {"after0", "after1", "after2"}  # 8 declared: judged while 4 x undeclared <= 8


ALPHABET = "aZb_-.3 (ü日x\nY"


@given(st.text(alphabet=ALPHABET, max_size=200), st.integers(0, 8))
def test_the_native_scan_finds_what_the_python_rule_finds(text: str, limit: int) -> None:
    from detectors import toolcalls

    if toolcalls._name_words is None:
        pytest.skip("the native extension is not built")
    assert toolcalls._name_words(text, limit) == toolcalls.name_words_py(text, limit)


def test_name_like_is_the_rule_the_scan_applies() -> None:
    from detectors.toolcalls import name_words_py

    text = "get_ticket(ticket_id) searchDocs web-search _private Plain __init__ über_cool 9_lives a-"
    assert name_words_py(text, 100) == {"get_ticket", "ticket_id", "searchDocs", "web-search", "ber_cool"}
    assert all(name_like(w) for w in name_words_py(text, 100) or ())
    assert not any(name_like(w) for w in ("_private", "Plain", "__init__", "9_lives", "a-", "x" * 65 + "_y"))


def test_hostile_outputs_and_prompts_are_bounded() -> None:
    # Nesting past the parser's limit, a JSON text longer than a tool call, a prompt of endless names: each is read as
    # "unknown" (no check), never an error, and the scan stops at the limit.
    assert called("[" * 60_000 + '"name"' + "]" * 60_000) is None

    def calls(n: int) -> str:
        return orjson.dumps({"tool_calls": [{"function": {"name": f"f_{i}"}} for i in range(n)]}).decode()

    assert called(calls(3_000)) is None  # longer than MAX_OUTPUT
    capped = called(calls(100))
    assert capped is not None and len(capped) == 32  # at most MAX_CALLS names are read
    assert ToolNames(b"k").declared(" ".join(f"n_{i}" for i in range(200_000))) is None
    react = "".join(f"Action: f_{i}\nAction Input: x\n" for i in range(1_000))
    capped = called(react)
    assert capped is not None and len(capped) == 32  # ReAct steps too: at most MAX_CALLS
    assert called("Action: " * 9_000) is None  # near MAX_OUTPUT of near-misses: read once, linearly, no call
    fenced = "```\nAction: a_b\nAction Input: x\n```\n" * 1_500  # steps in blocks, near MAX_OUTPUT: linear, none read
    assert called(fenced) is None

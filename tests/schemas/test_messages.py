"""A text field that arrives as a serialized chat messages array is read as its messages' text (schemas/messages.py):
the fingerprints and the whole-sentence print then see the text the model saw, not its JSON escapes."""

from __future__ import annotations

import random

import orjson
import pytest
from factories import request, response

from detectors.monitor import Monitor
from detectors.settings import DetectionSettings
from schemas.alert import SEVERITY_RANK
from schemas.events import Request, parse_event
from schemas.messages import chat_text, messages_text
from tests.support.live import observe_now

WORDS = [f"w{i:04d}" for i in range(6000)]


def test_a_messages_array_is_read_as_its_texts_joined_by_line_breaks() -> None:
    msgs = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": 'Hello.\n\nSee "this".'},
        {"role": "assistant", "content": [{"type": "text", "text": "OpenAI part."}, {"type": "image_url"}]},
        {"role": "user", "content": [{"type": "text", "content": "OTel part."}, "plain part"]},
        {"role": "tool", "content": None},
    ]
    raw = orjson.dumps(msgs).decode()
    assert "\\n" in raw and '\\"' in raw  # as a gateway's log writes it
    want = 'You are helpful.\nHello.\n\nSee "this".\nOpenAI part.\nOTel part.\nplain part'
    assert messages_text(raw) == want
    assert messages_text("\n  " + raw) == want
    obj = {"type": "request", "ts": 1, "event_id": "e", "request_id": "r", "tenant_id": "t", "model": "m"}
    ev = parse_event(orjson.dumps(obj | {"prompt_tokens": 3, "prompt_text": raw}))
    assert isinstance(ev, Request) and ev.prompt_text == want
    resp = {"type": "response", "cache_domain": "d", "status_code": 200, "output_text": raw}
    assert parse_event(orjson.dumps(obj | resp)).output_text == want  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "text",
    [
        "plain text with a [bracket] and a role",
        '[1, 2, "role"]',
        '[{"role": "user", "content": "a"}, {"no": "role"}]',  # one element is not a message: all is kept
        '[{"role": "user"}]',  # no content (nor OpenTelemetry's parts)
        '[{"role": 7, "content": "a"}]',
        "[]",
        '[{"role": "user", "content": "cut off',  # truncated by the producer: not JSON
        '{"role": "user", "content": "an object, not an array"}',
        '[{"role": "user", "content": "a lone surrogate \ud800"}]',  # hostile: no valid UTF-8, kept as it came
        "[" * 5000 + '"role"' + "]" * 5000,  # hostile: nested past the JSON parser's depth limit
    ],
)
def test_any_other_text_is_used_as_it_is(text: str) -> None:
    assert messages_text(text) is None
    assert chat_text(text) == text


def _sentences(rng: random.Random, n: int) -> list[str]:
    return [" ".join(rng.sample(WORDS, rng.randint(12, 20))).capitalize() + "." for _ in range(n)]


def _answer_quoting(seed: int, logged_as_json: bool, decoded: bool = True, page: bool = False) -> str | None:
    """Tenant S's prompt is a messages array (as JSON when `logged_as_json`); R's answer carries two whole sentences
    of it (or a page cut mid-sentence). The severity of R's cross-tenant alert, None without one."""
    rng = random.Random(seed)
    src = _sentences(rng, 8)
    content = "\n\n".join(src)
    text = orjson.dumps([{"role": "system", "content": "Be brief."}, {"role": "user", "content": content}]).decode()
    m = Monitor(
        DetectionSettings.model_validate(
            {"overlap_warmup_docs": 0, "overlap_warmup_s": 0, "fingerprint_key": "messages-tests"}
        )
    )
    if not logged_as_json:
        prompt = request("s1", "S", 1, text="Be brief.\n" + content)
    elif decoded:
        prompt = request("s1", "S", 1, text=text)
    else:  # as it was before the contract read it: the JSON text with its escapes
        prompt = request("s1", "S", 1).model_copy(update={"prompt_text": text})
    observe_now(m, prompt)
    observe_now(m, response("s1", "S", 2, text="Noted."))
    own = _sentences(rng, 6)
    carried = " ".join(" ".join(src[2:6]).split()[5:-5]) if page else " ".join(src[3:5])
    observe_now(m, request("r1", "R", 10, text="Tell me something."))
    out = f"{' '.join(own[:3])}\n{carried}\n{' '.join(own[3:])}"
    alerts = [a for a in observe_now(m, response("r1", "R", 11, text=out)) if a.kind == "cross_tenant_contamination"]
    return alerts[0].severity if alerts else None


@pytest.mark.parametrize("seed", range(3))
def test_whole_sentences_of_a_prompt_logged_as_json_are_an_echo_as_when_logged_as_text(seed: int) -> None:
    plain = _answer_quoting(seed, logged_as_json=False)
    assert plain == "warning"
    assert _answer_quoting(seed, logged_as_json=True) == plain
    # Control: the same prompt with its JSON escapes left in: no sentence of it is whole, and the echo is high.
    raw = _answer_quoting(seed, logged_as_json=True, decoded=False)
    assert raw is not None and SEVERITY_RANK[raw] >= SEVERITY_RANK["high"]
    # A page cut mid-sentence out of the JSON-logged prompt is still found, and high.
    page = _answer_quoting(seed, logged_as_json=True, page=True)
    assert page is not None and SEVERITY_RANK[page] >= SEVERITY_RANK["high"]


@pytest.mark.parametrize(
    "message",
    [
        # OpenAI: an assistant message that calls a function (content null)
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function",
                                                               "function": {"name": "get_ticket", "arguments": "{}"}}]},
        # Anthropic: a tool_use block among the content blocks
        {"role": "assistant", "content": [{"type": "tool_use", "id": "tu_1", "name": "get_ticket", "input": {}}]},
        # OpenTelemetry semconv: a tool_call part
        {"role": "assistant", "content": [{"type": "tool_call", "id": "c1", "name": "get_ticket", "arguments": {}}]},
    ],
)  # fmt: skip
def test_a_message_that_calls_a_function_reads_as_the_line_a_tool_check_reads(message: dict) -> None:
    # Before, a tool call carried no text: an agent's answer logged as a message list was empty, and no check saw it.
    from detectors.toolcalls import called

    text = messages_text(orjson.dumps([{"role": "user", "content": "status?"}, message]).decode())
    assert text is not None and text.startswith('status?\n{"tool_calls":')
    assert called(text) == ["get_ticket"]
    assert messages_text(orjson.dumps([message]).decode()) == text.split("\n", 1)[1]


@pytest.mark.parametrize(
    ("part", "want"),
    [
        # Anthropic: a user message's tool_result block, its content a string or text blocks
        ({"type": "tool_result", "tool_use_id": "tu_1", "content": "order 7 shipped"}, "order 7 shipped"),
        ({"type": "tool_result", "content": [{"type": "text", "text": "order 7"}, {"type": "image"},
                                             {"type": "text", "text": "shipped"}]}, "order 7\nshipped"),
        # OpenTelemetry semconv: a tool_call_response part, its response any JSON value
        ({"type": "tool_call_response", "id": "c1", "response": "order 7 shipped"}, "order 7 shipped"),
        ({"type": "tool_call_response", "id": "c1", "response": {"order": 7, "state": "shipped"}},
         '{"order":7,"state":"shipped"}'),
    ],
)  # fmt: skip
def test_what_a_tool_returned_is_read_as_prompt_text(part: dict, want: str) -> None:
    # Before, a tool result block carried no text: the model read it, the monitor did not.
    text = messages_text(orjson.dumps([{"role": "user", "content": ["status?", part]}]).decode())
    assert text == f"status?\n{want}"


@pytest.mark.parametrize(
    "part",
    [
        {"type": "tool_result", "content": None},
        {"type": "tool_result", "content": [7, {"type": "text", "text": 8}]},
        {"type": "tool_call_response", "id": "c1"},
        {"type": "tool_call_response", "response": None},
        {"type": "tool_call_response", "response": [[[[]]]] * 3},  # read as its JSON
        {"type": "tool_call_response", "response": 1},
    ],
)
def test_a_tool_result_without_text_adds_none_and_breaks_nothing(part: dict) -> None:
    text = messages_text(orjson.dumps([{"role": "user", "content": ["status?", part]}]).decode())
    assert text is not None and text.startswith("status?")
    assert text.count("\n") <= 1


def test_a_tool_response_nested_past_what_json_writes_is_no_text_and_no_crash() -> None:
    deep: object = "x"
    for _ in range(400):  # orjson reads 1,024 levels and writes 254: hostile, not an error
        deep = [deep]
    raw = orjson.dumps([{"role": "user", "content": ["status?", {"type": "tool_call_response", "response": "y"}]}])
    raw = raw.replace(b'"y"', b"[" * 400 + b'"x"' + b"]" * 400)
    assert messages_text(raw.decode()) == "status?"


def _alerts_for_answer_quoting_its_tool_result(prompt: str) -> list[str]:
    """Tenant S pasted a manual; R's agent fetched that manual through a tool (R's prompt, `prompt`, as a gateway
    logs it) and answers with a page of it, cut mid-sentence. The severities of R's cross-tenant alerts."""
    rng = random.Random(5)
    manual = _sentences(rng, 8)
    m = Monitor(
        DetectionSettings.model_validate(
            {"overlap_warmup_docs": 0, "overlap_warmup_s": 0, "fingerprint_key": "messages-tests"}
        )
    )
    observe_now(m, request("s1", "S", 1, text="Summarise this manual:\n" + "\n\n".join(manual)))
    observe_now(m, response("s1", "S", 2, text="Noted."))
    observe_now(
        m, request("r1", "R", 10, text=prompt.replace("MANUAL", orjson.dumps("\n\n".join(manual)).decode()[1:-1]))
    )
    page = " ".join(" ".join(manual[2:6]).split()[5:-5])
    out = " ".join(_sentences(rng, 2)) + "\n" + page + "\n" + " ".join(_sentences(rng, 2))
    alerts = observe_now(m, response("r1", "R", 11, text=out))
    return [a.severity for a in alerts if a.kind == "cross_tenant_contamination" and a.tenant_id == "R"]


@pytest.mark.parametrize(
    "result",
    [
        '{"role": "tool", "tool_call_id": "call_1", "content": "MANUAL"}',  # OpenAI: read before too
        '{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": "MANUAL"}]}',
        '{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1", '
        '"content": [{"type": "text", "text": "MANUAL"}]}]}',
        '{"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "MANUAL"}]}',
    ],
)
def test_an_answer_quoting_its_own_tool_result_names_no_other_tenant(result: str) -> None:
    # Before, in the Anthropic and OpenTelemetry shapes the tool's text was missing from R's prompt, so the page
    # looked as if it came from nowhere but S: a high alert naming S.
    prompt = '[{"role": "user", "content": "What does the manual say about resets?"}, ' + result + "]"
    assert _alerts_for_answer_quoting_its_tool_result(prompt) == []
    # Control: the same answer when R's prompt did not hold the manual is a high alert naming S.
    bare = '[{"role": "user", "content": "What does the manual say about resets?"}]'
    assert [s for s in _alerts_for_answer_quoting_its_tool_result(bare) if SEVERITY_RANK[s] >= SEVERITY_RANK["high"]]

"""Fuzzing the scrape's parsing (issue 25, as the replay is fuzzed in tests/schemas/test_fuzz.py): Prometheus
exposition text with hostile values, hostile labels and junk lines, whole or streamed in arbitrary pieces,
and hostile /v1/models documents. Every input gives either a reading inside the documented bounds or a
MetricsError with a known reason: never another exception, never a limit outside 1..2^40 tokens."""

from __future__ import annotations

import os

import orjson
from hypothesis import example, given, settings
from hypothesis import strategies as st

from streams.inputs.engine_metrics import (
    MAX_TOKENS,
    NEEDED,
    READERS,
    ExpositionFilter,
    MetricsError,
    PoolReading,
    max_model_len,
)

FUZZ = settings(max_examples=int(os.environ.get("CROSSTALK_FUZZ_EXAMPLES", "150")), deadline=None)
REASONS = {"unparseable", "missing_metric", "no_capacity"}

# Values as an engine (or an attacker) might write them in the text format.
hostile_values = st.sampled_from(
    ["+Inf", "-Inf", "Inf", "NaN", "nan", "1e308", "1e20", "1.7976931348623157e308", "0.5", "-1", "0", "-0",
     "1e-300", "0x10", "1_000", "", "abc", "9" * 400, "1099511627776", "1099511627777", "681280", "6.8128e5"]
)  # fmt: skip
good_values = st.one_of(
    st.integers(0, 2**41).map(str),
    st.floats(0, 1.5, allow_nan=False).map(repr),
    st.sampled_from(["681280.0", "1.048576e+06", "0.65", "4096", "16"]),
)
values = st.one_of(good_values, good_values, hostile_values)
label_values = st.one_of(values, st.text(max_size=12).map(lambda t: t.replace("\\", "").replace('"', "")))
label_names = st.sampled_from(["engine", "engine_type", "model_name", "tp_rank", "num_gpu_blocks", "block_size"])
families = st.sampled_from([*sorted(NEEDED["sglang"] | NEEDED["vllm"]), "sglang:num_running_reqs", "other_total"])


@st.composite
def sample_line(draw: st.DrawFn) -> str:
    name = draw(families)
    labels = draw(st.dictionaries(label_names, label_values, max_size=4))
    body = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{body}}} {draw(values)}" if labels or draw(st.booleans()) else f"{name} {draw(values)}"


@st.composite
def meta_line(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["HELP", "TYPE"]))
    typ = draw(st.sampled_from(["gauge", "counter", "histogram", "summary", "info", "untyped", "bogus"]))
    return f"# {kind} {draw(families)} {typ if kind == 'TYPE' else 'help text'}"


junk = st.one_of(st.text(max_size=40), st.just("{" * 50), st.just("x" * 70_000), st.just('a{b="} 1'))
lines = st.lists(st.one_of(sample_line(), sample_line(), meta_line(), junk), max_size=25)
texts = lines.map(lambda ls: "\n".join(ls) + "\n")


def outcome(engine: str, text: str) -> PoolReading | str:
    try:
        reading = READERS[engine](text)
    except MetricsError as exc:
        assert exc.reason in REASONS, exc
        return exc.reason
    assert 1 <= reading.capacity_tokens <= MAX_TOKENS
    assert 0 <= reading.used_tokens <= reading.capacity_tokens
    assert reading.context_window is None or 1 <= reading.context_window <= MAX_TOKENS
    return reading


def filtered(engine: str, raw: bytes, cuts: list[int]) -> PoolReading | str:
    keep = ExpositionFilter(NEEDED[engine])
    last = 0
    for cut in sorted({c % (len(raw) + 1) for c in cuts}):
        keep.feed(raw[last:cut])
        last = cut
    keep.feed(raw[last:])
    try:
        text = keep.text()
    except MetricsError as exc:
        assert exc.reason == "unparseable"
        return exc.reason
    return outcome(engine, text)


@FUZZ
@given(engine=st.sampled_from(["sglang", "vllm"]), text=texts)
@example(engine="sglang", text='sglang:max_total_num_tokens{a="1"} +Inf\nsglang:num_used_tokens{a="1"} 5\n')
@example(engine="sglang", text="sglang:max_total_num_tokens 681280\nsglang:token_usage NaN\n")
@example(
    engine="vllm", text='vllm:cache_config_info{num_gpu_blocks="inf",block_size="16"} 1\nvllm:kv_cache_usage_perc 0.5\n'
)
@example(engine="sglang", text="sglang:context_len " + "9" * 400 + "\n")  # found: OverflowError in float()
def test_readings_are_bounded_or_a_known_reason(engine: str, text: str) -> None:
    outcome(engine, text)


@FUZZ
@given(engine=st.sampled_from(["sglang", "vllm"]), text=texts, cuts=st.lists(st.integers(0, 10**6), max_size=8))
@example(engine="sglang", text="#\n", cuts=[])  # found by this test: a bare "#" line raised IndexError
def test_streamed_in_any_pieces_the_filter_reads_the_same(engine: str, text: str, cuts: list[int]) -> None:
    raw = text.encode("utf-8", "surrogatepass")
    whole = filtered(engine, raw, [])
    assert filtered(engine, raw, cuts) == whole  # the reading never depends on how the bytes arrived
    direct = outcome(engine, raw.decode("utf-8", "replace"))
    if isinstance(direct, PoolReading):  # dropping other families' lines changes no reading (a junk line
        assert whole == direct  # elsewhere may fail the whole text, though: it no longer does when filtered)


json_values = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True), st.text(max_size=8),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)  # fmt: skip
cards = st.fixed_dictionaries(
    {"id": st.one_of(st.text(max_size=5), st.integers())}, optional={"max_model_len": json_values}
)
models_docs = st.one_of(
    st.fixed_dictionaries({"data": st.lists(st.one_of(cards, json_values), max_size=3)}), json_values
)


@FUZZ
@given(doc=models_docs, model=st.one_of(st.none(), st.text(max_size=5)))
@example(doc={"data": [{"id": "m", "max_model_len": 1e300}]}, model=None)
@example(doc={"data": [{"id": "m", "max_model_len": True}]}, model=None)
def test_models_windows_are_bounded_or_counted(doc: object, model: str | None) -> None:
    try:
        _, window = max_model_len(orjson.loads(orjson.dumps(doc, option=orjson.OPT_NON_STR_KEYS)), model)
    except MetricsError as exc:
        assert exc.reason == "models_unparseable"
        return
    except orjson.JSONEncodeError:
        return  # not a JSON document (an integer past 64 bits): the scraper never sees such an object
    assert window is None or 1 <= window <= MAX_TOKENS

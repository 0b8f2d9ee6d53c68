"""The native fingerprinting loop (detectors/_winnow.c) against the pure numpy path: identical fingerprints,
unit hashes and word counts on any text; bounded cache; and built for real where CI runs."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from detectors import fingerprint as fpmod
from detectors.fingerprint import NATIVE, Fingerprinter
from schemas.exchange import EXCHANGE_ADAPTER, Exchange, TextFingerprint

# In CI the extension must be there (a broken build must not hide behind the fallback); elsewhere a machine
# without a C compiler skips these tests and runs the pure path.
if os.environ.get("CI") == "true":
    assert NATIVE, "CI=true: detectors._winnow (the native fingerprinting loop) is not built; is a C compiler there?"
pytestmark = pytest.mark.skipif(not NATIVE, reason="native extension not built (no C compiler)")

PARAMS = [(5, 4), (5, 12), (1, 1), (3, 2), (2, 17)]
SPECIAL = list(
    "aZ_09 ,.\n\t\0-'éßΣςﬁＡｶﾞ用写的年报告สวัสดีครับ안녕하세요Привет हिन्दी㍿①ٱلعربيةΩ"
    "\u00ad\u200b\u200d\ufeff\u0301\ud800\udfff\U0001f600\U00020000\U0001d518\U000e0001\U00032400\u3005\uff9e"
)
# Code points anywhere (surrogates included), and the tricky ones often.
any_char = st.one_of(st.characters(exclude_categories=()), st.sampled_from(SPECIAL))
piece = st.one_of(
    st.text(any_char, max_size=12),
    st.sampled_from(["word ", "the ", " ", "\n", "Über ", "x" * 16, "y" * 17, "z" * 25, "é" * 128, "q" * 257]),
)
texts = st.lists(piece, max_size=40).map("".join)


def pair(k: int, w: int) -> tuple[Fingerprinter, Fingerprinter]:
    native = Fingerprinter("native-test-key", k, w)
    pure = Fingerprinter("native-test-key", k, w, native=False)
    assert native.native and not pure.native
    return native, pure


PAIRS = {kw: pair(*kw) for kw in PARAMS} if NATIVE else {}


def same(native: Fingerprinter, pure: Fingerprinter, text: str) -> None:
    a, b = native.fingerprint_text(text), pure.fingerprint_text(text)
    assert a == b
    assert (a.hashes, a.words) == (b.hashes, b.words)
    np.testing.assert_array_equal(native.text_hashes(text), pure.text_hashes(text))


@settings(max_examples=400, deadline=None)
@given(text=texts, kw=st.sampled_from(PARAMS))
def test_native_and_pure_paths_give_identical_fingerprints(text: str, kw: tuple[int, int]) -> None:
    same(*PAIRS[kw], text)


@settings(max_examples=100, deadline=None)
@given(text=st.text(st.characters(exclude_categories=()), max_size=400))
def test_identical_on_arbitrary_code_points(text: str) -> None:
    same(*PAIRS[(5, 4)], text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "\0\0word\0",
        "用Python写的2024年报告",
        "สวัสดีครับ ภาษาไทย " * 50,
        "Stra\u00adße ＡＢＣ ｶﾞｷﾞ ﬁne ㍿ ① " * 40,
        "a" * 100_000,  # one huge word
        ("é" * 5_000 + " ") * 3,
        "\ud800\udc00 lone \udfff surrogates \ud83d",
        "x" * 16 + " " + "x" * 17 + " " + "x" * 256 + " " + "x" * 257,
        " ".join(f"w{i}" for i in range(30_000)),  # more units than the native stack buffer
    ],
)
def test_identical_on_edge_cases(text: str) -> None:
    for native, pure in PAIRS.values():
        same(native, pure, text)


def test_the_native_cache_is_bounded_and_stays_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fpmod, "_WORD_CACHE_MAX", 50)
    native, pure = Fingerprinter("k", 5, 4), Fingerprinter("k", 5, 4, native=False)
    for i in range(20):
        text = " ".join(f"word{i}x{j}" for j in range(40)) + " common words again"
        same(native, pure, text)
        assert native.cached_units <= 50 + pure.cached_units


def test_native_output_is_the_pure_paths_object() -> None:
    """The C loop builds the print by calling the class, as the pure path does: the same type, fields and
    positions, compared, pickled and serialised alike."""
    native, pure = PAIRS[(5, 4)]
    text = "a native fingerprint of a short text with enough words to select some"
    a, b = native.fingerprint_text(text), pure.fingerprint_text(text)
    assert type(a) is type(b) is TextFingerprint
    assert a == b and (a.positions, a.sentences) == (b.positions, b.sentences)
    assert a.positions is not None and len(a.positions) == len(a.hashes)
    back = pickle.loads(pickle.dumps(a))
    assert back == b and back.positions == a.positions
    assert EXCHANGE_ADAPTER.dump_json(Exchange(1.0, None, None, a, None)) == EXCHANGE_ADAPTER.dump_json(
        Exchange(1.0, None, None, b, None)
    )


def test_the_native_loop_is_what_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the extension built, fingerprint_text and text_hashes never reach the numpy path (so a broken
    build cannot hide behind the fallback: in CI the module must import, see the skip condition above)."""
    assert NATIVE, "CI=true: the native extension detectors._winnow must be built (is a C compiler there?)"

    def boom(*_: object) -> None:
        raise AssertionError("pure path used")

    for name in ("_lookup", "_unicode_hashes", "_span_hashes", "_selected"):
        monkeypatch.setattr(Fingerprinter, name, boom)
    fp = Fingerprinter("k", 5, 4)
    assert fp.native
    for text in ("plain ascii words " * 20, "用Python写的2024年报告 " * 20, "Привет мир " * 20):
        assert fp.fingerprint_text(text).hashes
        assert fp.text_hashes(text).shape[0] > 0


def test_a_failing_unit_hash_raises_and_leaves_the_cache_usable(monkeypatch: pytest.MonkeyPatch) -> None:
    native, pure = Fingerprinter("k", 5, 4), Fingerprinter("k", 5, 4, native=False)

    def fail(data: bytes) -> int:
        raise RuntimeError("hash failed")

    monkeypatch.setattr(native, "_bytes_hash", fail)
    with pytest.raises(RuntimeError, match="hash failed"):
        native.fingerprint_text("words never seen before")
    monkeypatch.undo()
    same(native, pure, "words never seen before and again")

"""winnow-v2 units: the guarantee in every script class, for fragments cut anywhere; normalisation.

Texts are built from units of one script class (or a mix), rendered as people write them: spaces
between Latin words, none between Han, Kana, Thai or Hangul characters, punctuation in between.
"""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from detectors.fingerprint import Fingerprinter, words_of
from detectors.tokens import CHAR, CLASS, Units, normalise
from schemas.events import Fingerprint

FP = Fingerprinter("test-key", k=5, w=12)
T = FP.guarantee_units

LATIN = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=8)
HAN = st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF)
KANA = st.one_of(
    st.characters(min_codepoint=0x3041, max_codepoint=0x3096), st.characters(min_codepoint=0x30A1, max_codepoint=0x30FA)
)
THAI = st.characters(min_codepoint=0x0E01, max_codepoint=0x0E2E)  # consonants (NFKC-stable, never compose)
HANGUL = st.characters(min_codepoint=0xAC00, max_codepoint=0xD7A3)  # precomposed syllables
CLASSES = {
    "latin": LATIN,
    "han": HAN,
    "kana": KANA,
    "thai": THAI,
    "hangul": HANGUL,
    "mixed latin/cjk": st.one_of(LATIN, HAN, KANA),
}
# The mixed class exercises both unit paths (words and characters) in the fast suite; each script alone runs in
# the full suite (marked slow).
BY_COST = [s if s == "mixed latin/cjk" else pytest.param(s, marks=pytest.mark.slow) for s in CLASSES]
WORD_GAPS = [" ", "  ", "\n", ", ", ". ", " - ", "; "]
CHAR_GAPS = [""] * 12 + ["，", "。", "、", " "]  # clauses of a dozen characters or so


def is_word(unit: str) -> bool:
    return unit.isascii()  # the Latin units; everything else drawn here is written without spaces


def render(units: list[str], gaps: st.DataObject) -> str:
    out: list[str] = []
    prev: str | None = None
    for u in units:
        if prev is not None:
            both_words = is_word(prev) and is_word(u)
            out.append(gaps.draw(st.sampled_from(WORD_GAPS if both_words else CHAR_GAPS)))
        out.append(u)
        prev = u
    return "".join(out)


def prints(text: str) -> set[int]:
    return set(FP.fingerprint_text(text).hashes)


@pytest.mark.parametrize("script", BY_COST)
@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_any_shared_passage_of_t_units_shares_a_fingerprint(script: str, data: st.DataObject) -> None:
    unit = CLASSES[script]
    shared = data.draw(st.lists(unit, min_size=T, max_size=T + 30))
    a = data.draw(st.lists(unit, max_size=60))
    b = data.draw(st.lists(unit, max_size=60))
    left = render(a + shared + b, data)
    right = render(b[::-1] + shared + a[::-1], data)
    assert prints(left) & prints(right)


def inner_units(source: str, lo: int, hi: int) -> int:
    """Units of `source` whose UTF-8 bytes all lie in [lo, hi), not counting the first and the last of
    them: those may merge with the text the fragment is inserted into (a word glued to a word)."""
    u = Units.of(source)  # (byte offsets of the folded text are those of the text: no format characters)
    inside = int(((u.starts >= lo) & (u.ends <= hi)).sum())
    return max(inside - 2, 0)


@pytest.mark.parametrize("script", BY_COST)
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_a_fragment_cut_anywhere_and_inserted_anywhere_keeps_the_guarantee(script: str, data: st.DataObject) -> None:
    unit = CLASSES[script]
    source = render(data.draw(st.lists(unit, min_size=3 * T + 10, max_size=160)), data)
    # Cut at arbitrary byte offsets, as a KV page is cut at token boundaries: a character split by the
    # cut is lost (the decoder's U+FFFD, a separator), a word split by it becomes a different word.
    # (Cuts in the outer thirds, so that most fragments are long enough for the guarantee to apply.)
    raw = source.encode()
    i = data.draw(st.integers(0, len(raw) // 3))
    j = data.draw(st.integers(2 * len(raw) // 3, len(raw)))
    fragment = raw[i:j].decode("utf-8", "replace")
    host = render(data.draw(st.lists(data.draw(st.sampled_from(list(CLASSES.values()))), max_size=80)), data)
    at = data.draw(st.integers(0, len(host)))
    received = host[:at] + fragment + host[at:]
    if inner_units(source, i, j) >= T:
        assert prints(source) & prints(received)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_case_width_and_spacing_do_not_change_the_fingerprints(data: st.DataObject) -> None:
    units = data.draw(st.lists(CLASSES["mixed latin/cjk"], min_size=1, max_size=80))
    text = render(units, data)
    mangled = text.upper()
    if data.draw(st.booleans()):  # full-width ASCII, as typed with a CJK input method
        mangled = "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in mangled)
    if data.draw(st.booleans()):  # half-width Katakana
        mangled = "".join(HALF_WIDTH.get(c, c) for c in mangled)
    # Whitespace and invisible characters: ideographic space, re-wrapping, soft hyphen, zero-width space.
    gap = data.draw(st.sampled_from(["\u3000", "\n\n", " \t ", " \u00ad", "\u200b "]))
    mangled = mangled.replace(" ", gap)
    assert FP.fingerprint_text(mangled) == FP.fingerprint_text(text)
    assert words_of(mangled) == words_of(text)


HALF_WIDTH = {unicodedata.normalize("NFKC", chr(c)): chr(c) for c in range(0xFF66, 0xFF9E)}


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=200))
def test_no_unit_is_punctuation_or_space_and_both_paths_agree(text: str) -> None:
    for u in Units.of(text).raw():  # units as written: letters, marks and digits only
        assert u
        assert {unicodedata.category(c)[0] for c in u} <= {"L", "M", "N"} or "_" in u, u
        if CLASS[min(ord(u[0]), len(CLASS) - 1)] == CHAR:
            assert len(u) == 1  # scripts without word spaces: one unit per character
    units = words_of(text)
    assert all(u == normalise(u) for u in units)
    # The numpy path (no unit list) and the unit list give the same hashes.
    assert FP.text_hashes(text).tolist() == FP.word_hashes(units).tolist()


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=st.characters(max_codepoint=127), max_size=200))
def test_ascii_units_are_the_v1_words(text: str) -> None:
    assert words_of(text) == re.findall(r"\w+", text.lower())


def test_units_of_mixed_text() -> None:
    assert words_of("用Python写的2024年报告。") == ["用", "python", "写", "的", "2024", "年", "报", "告"]
    assert words_of("ＧＬＭ－５ は ｶﾀｶﾅ") == ["glm", "5", "は", "カ", "タ", "カ", "ナ"]
    assert words_of("Straße ΣΊΣΥΦΟΣ hy\u00adphen") == ["strasse", "σίσυφοσ", "hyphen"]
    assert words_of("안녕하세요 세계") == ["안", "녕", "하", "세", "요", "세", "계"]
    assert words_of("हिन्दी भाषा") == ["हिन्दी", "भाषा"]  # vowel signs and virama stay in the word
    assert normalise("Ｆｕｌｌ") == "full"


def test_retired_v1_fingerprints_are_refused_with_the_reason() -> None:
    v1 = Fingerprint(scheme="winnow-v1", k=5, w=12, key_id=FP.key_id, words=3, hashes=[1])
    why = FP.check(v1) or ""
    assert "winnow-v1 is retired" in why and "winnow-v2" in why
    assert FP.check(FP.fingerprint("a b c d e f g h i j k l m n o p q")) is None
    assert FP.fingerprint("x").scheme == "winnow-v2"


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(
        alphabet=st.one_of(HAN, KANA, THAI, HANGUL, st.sampled_from("，。、！ \n「」“”—abcXYZ019_ é")), max_size=1500
    )
)
def test_texts_of_characters_and_ascii_words_take_the_code_point_paths_with_the_same_hashes(text: str) -> None:
    # Such texts are hashed from their UTF-32 code points (without words, or with ASCII words only); the
    # list path makes the units from the UTF-8 bytes. (An "é" sends a text to the bytes path.)
    assert FP.text_hashes(text).tolist() == FP.word_hashes(words_of(text)).tolist()


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(
        alphabet=st.one_of(st.characters(), st.sampled_from("\u00ad\u200b\ufeff \n_-ｶﾞ½ﬀ用Straße")), max_size=300
    )
)
def test_native_units_are_the_numpy_units(text: str) -> None:
    """`raw_units` (the native cutter, detectors/_winnow.c) is `Units.raw()` on any text: format characters,
    surrogates, every script; and so `words_of` is the same with and without the extension."""
    from detectors.tokens import raw_units

    assert raw_units(text) == Units.of(text).raw() == raw_units(text, native=False)


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=st.one_of(st.characters(), st.sampled_from("ＡＢｶﾞ½ﬀΣσςß用Straße ")), max_size=200))
def test_native_words_are_the_numpy_words(text: str) -> None:
    """words_of with the native cutter normalising in the same pass is the numpy path's words."""
    from detectors.tokens import _normalise_unit, raw_units

    pure = [u if u.isascii() else _normalise_unit(u) for u in raw_units(text, native=False)]
    assert words_of(text) == pure

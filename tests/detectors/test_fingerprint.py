"""Keyed winnowing: the guarantee (property-based), normalisation, keying, wire checks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from detectors.fingerprint import Fingerprinter, key_id_of, words_of
from schemas.events import Fingerprint

FP = Fingerprinter("test-key", k=5, w=12)
T = FP.guarantee_units  # 16

word = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_", min_size=1, max_size=8)
words_list = st.lists(word, min_size=0, max_size=120)


@settings(max_examples=300, deadline=None)
@given(a=words_list, b=words_list, shared=st.lists(word, min_size=T, max_size=T + 40))
def test_any_shared_passage_of_t_words_shares_a_fingerprint(a: list[str], b: list[str], shared: list[str]) -> None:
    left = a + shared + b
    right = b[::-1] + shared + a
    assert set(FP.fingerprint_words(left).tolist()) & set(FP.fingerprint_words(right).tolist())


@settings(max_examples=100, deadline=None)
@given(shared=st.lists(word, min_size=T, max_size=T + 20), noise=words_list)
def test_guarantee_holds_through_case_and_spacing_changes(shared: list[str], noise: list[str]) -> None:
    original = " ".join(noise) + " " + " ".join(shared)
    mangled = "\n\n  ".join(w.upper() for w in shared) + " ... " + " ".join(noise[::-1])
    assert set(FP.fingerprint_text(original).hashes) & set(FP.fingerprint_text(mangled).hashes)


def test_density_is_about_two_over_w_plus_one() -> None:
    text = " ".join(f"w{i}" for i in range(20_000))
    tp = FP.fingerprint_text(text)
    density = len(tp.hashes) / tp.words
    assert abs(density - 2 / (FP.w + 1)) < 0.03


def test_normalisation_ignores_case_spacing_and_punctuation() -> None:
    assert words_of("Hello,   WORLD!\n\tfoo_bar") == ["hello", "world", "foo_bar"]
    a = FP.fingerprint_text("The pool held 681,280 tokens; prompts beyond it were replaced by a placeholder. " * 3)
    b = FP.fingerprint_text("the pool held 681 280 tokens prompts beyond it were replaced by a placeholder " * 3)
    assert a.hashes == b.hashes


def test_hashes_depend_on_the_key_and_reveal_nothing_without_it() -> None:
    text = " ".join(f"token{i}" for i in range(200))
    other = Fingerprinter("another-key", k=5, w=12)
    assert not set(FP.fingerprint_text(text).hashes) & set(other.fingerprint_text(text).hashes)
    assert FP.key_id != other.key_id == key_id_of("another-key")


def test_short_texts_still_get_a_fingerprint_and_tiny_ones_none() -> None:
    assert len(FP.fingerprint_text("one two three four five six").hashes) == 1
    assert FP.fingerprint_text("too short").hashes == []


def test_wire_fingerprint_round_trip_and_parameter_check() -> None:
    fp = FP.fingerprint("a b c d e f g h i j k l m n o p q r s t")
    assert FP.check(fp) is None
    assert FP.from_wire(fp).hashes == sorted(set(fp.hashes))
    wrong_k = Fingerprint(k=4, w=12, key_id=FP.key_id, words=1, hashes=[1])
    assert "k=4" in (FP.check(wrong_k) or "")
    wrong_key = Fingerprint(k=5, w=12, key_id="nope", words=1, hashes=[1])
    assert "key" in (FP.check(wrong_key) or "")


def test_rejects_nonsense_parameters() -> None:
    with pytest.raises(ValueError):
        Fingerprinter("k", k=0, w=3)

"""The canary scan cuts a text into units only when it can hold a marker (`hex_words`, issue 28): its answer must be
exactly the filtered units, whatever the text holds (full-width digits, format characters, CJK, combining marks)."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import detectors.canaries as canaries
from detectors.canaries import _HEX_WORD, MIN_HEX, hex_words
from detectors.tokens import words_of


def reference(text: str) -> list[str]:
    return [w for w in words_of(text) if len(w) >= MIN_HEX and _HEX_WORD.fullmatch(w)]


# Pieces that make or break a hex unit: ASCII hex, full-width hex (folds to ASCII), circled and superscript digits,
# zero-width and soft-hyphen format characters (dropped, joining their neighbours), CJK (a unit per character),
# Latin letters with and without combining marks, separators.
PIECES = st.sampled_from(
    [
        "deadbeefcafe",
        "0123456789",
        "ABCDEF",
        "ｄｅａｄｂｅｅｆ",
        "①②",
        "¹²³",
        "\u200b",
        "\u00ad",
        "漢字",
        "カナ",
        "é",
        "e\u0301",
        "ß",
        "_",
        " ",
        "-",
        "\n",
        "x",
        "7",
        "deadbeefcafe0123456789",
        "\ufe0f",
        "\U000e0100",
        "\ud800",
        "\u0301",
        "Ω",
        "٣",
        "ordinary words of a long history, re-sent; ",
        ".",
        "/",
    ]
)


@settings(max_examples=1500, deadline=None)
@given(st.lists(PIECES, max_size=30).map("".join))
@example("id deadbeefcafe0123 here")
@example("ｄｅａｄｂｅｅｆｃａｆｅ１２")
@example("deadbeef\u200bcafe0123")
@example("deadbeefcafe0123漢")
@example("deadbeefcafe0123é")
@example("deadbeefcafe0123\u0301")
@example("_deadbeefcafe0123")
@example("deadbeefcafe0123Ω deadbeefcafe0123\ufe0f")
def test_hex_words_are_the_filtered_units(text: str) -> None:
    assert hex_words(text) == reference(text)


def test_plain_text_without_a_marker_is_not_cut() -> None:
    assert hex_words("Grüße aus Köln, 2026-12-02, ticket 1234 and a uuid-ish 1234abcd") == []
    assert hex_words("see 0123456789abcdef here") == ["0123456789abcdef"]
    assert hex_words("漢字0123456789ABCDEF漢字") == ["0123456789abcdef"]


@settings(max_examples=300, deadline=None)
@given(st.lists(PIECES, max_size=30).map("".join))
@example("ｄｅａｄｂｅｅｆｃａｆｅ１２")
@example("deadbeef\u200bcafe0123 漢字")
def test_the_folding_table_without_the_extension_agrees(text: str) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(canaries, "_table_find", None)
        mp.setattr(canaries, "_FOLDING", canaries._FoldingTable())
        assert hex_words(text) == reference(text)


def test_a_long_text_holding_a_marker_is_cut_only_around_it(monkeypatch: pytest.MonkeyPatch) -> None:
    cut: list[str] = []

    def words(text: str) -> list[str]:
        cut.append(text)
        return words_of(text)

    monkeypatch.setattr(canaries, "words_of", words)
    history = "An earlier answer, re-sent with every turn. " * 2_000
    text = history + "marker probe-0123456789abcdef, then " + history + "Grüße, 漢字 " * 100
    assert hex_words(text) == ["0123456789abcdef"]
    assert cut == ["0123456789abcdef"]  # the stretch between the ASCII separators around the run

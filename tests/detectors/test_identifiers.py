"""The identifiers a text holds (detectors/identifiers.py): what counts as one, keyed, bounded, and carried."""

from __future__ import annotations

import pickle

import orjson
from hypothesis import given
from hypothesis import strategies as st

from detectors.fingerprint import Fingerprinter
from detectors.identifiers import MAX_IDENTIFIERS, MAX_NAMES, Identifiers, is_name, names, words
from schemas.events import Fingerprint
from schemas.exchange import TextFingerprint
from streams.kafka import records


def test_order_phone_account_numbers_and_amounts_are_identifiers() -> None:
    text = (
        "Order SO-6607683, refund of 697,88 грн to DE44500105175407324931, call +1-989-449-4163 or (400)654-7067x4092"
    )
    assert words(text) == ["6607683", "697,88", "de44500105175407324931", "1-989-449-4163", "654-7067x4092"]


def test_dates_times_versions_years_and_short_or_repetitive_numbers_are_not() -> None:
    text = (
        "On 2026-03-18, 18.03.2026, 3/18/26 at 12:30:05 (2021-2023), v1.2.3, room 4711, 25.00 EUR, 0.333333333, 100000"
    )
    assert words(text) == []


def test_technical_names_that_hold_digits_are_not_numbers() -> None:
    text = "SHA224/256 and blake2s256 per RFC7230, utf-8, x86_64, UA15948382VQITOPUPIQMEQAXVKBH, %d33-57"
    assert words(text) == []


def test_numbers_in_scripts_written_without_spaces_are_words_of_their_own() -> None:
    # Each Chinese or Japanese character is a word of its own (as fingerprint units have it): no letters of the number.
    assert words("金额11808元，订单号02840189。") == ["11808", "02840189"]
    assert words("ご注文番号：4472918です") == ["4472918"]


def test_the_same_identifier_reads_the_same_however_it_is_written() -> None:
    # Full-width digits and upper case fold like fingerprint units; a prefix of letters joined by a dash is cut off.
    assert words("ＳＯ－６６０７６８３") == words("so-6607683") == words("6607683") == ["6607683"]
    assert words("IBAN DE44500105175407324931") == ["de44500105175407324931"]


def test_identifiers_are_keyed_and_reveal_nothing() -> None:
    a, b = Identifiers(b"key-a"), Identifiers(b"key-b")
    assert a("order 38713357") == frozenset({a.keyed("38713357")})
    assert a("order 38713357") != b("order 38713357")
    assert a("no numbers here") == frozenset()


def test_a_text_with_more_than_the_bound_is_unknown_and_the_scan_is_bounded() -> None:
    many = " ".join(f"{12_345_678 + 7919 * i}" for i in range(MAX_IDENTIFIERS + 1))
    assert words(many) is None
    assert words(" ".join(f"{12_345_678 + 7919 * i}" for i in range(MAX_IDENTIFIERS))) is not None
    assert words("11111 " * 500_000) is None  # a text of numbers is read to a bound, then unknown
    assert words("1 " * 500_000) == []  # words too short to hold 5 digits are skipped in the scan
    assert words("a" * 1_000_000 + "1") == []  # a long run without a digit fails once, not per character


@given(st.text(max_size=400))
def test_reading_any_text_never_raises(text: str) -> None:
    found = words(text)
    assert found is None or len(found) == len(set(found)) <= MAX_IDENTIFIERS


def test_identifiers_survive_the_wire_the_workers_records_and_a_snapshot() -> None:
    fp = Fingerprinter("identifier-tests", 5, 4)
    text = "Ticket 71335784 for William, order 38713357, phone (400)654-7067x4092; we will call back tomorrow morning."
    tp = fp.fingerprint_text(text)
    tp.ids = Identifiers.of(fp)(text)
    assert tp.ids is not None and len(tp.ids) == 3
    assert fp.from_wire(Fingerprint.model_validate(fp.wire_fields(tp))).ids == tp.ids
    back = records._print_of(orjson.loads(orjson.dumps(records._print_values(tp))))
    assert back is not None and back.ids == tp.ids and back.tools is None
    assert pickle.loads(pickle.dumps(tp)).ids == tp.ids
    state = TextFingerprint([1, 2], 7).__getstate__()[:5]  # a print pickled before `ids` existed
    restored = TextFingerprint.__new__(TextFingerprint)
    restored.__setstate__(state)
    assert restored.ids is None and restored.hashes == [1, 2]
    plain = fp.fingerprint_text(text)  # without identifiers: none on the wire, unknown after it
    assert "identifiers" not in fp.wire_fields(plain) and fp.from_wire(fp.fingerprint(text)).ids is None


def test_names_are_pairs_of_adjacent_capitalised_words_in_any_cased_script() -> None:
    # Pairs, so a greeting before the name or a label before it reads the same name.
    assert names("Customer: Kristen Reid <leebrian@example.com>") == ["kristen reid"]
    assert names("Dear Kristen Reid,") == ["dear kristen", "kristen reid"]
    assert names("Шановний(а) Макогон Оксана Панасівна,") == ["макогон оксана", "оксана панасівна"]
    # A word in capitals is no name's; case folds as fingerprint units fold it (a final sigma too).
    assert names("ΑΓΑΠΗΤΕ Γιώργος Παπαδόπουλος") == ["γιώργος παπαδόπουλος".casefold()]
    assert names("Jean-Luc Picard") == ["jean-luc picard"]
    # An apostrophe inside a name, as Ukrainian writes it (a modifier letter) or as a keyboard does: one name.
    assert names("Шановний(а) Шило Демʼян Венедиктович,") == ["шило дем'ян", "дем'ян венедиктович"]
    assert names("Customer: Шило Дем'ян Венедиктович") == names("Customer: Шило Дем’ян Венедиктович")
    assert names("Dear Seán O’Brien") == ["dear seán", "seán o'brien"]


def test_one_capitalised_word_lower_case_acronyms_and_unspaced_scripts_hold_no_name() -> None:
    text = "Thanks, Anna. the order arrived. HTTP Error in JSON Parser; 李小龙 and 山田太郎 wrote. McDonald Farm"
    assert names(text) == []
    assert names("Kristen\nReid") == []  # a line break ends a name


def test_names_are_bounded_tagged_apart_from_numbers_and_leave_the_numbers_room() -> None:
    many = ", ".join(f"Anna{chr(97 + i % 26)} Berg{chr(97 + i // 26)}" for i in range(200))
    assert len(names(many)) == MAX_NAMES
    ids = Identifiers(b"key-a")
    keys = ids("Order 38713357 for Anna Berg")
    assert keys is not None and sorted(map(is_name, keys)) == [False, True]
    assert keys != Identifiers(b"key-b")("Order 38713357 for Anna Berg")
    assert ids("Dear Anna Berg, thank you") == frozenset()  # names count only beside a number: read only there
    numbers = " ".join(f"{12_345_678 + 7919 * i}" for i in range(MAX_IDENTIFIERS - 3))
    full = ids(f"{numbers} {many}")
    assert full is not None and len(full) == MAX_IDENTIFIERS  # the wire's bound holds: names fill the room left
    assert sum(map(is_name, full)) == 3


@given(st.text(max_size=400))
def test_reading_names_in_any_text_never_raises(text: str) -> None:
    found = names(text)
    assert len(found) == len(set(found)) <= MAX_NAMES

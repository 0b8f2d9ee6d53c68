"""Session-incremental fingerprinting gives exactly the fingerprints of a full pass, with bounded state."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from detectors.fingerprint import Fingerprinter
from detectors.session_prints import SessionPrints

FP = Fingerprinter("test-key", k=5, w=12)

WORD = st.one_of(
    st.text(alphabet="abcdefghij", min_size=1, max_size=6),
    st.text(alphabet="的是不了人我在有他这中大来上", min_size=1, max_size=4),
)
SEP = st.sampled_from([" ", "\n", ", ", "。", "\n\n", " - "])


@st.composite
def turns(draw: st.DrawFn) -> list[str]:
    """A growing history: each turn re-sends the previous one and adds text (sometimes it is edited)."""
    out: list[str] = []
    text = ""
    for _ in range(draw(st.integers(1, 8))):
        if text and draw(st.integers(0, 9)) == 0:
            cut = draw(st.integers(0, len(text)))
            text = text[:cut]  # an edited or truncated history
        n = draw(st.integers(0, 120))
        parts = [draw(WORD) + draw(SEP) for _ in range(n)]
        text = text + "".join(parts)
        out.append(text)
    return out


@pytest.mark.slow  # 150 generated conversations, each fingerprinted both ways
@settings(max_examples=150, deadline=None)
@given(history=turns(), min_cut=st.sampled_from([0, 40, 400]))
def test_incremental_fingerprints_equal_a_full_pass(history: list[str], min_cut: int) -> None:
    sp = SessionPrints(FP, min_cut=min_cut)
    for text in history:
        assert sp.fingerprint_text("s", text) == FP.fingerprint_text(text)


def test_a_growing_session_reuses_its_history_and_state_is_bounded() -> None:
    sp = SessionPrints(FP, min_cut=0, max_prints_total=500, max_sessions=3)
    text = ""
    for turn in range(20):
        text += " ".join(f"turn{turn} word{i}" for i in range(100)) + "\n"
        assert sp.fingerprint_text("s1", text) == FP.fingerprint_text(text)
    assert sp.reused_bytes > 0
    for i in range(10):  # other sessions push the first one out: totals stay bounded
        sp.fingerprint_text(f"o{i}", " ".join(f"x{i}y{j}" for j in range(300)) + "\n")
    assert len(sp._states) <= 3 and sp.state_size() <= 500


def test_a_snapshot_carries_neither_the_session_cache_nor_the_key() -> None:
    # As the Kafka join snapshots do (streams/kafka/checkpoint.py): the fingerprinter by reference.
    import io
    import pickle

    sp = SessionPrints(FP, min_cut=0)
    text = " ".join(f"w{i}" for i in range(500)) + "\n"
    sp.fingerprint_text("s", text)
    assert sp.state_size() > 0
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf)
    pickler.persistent_id = lambda obj: "fp" if obj is FP else None  # type: ignore[method-assign]
    pickler.dump(sp)
    assert b"test-key" not in buf.getvalue()
    unpickler = pickle.Unpickler(io.BytesIO(buf.getvalue()))
    unpickler.persistent_load = {"fp": FP}.__getitem__  # type: ignore[assignment]
    back = unpickler.load()
    assert back.state_size() == 0 and not back._states
    longer = text + " ".join(f"v{i}" for i in range(300)) + "\n"
    assert back.fingerprint_text("s", longer) == FP.fingerprint_text(longer)


PURE = Fingerprinter("test-key", k=5, w=12, native=False)


@pytest.mark.slow  # 60 generated conversations x 4 paths
@settings(max_examples=60, deadline=None)
@given(history=turns())
def test_every_path_gives_the_full_pass_fingerprints(history: list[str]) -> None:
    """Native or pure fingerprinter, native polynomial or SHA-256 prefix digest: the same fingerprints."""
    import detectors.session_prints as spm

    for fp in (FP, PURE):
        for native_digest in (True, False):
            with pytest.MonkeyPatch.context() as mp:
                if not native_digest:
                    mp.setattr(spm, "_winnow", None)
                sp = SessionPrints(fp, min_cut=0)
                for text in history:
                    assert sp.fingerprint_text("s", text) == FP.fingerprint_text(text)


@pytest.mark.parametrize("native_digest", [True, False])
def test_an_edit_inside_the_resent_history_is_caught(native_digest: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    import detectors.session_prints as spm

    if not native_digest:
        monkeypatch.setattr(spm, "_winnow", None)
    elif spm._winnow is None:
        pytest.skip("native extension not built")
    sp = SessionPrints(FP, min_cut=0)
    text = " ".join(f"w{i}" for i in range(3000)) + "\n"
    sp.fingerprint_text("s", text)
    for pos in (0, 7, 13, len(text) // 2, len(text) - 3):  # same length, one character changed
        edited = text[:pos] + ("X" if text[pos] != "X" else "Y") + text[pos + 1 :] + "more words here\n"
        before = sp.reused_bytes
        assert sp.fingerprint_text("s", edited) == FP.fingerprint_text(edited)
        assert sp.reused_bytes == before  # not continued: a full pass
        sp.fingerprint_text("s", text)  # back to the original state


def test_native_prefix_digest_is_the_polynomial_it_claims() -> None:
    wn = pytest.importorskip("detectors._winnow")
    p = (1 << 61) - 1

    def ref(d: bytes, r: int) -> int:
        acc = 0
        for i in range(0, len(d) - len(d) % 7, 7):
            acc = (acc * r + int.from_bytes(d[i : i + 7], "little")) % p
        if len(d) % 7:
            acc = (acc * r + int.from_bytes(d[len(d) - len(d) % 7 :], "little")) % p
        return (acc * r + len(d)) % p

    import random

    rng = random.Random(7)
    for _ in range(300):
        data = rng.randbytes(rng.randrange(0, 600))  # several 56-byte steps, and every tail
        r = rng.randrange(1, p)
        b = rng.randrange(0, len(data) + 1)
        a = rng.randrange(0, b + 1)
        assert wn.prefix_digests(data, r, a, b) == (ref(data[:a], r), ref(data[:b], r))
    with pytest.raises(ValueError):
        wn.prefix_digests(b"abc", 5, 2, 1)
    assert wn.prefix_digests("plain ascii text", 12345, 5, 16) == wn.prefix_digests(b"plain ascii text", 12345, 5, 16)
    with pytest.raises(ValueError):  # a non-ASCII str has no UTF-8 of its own to read in place
        wn.prefix_digests("café", 5, 1, 2)


KGRAMS = st.lists(st.sampled_from([0, 1, 2, 3, 5, 8, 2**63, 2**64 - 1]) | st.integers(0, 2**64 - 1), max_size=60)


@settings(max_examples=300, deadline=None)
@given(turns=st.lists(st.tuples(KGRAMS, st.integers(0, 70)), min_size=1, max_size=4), w=st.integers(1, 12))
def test_native_selection_extends_like_the_sorted_array(turns: list[tuple[list[int], int]], w: int) -> None:
    """The C hash set a session keeps (`_winnow.Selection`) appends and keeps exactly what the numpy path does,
    turn after turn: new window minima once each in order, those of the first `commit` windows kept (w <= 8:
    the branchless small-window loop; larger w: the monotone deque)."""
    import numpy as np

    from detectors.session_prints import _extend_sorted

    wn = pytest.importorskip("detectors._winnow")
    sel = wn.Selection()
    ordered = np.empty(0, dtype=np.uint64)
    for values, commit in turns:
        kg = np.array(values, dtype=np.uint64)
        out_c: list[int] = [-1]  # appended to, never replaced
        out_py: list[int] = [-1]
        kept_c = sel.extend(kg, w, commit, out_c)
        kept_py, ordered = _extend_sorted(ordered, kg, w, commit, out_py)
        assert (out_c, kept_c) == (out_py, kept_py)
        assert sel.count == ordered.shape[0] and sorted(set(ordered.tolist())) == ordered.tolist()
    with pytest.raises(ValueError):
        sel.extend(np.zeros(3, dtype=np.uint8), w, 0, [])  # not uint64


@pytest.mark.parametrize("w", [4, 12])  # the production window (C small-window loop) and the deque's
@pytest.mark.parametrize("extra", ["", " café"])  # ASCII (digested in place) and UTF-8 encoded
def test_a_long_session_at_production_parameters_equals_full_passes(w: int, extra: str) -> None:
    fp = Fingerprinter("test-key", k=5, w=w)
    sp = SessionPrints(fp, min_cut=0)
    text = ""
    for turn in range(12):
        text += " ".join(f"t{turn % 3}w{i % 97}{extra}" for i in range(400)) + ("\n" if turn % 4 else "")
        assert sp.fingerprint_text("s", text) == fp.fingerprint_text(text)
    assert sp.reused_bytes > 0


def test_the_native_membership_set_stays_within_32_bytes_a_fingerprint() -> None:
    pytest.importorskip("detectors._winnow")
    sp = SessionPrints(FP, min_cut=0)
    text = ""
    for turn in range(30):
        text += " ".join(f"s{turn}x{i}" for i in range(300)) + "\n"
        sp.fingerprint_text("s", text)
        st = sp._states["s"]
        assert st.seen.count == st.nsel == sp.state_size()  # the set holds exactly the state's selection
        assert st.seen.nbytes <= 32 * st.nsel + 1024  # at most half full after it grows (plus its header)

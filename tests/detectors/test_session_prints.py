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

"""The three runners give the same alert ids on the same events (issue 41): the embedded runner, the direct
topology and the staged topology, in process (tests/parity.py). The scenarios of tests/detectors run through
the same comparison by construction (three_runners_agree); these are the ones a runner once got wrong."""

from __future__ import annotations

from factories import canary, request, response
from parity import run_three

from streams.settings import Settings

MARK = "CTK-CANARY-9f1c0a9e2b7d4c31a0b1c2d3e4f56789"


def test_a_marker_the_receiver_resends_is_its_own_context_in_every_runner() -> None:
    """tests/detectors/test_hostile_input.py's scenario: the staged join scanned only outputs, so bob's r2
    (his own history re-sent, the model repeating it) was a canary_leak there and nowhere else."""
    events = [
        canary("probe-canary-a", MARK, ts=1),
        request("r1", "bob", 2),
        response("r1", "bob", 3, text=f"here: {MARK}."),
        request("r2", "bob", 4, text=f"Earlier you said: here: {MARK}. Go on."),
        response("r2", "bob", 5, text=f"As I said: {MARK}."),
        request("r3", "carol", 6, text="Go on."),
        response("r3", "carol", 7, text=f"{MARK}"),
    ]
    got = run_three(Settings(), [e.model_dump_json(exclude_none=True).encode() for e in events])
    for runner, kinds in got.kinds.items():
        assert sorted(kinds.values()) == ["canary_leak:r1", "canary_leak:r3"], runner
    assert not got.differences()


def test_a_marker_planted_after_an_output_is_not_in_it_in_any_runner() -> None:
    """The staged join scans a response's words once the watermark passed it, and by then it may know a marker
    planted later in event time: bob's r1 (ts 3) quoted a marker only planted at ts 4, and the staged topology
    alone called it a leak."""
    events = [
        request("r1", "bob", 2),
        response("r1", "bob", 3, text=f"see {MARK}"),
        canary("probe-canary-a", MARK, ts=4),
        request("r2", "bob", 5),
        response("r2", "bob", 6, text=f"here: {MARK.lower()}."),
    ]
    got = run_three(Settings(), [e.model_dump_json(exclude_none=True).encode() for e in events])
    for runner, kinds in got.kinds.items():
        assert sorted(kinds.values()) == ["canary_leak:r2"], runner

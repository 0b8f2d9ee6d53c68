"""Event time bounds (detectors/ordering.py): a far-future event moves no clock."""

from __future__ import annotations

from detectors.ordering import EventClock, JumpGuard


def run(guard: JumpGuard[float], times: list[float]) -> tuple[list[float], list[float]]:
    out = [r for ts in times for r in guard.push(ts, ts)] + guard.end()
    return [ts for ts, why in out if why is None], [ts for ts, why in out if why is not None]


def test_wall_clock_bound_rejects_without_moving_the_high_water_mark() -> None:
    clock = EventClock(300.0)
    assert clock.admit(1000.0, now=1000.0) is None
    detail = clock.admit(1e20, now=1000.0)
    assert detail is not None and "ahead of the wall clock" in detail
    assert clock.high_water == 1000.0
    assert clock.admit(1299.0, now=1000.0) is None and clock.high_water == 1299.0
    assert clock.admit(5.0, now=1000.0) is None and clock.high_water == 1299.0  # the past never lowers it


def test_a_lone_future_line_is_rejected_even_as_the_first_line() -> None:
    accepted, rejected = run(JumpGuard(300.0), [9e9, 100.0, 101.0, 102.0, 4e9, 103.0, 104.0])
    assert rejected == [9e9, 4e9]
    assert accepted == [100.0, 101.0, 102.0, 103.0, 104.0]


def test_a_quiet_spell_in_the_log_is_not_a_jump() -> None:
    times = [100.0, 101.0, 3700.0, 3701.0, 9000.0]  # an hour of silence, then the last line after another gap
    accepted, rejected = run(JumpGuard(300.0), times)
    assert accepted == times and rejected == []


def test_order_is_kept_and_every_item_comes_out_once() -> None:
    times = [5.0, 1e12, 6.0, 7.0, 7.5, 2000.0, 2000.5, 1.0]
    accepted, rejected = run(JumpGuard(300.0), times)
    assert sorted(accepted + rejected) == sorted(times)
    assert rejected == [1e12]
    assert accepted == [5.0, 6.0, 7.0, 7.5, 2000.0, 2000.5, 1.0]

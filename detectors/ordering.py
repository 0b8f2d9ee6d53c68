"""Bounding event time: one event stamped far in the future must not drag every clock with it.

Event time drives everything downstream (join expiry, re-sorting, watermarks, index windows), and
each of those only moves forward. So an event more than `max_skew_s` ahead of where its stream
plausibly is gets rejected with reason `future_ts` *before* it can move anything.

Two rules, both pure (the wall clock is passed in by the shell, never read here):

* `EventClock` — the hard bound: `ts > now + max_skew_s` is rejected, `now` being the wall clock.
  Live (Kafka ingest) this is the whole rule: through a quiet spell the wall clock keeps moving, so
  the first event after a pause is not mistaken for a jump. In replay the wall clock is a bound too:
  no log line comes from the future. Accepted events raise `high_water`, rejected ones move nothing.
* `JumpGuard` — the stream-relative bound of a replayed file, which a wall clock cannot give (a
  poisoned line in an August log is still before today). An item more than `max_skew_s` ahead of
  the stream's accepted high-water mark (or the very first item, which has no mark yet) is held for
  one item: accepted if the stream then continues near it (`next.ts >= held.ts - max_skew_s`, as
  after a quiet spell in the log) or ends there; rejected if the stream goes back to where it was
  (a lone outlier). So a poisoned *first* line is judged by the second.

Guarantee: a single future-stamped event never moves event time in replay, and never by more than
`max_skew_s` past the wall clock live. Not covered: a producer that writes two or more consecutive
far-future lines into one stream (it is corroborating itself); the wall-clock bound still caps it.
"""

from __future__ import annotations

from typing import Generic, TypeVar

FUTURE_TS = "future_ts"

T = TypeVar("T")


class EventClock:
    """The accepted event time of one stream and the wall-clock skew guard.

    Usage (Kafka ingest, once per input partition or per worker):
        clock = EventClock(settings.detection.max_future_skew_s)
        detail = clock.admit(event.ts, now=time.time())
        if detail is not None:
            dead_letter(raw, "future_ts", detail)    # nothing else moves
    """

    __slots__ = ("high_water", "max_skew_s")

    def __init__(self, max_skew_s: float, high_water: float = float("-inf")) -> None:
        self.max_skew_s = max_skew_s
        self.high_water = high_water  # newest ACCEPTED event time

    def check(self, ts: float, now: float | None = None) -> str | None:
        """Why `ts` is too far ahead, or None; changes nothing."""
        if now is not None and ts > now + self.max_skew_s:
            return f"ts {ts:.3f} is {ts - now:.0f} s ahead of the wall clock (max_future_skew_s={self.max_skew_s:g})"
        return None

    def admit(self, ts: float, now: float | None = None) -> str | None:
        """None when `ts` is accepted (raises `high_water`); else the detail of a `future_ts` reject."""
        detail = self.check(ts, now)
        if detail is None and ts > self.high_water:
            self.high_water = ts
        return detail


class JumpGuard(Generic[T]):
    """Stream-relative bound with one item of lookahead (see the module docstring).

    `push(ts, item)` and, at the end of the stream, `end()` return the items released so far, in
    stream order, each with None (accepted) or the detail of a `future_ts` reject.
    """

    __slots__ = ("_held", "_held_ts", "high_water", "max_skew_s")

    def __init__(self, max_skew_s: float) -> None:
        self.max_skew_s = max_skew_s
        self.high_water = float("-inf")
        self._held: T | None = None
        self._held_ts = 0.0

    def push(self, ts: float, item: T) -> list[tuple[T, str | None]]:
        out: list[tuple[T, str | None]] = []
        if self._held is not None:
            held, held_ts = self._held, self._held_ts
            self._held = None
            if ts >= held_ts - self.max_skew_s:
                self.high_water = max(self.high_water, held_ts)
                out.append((held, None))
            else:
                gap = held_ts - max(self.high_water, ts)
                out.append((held, f"ts {held_ts:.3f} is {gap:.0f} s ahead of the events around it in its stream"))
        if self.high_water == float("-inf") or ts > self.high_water + self.max_skew_s:
            self._held, self._held_ts = item, ts
        else:
            self.high_water = max(self.high_water, ts)
            out.append((item, None))
        return out

    def end(self) -> list[tuple[T, str | None]]:
        if self._held is None:
            return []
        held, self._held = self._held, None
        self.high_water = max(self.high_water, self._held_ts)
        return [(held, None)]

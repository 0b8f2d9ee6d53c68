"""A Monitor driven as a live runner drives it: each event, then a tick of the clock at its event time.

A cache domain judges an exchange once event time has passed it (a later instant, a live runner's tick, or the
end of input: ADR 0011, stop 67), so that two exchanges of one instant are judged in one order in every runner.
A scenario test reads each response's verdict as soon as it came, as an operator of a live runner sees it a tick
later; `observe_now` is that.
"""

from __future__ import annotations

from detectors.domain import DomainMonitor
from detectors.monitor import Monitor
from schemas.alert import Alert
from schemas.events import Event
from schemas.exchange import Exchange


def observe_now(m: Monitor, event: Event) -> list[Alert]:
    """Feed `event` to `m`, then tick at its event time: what it completed is judged now."""
    return m.observe(event) + m.tick(event.ts)


def judge_now(dm: DomainMonitor, ex: Exchange) -> list[Alert]:
    """Hand `ex` to one domain's monitor and judge it now, as `observe_now` does for a whole Monitor."""
    return dm.observe_exchange(ex) + dm.advance(ex.ts, True)

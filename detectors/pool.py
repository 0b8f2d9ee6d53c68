"""How much a cache domain has allocated since a text ran: a stale page cannot outlive its pool's turnover.

Both engines in the incident's class reuse freed KV memory in order: SGLang's token-to-KV allocator takes free slots
from the front of its free list and appends freed ones at the back; vLLM's free block queue evicts from the front and
returns freed (and prefix-cached) blocks to the back, touched blocks moving back again. Either way, once the domain has
allocated its pool's capacity in tokens since a request's pages were freed (or last touched), those pages hold other
text. A stale-page read, a page-table mix-up or a prefix-cache collision can only carry text the pool still holds, so
a content match whose newest source text is several pool turnovers old is something else: text the model knows (a
quote it echoes), a document both tenants had. `PoolClock` measures the allocation in event time from the engine's
own token counts; the overlap signal caps such a match at warning (docs/adr/0004, precision).

Bounded: one mark per `step_s` of event time over `horizon_s` (the index's window), i.e. at most horizon_s / step_s
pairs. Without token counts the clock stands still, so nothing is ever judged out of the pool (the safe side)."""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from typing import Any


class PoolClock:
    __slots__ = ("_marks", "horizon_s", "step_s", "total")

    def __init__(self, horizon_s: float, step_s: float = 5.0) -> None:
        self.horizon_s = horizon_s
        self.step_s = step_s
        self.total = 0.0  # tokens allocated in the domain since the clock started (engine counts)
        # (event time, total at that time), one per step: what was allocated before each mark.
        self._marks: deque[tuple[float, float]] = deque()

    def add(self, ts: float, tokens: float) -> None:
        """An exchange at event time `ts` allocated `tokens` (prompt and output, as the engine counted them)."""
        if tokens > 0:
            self.total += tokens
        marks = self._marks
        if not marks or ts >= marks[-1][0] + self.step_s:
            marks.append((ts, self.total))
            while marks and marks[0][0] < ts - self.horizon_s:
                marks.popleft()

    def since(self, ts: float) -> float:
        """Tokens allocated at or after event time `ts`, never more than the truth: counted from the first mark at or
        after `ts` (the allocation between `ts` and that mark is left out), 0 when no mark is that late."""
        marks = self._marks
        i = bisect_left(marks, (ts, float("-inf")))
        return self.total - marks[i][1] if i < len(marks) else 0.0

    def __getstate__(self) -> dict[str, object]:
        return {"horizon_s": self.horizon_s, "step_s": self.step_s, "total": self.total, "marks": list(self._marks)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.horizon_s = float(state["horizon_s"])
        self.step_s = float(state["step_s"])
        self.total = float(state["total"])
        self._marks = deque(state["marks"])

"""Events to a function, one at a time (the live demo's in-process monitor, a test's list), or nowhere."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from streams.outputs.base import Output, Produced, Refused


class FunctionOutput(Output):
    def __init__(self, fn: Callable[[Any], object]) -> None:
        self.fn = fn

    def send(self, events: Sequence[Produced]) -> list[Refused]:
        for ev in events:
            self.fn(ev)
        return []


class NullOutput(Output):
    """Events go nowhere (a prober run only for its report)."""

    def send(self, events: Sequence[Produced]) -> list[Refused]:
        return []

"""Events as JSON Lines: to a file, or to stdout for a pipeline (`crosstalk replay -` reads it)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import orjson
from pydantic import BaseModel

from streams.outputs.base import Letter, Output, Produced, Refused


def _line(event: Produced) -> bytes:
    if isinstance(event, BaseModel):
        return event.model_dump_json(exclude_none=True).encode() + b"\n"
    return orjson.dumps(event) + b"\n"


class JsonlOutput(Output):
    """`out`: a path ("-" is stdout, appended to otherwise) or an open binary stream, which stays the caller's.
    `rejects_out`: where dead letters go, as JSON Lines (none: dropped, the caller counts them). Each batch is
    flushed as it is written, so that a pipeline reading stdout sees every event as it happens."""

    def __init__(self, out: str | IO[bytes] | Any, rejects_out: Any = None) -> None:
        self._own = isinstance(out, str) and out != "-"
        if isinstance(out, str):
            if self._own:
                Path(out).parent.mkdir(parents=True, exist_ok=True)
            out = Path(out).open("ab") if self._own else sys.stdout.buffer  # noqa: SIM115
        self.out = out
        self.rejects_out = rejects_out

    def send(self, events: Sequence[Produced]) -> list[Refused]:
        write = self.out.write
        for ev in events:
            write(_line(ev))
        self.out.flush()
        return []

    def dead_letter(self, letter: Letter) -> None:
        if self.rejects_out is not None:
            self.rejects_out.write(orjson.dumps({"source": letter.source, **letter.record}) + b"\n")
            self.rejects_out.flush()

    def flush(self) -> None:
        self.out.flush()

    def close(self) -> None:
        if self._own:
            self.out.close()
        else:
            self.out.flush()

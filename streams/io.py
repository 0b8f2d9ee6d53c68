"""Bytes in and out of files, shared by the commands and the adapters below them.

Opening an input (gzip by its name, `-` for stdin), reading its lines in bounded memory, and an output
file that is created only when something is written to it. Light on purpose: the gateway producer
imports this, so it pulls in nothing beyond the standard library.
"""

from __future__ import annotations

import gzip
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, BinaryIO


def open_binary(path: str) -> BinaryIO:
    if path == "-":
        return sys.stdin.buffer
    raw = Path(path).open("rb")  # noqa: SIM115 - the caller closes what it is handed
    if path.endswith(".gz"):
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


def bounded_lines(fh: BinaryIO, max_bytes: int) -> Iterator[tuple[bytes, int]]:
    """(line, size) of each line; a line longer than `max_bytes` comes as its first `max_bytes + 1`
    bytes with its full size, and the rest of it is skipped without ever being held, so memory
    stays bounded whatever the input (a gzip bomb of 1 GiB without a newline included)."""
    readline = fh.readline
    chunk = 1 << 16
    while True:
        line = readline(max_bytes + 1)
        if not line:
            return
        size = len(line)
        if size > max_bytes and not line.endswith(b"\n"):
            while True:  # skip to the end of this line
                rest = readline(chunk)
                size += len(rest)
                if not rest or rest.endswith(b"\n"):
                    break
        yield line, size


class LazyFile:
    """A file opened on first write: a clean run leaves no empty rejects file behind."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fh: IO[bytes] | None = None

    def write(self, data: bytes) -> int:
        if self._fh is None:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._fh = Path(self.path).open("ab")  # noqa: SIM115 - closed in close()
        return self._fh.write(data)

    def flush(self) -> None:
        if self._fh is not None:
            self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()

"""The parent's one read of the input before `replay --jobs N` forks its jobs (streams/embedded/jobs.py).

It finds the requests whose response names another cache domain, so that both domains' jobs keep their text.
It reads as the jobs will, and no more trustingly (issue 42): lines in bounded memory (a line over
`ingest.max_event_bytes` is skipped here and rejected, with its reason and counter, by the job that owns it),
and a truncated or corrupt input simply ends the pre-pass (the jobs meet the same end, report it, and the run
exits 6). Only regular files can be read twice: `rereadable` says which input cannot.
"""

from __future__ import annotations

import stat
import zlib
from pathlib import Path
from typing import Any

import orjson

from streams.inputs.files import open_binary
from streams.io import bounded_lines


def not_rereadable(paths: list[str]) -> str | None:
    """The first input that cannot be read more than once (stdin, a pipe such as `<(zcat …)`, a FIFO, a
    device), or None when every input is a regular file."""
    for path in paths:
        if path == "-":
            return path
        try:
            mode = Path(path).stat().st_mode
        except OSError:
            continue  # missing or unreadable: check_inputs says so first
        if not stat.S_ISREG(mode):
            return path
    return None


def moved_requests(paths: list[str], max_bytes: int = 1 << 20) -> dict[str, str]:
    """request_id -> its response's cache domain, for the requests that name another domain (or none): where a
    request's exchange is judged when its response comes. The first response of an id counts, as in the join."""
    requests: dict[str, Any] = {}
    responses: dict[str, str] = {}
    for path in paths:
        try:
            with open_binary(path) as fh:
                for line, size in bounded_lines(fh, max_bytes):
                    if size <= max_bytes:
                        _note(line, requests, responses)
        except (EOFError, OSError, zlib.error):  # gzip.BadGzipFile is an OSError; the jobs report it
            continue
    return {rid: dom for rid, dom in responses.items() if requests.get(rid, dom) != dom}


def _note(line: bytes, requests: dict[str, Any], responses: dict[str, str]) -> None:
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return
    if type(obj) is not dict:
        return
    rid = obj.get("request_id")
    if type(rid) is not str:
        return
    kind = obj.get("type")
    if kind == "request":
        requests.setdefault(rid, obj.get("cache_domain"))
    elif kind == "response" and type(obj.get("cache_domain")) is str:
        responses.setdefault(rid, obj["cache_domain"])

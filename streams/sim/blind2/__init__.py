"""blind-v2: a held-out multi-tenant LLM serving traffic profile with labelled cross-tenant leaks (README.md)."""

from __future__ import annotations

from pathlib import Path

from streams.sim.blind2.shapes import LEAK_CLASSES, SHAPES

__all__ = ["LEAK_CLASSES", "SHAPES", "write"]


def write(shape_name: str, seed: int, out: Path, gzip_events: bool = False) -> dict[str, Path]:
    """Generate one run of `shape_name` with `seed` into `out`: {"events", "labels", "world"} paths."""
    from streams.sim.blind2.writer import write as _write

    return _write(shape_name, seed, Path(out), gzip_events)

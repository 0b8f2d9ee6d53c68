"""streams/heap.py: glibc's thresholds fixed and free pages given back, measured on this process's own RSS."""

from __future__ import annotations

import subprocess
import sys

import pytest

from streams import heap

# A child process: frees 200 blocks of 1 MiB that sat under the heap's top (the dynamic threshold has risen after
# the first freed mmapped block), and prints its RSS before and after `heap.trim()` (or nothing, when not glibc).
CHILD = r"""
import sys
from pathlib import Path
from streams import heap
def rss():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
if sys.argv[1] == "tune":
    assert heap.tune()
first = bytearray(b"x") * (16 << 20)  # mmapped, then freed: glibc raises its mmap threshold to 16 MiB
del first
blocks = [bytearray(b"x") * (1 << 20) for _ in range(200)]  # written: resident
keep = bytearray(b"x") * (1 << 20)  # a live block above them keeps the heap's top from shrinking
del blocks
before = rss()
trimmed = heap.trim()
print(before, rss(), trimmed)
"""


def _run(mode: str) -> tuple[int, int, bool]:
    out = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=60, check=True)
    before, after, trimmed = out.stdout.split()
    return int(before), int(after), trimmed == "True"


@pytest.mark.skipif(not sys.platform.startswith("linux") or heap._glibc() is None, reason="glibc only")
def test_freed_blocks_stay_resident_until_trimmed_or_tuned() -> None:
    before, after, trimmed = _run("plain")
    assert before - after > 100 << 20 and trimmed, (before, after)  # resident until malloc_trim gave them back
    before, after, _ = _run("tune")
    assert before < 150 << 20, before  # tuned: each 1 MiB block was its own mapping, unmapped when freed

"""The operator's public-text corpus on disk: fingerprinted with the monitor's key and parameters, read at start.

Text goes in, fingerprints come out: the file holds keyed 64-bit fingerprints only (detectors/public.py),
so it reveals nothing without the key, and a key change makes it refuse to load rather than silently
match nothing.

A file added is bounded input (issue 42: a 140 MB file peaked at 2.6 GB, /dev/zero grew without end, a
FIFO hung, binary and gzip files passed as text): regular files only, at most `corpus.max_file_bytes`,
UTF-8 text without NUL bytes, gzip only when asked (`--gunzip`), read and fingerprinted in 1 MiB chunks.
"""

from __future__ import annotations

import codecs
import gzip
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np

from detectors.fingerprint import SCHEME, Fingerprinter
from detectors.monitor import make_fingerprinter
from detectors.public import PublicSet
from streams.settings import Settings

CHUNK = 1 << 20
# Characters carried from one chunk into the next, from a word boundary: every k-gram that spans the cut
# is made whole in the next chunk (k words fit many times over); the repeats are deduplicated.
_OVERLAP = 4096
_BATCH = 1 << 20  # fingerprints gathered before one merge into the set (8 MiB)


class CorpusError(Exception):
    """The corpus file cannot be used (unreadable, corrupt, or made with another key or parameters)."""


def empty_for(settings: Settings) -> PublicSet:
    fp = make_fingerprinter(settings.detection)
    return PublicSet(SCHEME, fp.key_id, fp.k, fp.w)


def read(path: str | Path, settings: Settings) -> PublicSet:
    fp = make_fingerprinter(settings.detection)
    try:
        public = PublicSet.from_bytes(Path(path).read_bytes())
    except (OSError, ValueError) as exc:
        raise CorpusError(f"public corpus {path}: {exc}") from exc
    try:
        public.check(SCHEME, fp.key_id, fp.k, fp.w)
    except ValueError as exc:
        raise CorpusError(str(exc)) from exc
    return public


def write(public: PublicSet, path: str | Path) -> None:
    """Atomically: a new file in the target's directory, created exclusively under a name of its own (never
    through a link someone planted at a guessable `.tmp` name), then renamed over the target."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")  # O_CREAT | O_EXCL
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(public.to_bytes())
        os.replace(tmp, path)  # atomic: a crash mid-write never leaves a torn corpus behind
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _open_regular(name: str) -> BinaryIO:
    # O_NONBLOCK: a FIFO opens at once instead of waiting for a writer, and is then refused.
    fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CorpusError(f"{name}: not a regular file (a device, pipe or directory cannot be added)")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def _text_chunks(name: str, max_bytes: int, gunzip: bool) -> Iterator[str]:
    """The file's text in chunks of about CHUNK bytes, refused (CorpusError) past max_bytes, when binary,
    not UTF-8, or gzip-compressed without `gunzip`."""
    with _open_regular(name) as raw:
        compressed = raw.read(2) == b"\x1f\x8b"
        raw.seek(0)
        if compressed and not gunzip:
            raise CorpusError(f"{name}: gzip-compressed; decompress it or pass --gunzip")
        if not compressed and os.fstat(raw.fileno()).st_size > max_bytes:  # refused unread
            raise CorpusError(f"{name}: over corpus.max_file_bytes ({max_bytes:,} bytes)")
        fh: BinaryIO = gzip.GzipFile(fileobj=raw, mode="rb") if compressed else raw  # type: ignore[assignment]
        decoder = codecs.getincrementaldecoder("utf-8")("strict")
        total = 0
        while True:
            try:
                data = fh.read(CHUNK)
            except (OSError, EOFError) as exc:
                raise CorpusError(f"{name}: cannot be decompressed ({exc})") from None
            total += len(data)
            if total > max_bytes:
                raise CorpusError(f"{name}: over corpus.max_file_bytes ({max_bytes:,} bytes)")
            if b"\0" in data:
                raise CorpusError(f"{name}: binary (a NUL byte within its first {total:,} bytes), not text")
            try:
                text = decoder.decode(data, final=not data)
            except UnicodeDecodeError as exc:
                where = total - len(data) + exc.start
                raise CorpusError(f"{name}: not UTF-8 text ({exc.reason} near byte {where:,})") from None
            if not data:
                return
            yield text


def _split(piece: str) -> tuple[str, str]:
    """(what to fingerprint now, what to carry into the next chunk): the piece up to its last whitespace (a chunk
    may end inside a word, whose fragment must not become a fingerprint), and from a word boundary about
    _OVERLAP characters before that cut, so that every k-gram across the cut is made whole next time."""
    cut = max(piece.rfind(c) for c in " \n\t\r")
    if cut < 0:  # no whitespace (CJK, or one endless token): units are characters, cut anywhere
        cut = len(piece)
    head = piece[:cut]
    tail = head[-_OVERLAP:]
    space = next((i for i, c in enumerate(tail) if c.isspace()), -1)
    return head, (tail[space + 1 :] if space >= 0 else tail) + piece[cut:]


def add_file(public: PublicSet, fp: Fingerprinter, name: str, max_bytes: int, gunzip: bool = False) -> int:
    """Every k-gram of the file's text into `public`, in bounded memory; returns how many fingerprints were new.
    Every k-gram, not only the winnowed selection: an output quoting any part of the text selects its own
    fingerprints from these, whatever the window boundaries around the quote."""
    before = len(public)
    batch: list[np.ndarray] = []
    held = 0
    carry = ""
    for text in _text_chunks(name, max_bytes, gunzip):
        head, carry = _split(carry + text)
        batch.append(fp.kgram_hashes(fp.text_hashes(head)))
        held += batch[-1].size
        if held >= _BATCH:
            public.add(np.concatenate(batch))
            batch, held = [], 0
    batch.append(fp.kgram_hashes(fp.text_hashes(carry)))
    public.add(np.concatenate(batch))
    return len(public) - before


LICENCES = Path(__file__).with_name("licences")


def licences(settings: Settings) -> PublicSet:
    """The built-in licence texts (`licences/`), every k-gram, fingerprinted with the monitor's key and parameters:
    a few hundred kilobytes of text, so at start, never stored."""
    public = empty_for(settings)
    fp = make_fingerprinter(settings.detection)
    for path in sorted(LICENCES.glob("*.txt")):
        public.add(fp.kgram_hashes(fp.text_hashes(path.read_text(encoding="utf-8"))))
    return public


def load_public(settings: Settings) -> PublicSet | None:
    """The configured corpus with the built-in licences (`corpus.licences`), or None when neither is configured. A
    configured but unusable corpus is an error: running without it would turn every public passage into a false
    alarm."""
    public = read(settings.corpus.path, settings) if settings.corpus.path else None
    if settings.corpus.licences:
        builtin = licences(settings)
        if public is None:
            return builtin
        public.add(builtin.hashes())
    return public

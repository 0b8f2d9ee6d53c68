"""The operator's public-text corpus on disk: fingerprinted with the monitor's key and parameters, read at start.

Text goes in, fingerprints come out: the file holds keyed 64-bit fingerprints only (detectors/public.py),
so it reveals nothing without the key, and a key change makes it refuse to load rather than silently
match nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

from detectors.fingerprint import SCHEME
from detectors.monitor import make_fingerprinter
from detectors.public import PublicSet
from streams.settings import Settings


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
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(public.to_bytes())
    os.replace(tmp, path)  # atomic: a crash mid-write never leaves a torn corpus behind


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

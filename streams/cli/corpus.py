"""`crosstalk corpus add FILES... | info`: the operator's public text, counted as common, never as evidence.

Licences, documentation, a RAG collection, quotes an application serves: text that many tenants may
legitimately have. Each file is fingerprinted with the monitor's key and parameters (every k-gram, about
8 bytes per word of text) and merged into the corpus file (`corpus.path`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from streams.inputs.corpus import CorpusError, empty_for, read, write
from streams.settings import load_settings


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["add", "info"])
    p.add_argument("files", nargs="*", help="text files (UTF-8) to add")
    p.add_argument("--corpus", help="corpus file (default: corpus.path)")


def run(args: argparse.Namespace) -> int:
    settings = load_settings(getattr(args, "config", None))
    path = args.corpus or settings.corpus.path
    if not path:
        print("crosstalk corpus: no corpus file: pass --corpus PATH or set corpus.path", file=sys.stderr)
        return 2
    try:
        public = read(path, settings) if Path(path).exists() else empty_for(settings)
    except CorpusError as exc:
        print(f"crosstalk corpus: {exc}", file=sys.stderr)
        return 2
    if args.action == "info":
        print(
            f"{path}: {len(public):,} fingerprints, scheme {public.scheme}, key id {public.key_id}, "
            f"k={public.k} w={public.w}"
        )
        return 0
    from detectors.monitor import make_fingerprinter

    fp = make_fingerprinter(settings.detection)
    for name in args.files:
        try:
            text = Path(name).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            print(f"crosstalk corpus: {name}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        # Every k-gram, not only the winnowed selection: an output quoting any part of the text selects its
        # own fingerprints from these, whatever the window boundaries around the quote.
        new = public.add(fp.kgram_hashes(fp.text_hashes(text)).tolist())
        print(f"{name}: {new:,} new fingerprints", file=sys.stderr)
    write(public, path)
    print(f"{path}: {len(public):,} fingerprints", file=sys.stderr)
    return 0

"""`crosstalk corpus add FILES... | info`: the operator's public text, counted as common, never as evidence.

Licences, documentation, a RAG collection, quotes an application serves: text that many tenants may
legitimately have. Each file is fingerprinted with the monitor's key and parameters (every k-gram, about
8 bytes per word of text) and merged into the corpus file (`corpus.path`). Exit codes: 0 done, 2 any error
(one line on stderr; the corpus file is left as it was).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from streams.inputs.corpus import CorpusError, add_file, empty_for, read, write
from streams.settings import load_settings, require_fingerprint_key


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["add", "info"])
    p.add_argument("files", nargs="*", help="text files (UTF-8; regular files, at most corpus.max_file_bytes)")
    p.add_argument("--corpus", help="corpus file (default: corpus.path)")
    p.add_argument("--gunzip", action="store_true", help="decompress gzip-compressed files (else they are refused)")


def run(args: argparse.Namespace) -> int:
    settings = load_settings(getattr(args, "config", None))
    path = args.corpus or settings.corpus.path
    if not path:
        print("crosstalk corpus: no corpus file: pass --corpus PATH or set corpus.path", file=sys.stderr)
        return 2
    # Without a configured key the fingerprints would be of a random key for this process: a corpus that
    # no replay or worker could ever load (issue 42: it was written, and the command exited 0).
    require_fingerprint_key(settings, f"corpus {args.action}")
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
            new = add_file(public, fp, name, settings.corpus.max_file_bytes, args.gunzip)
        except CorpusError as exc:
            print(f"crosstalk corpus: {exc}; nothing was written", file=sys.stderr)
            return 2
        except OSError as exc:
            print(f"crosstalk corpus: {name}: {exc.strerror or exc}; nothing was written", file=sys.stderr)
            return 2
        print(f"{name}: {new:,} new fingerprints", file=sys.stderr)
    try:
        write(public, path)
    except OSError as exc:
        print(f"crosstalk corpus: {path}: cannot write ({exc.strerror or exc})", file=sys.stderr)
        return 2
    print(f"{path}: {len(public):,} fingerprints", file=sys.stderr)
    return 0

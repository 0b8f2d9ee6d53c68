"""`crosstalk corpus add FILES... | learn EVENTS... | info`: text counted as common, never as evidence.

`add`: the operator's public text. Licences, documentation, a RAG collection, quotes an application serves: text
that many tenants may legitimately have. Each file is fingerprinted with the monitor's key and parameters (every
k-gram, about 8 bytes per word of text) and merged into the corpus file (`corpus.path`).

`learn`: a warm start for a new deployment. The event logs of another deployment of the same model (same key) are
replayed, and what each of its warm cache domains learned is common (detectors/commons.py) is merged into the corpus
file. A new deployment that reads it knows from its first event what the other learned over its warm-up
(docs/connect.md, "A new deployment"). Exit codes: 0 done, 2 any error (one line on stderr; the corpus file is left
as it was), 3 nothing learned (no domain of the logs was warm at their end).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from detectors.public import PublicSet
from streams.inputs.corpus import CorpusError, add_file, empty_for, read, write
from streams.settings import Settings, load_settings, require_fingerprint_key


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["add", "learn", "info"])
    p.add_argument(
        "files",
        nargs="*",
        help="add: text files (UTF-8; regular files, at most corpus.max_file_bytes); learn: event logs",
    )
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
    if args.action == "learn":
        learned = _learn(args.files, settings, public)
        if learned is None:
            return 2
        if not learned:
            print("crosstalk corpus learn: no cache domain of the logs was warm at their end; nothing written",
                  file=sys.stderr)  # fmt: skip
            return 3
        return _write(public, path)
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
    return _write(public, path)


def _write(public: PublicSet, path: str) -> int:
    try:
        write(public, path)
    except OSError as exc:
        print(f"crosstalk corpus: {path}: cannot write ({exc.strerror or exc})", file=sys.stderr)
        return 2
    print(f"{path}: {len(public):,} fingerprints", file=sys.stderr)
    return 0


def _learn(logs: list[str], settings: Settings, public: PublicSet) -> dict[str, int] | None:
    """Replay `logs` and merge what each warm domain learned is common into `public`: {domain: new fingerprints};
    None on an error (said on stderr)."""
    from detectors.commons import learned_commons
    from streams.embedded.runner import EmbeddedRunner

    if not logs:
        print("crosstalk corpus learn: no event logs given", file=sys.stderr)
        return None
    runner = EmbeddedRunner(settings)
    try:
        runner.run_files(logs)
    except (OSError, ValueError) as exc:
        print(f"crosstalk corpus learn: {exc}", file=sys.stderr)
        return None
    monitor = runner.monitor
    learned: dict[str, int] = {}
    for name, dm in sorted(monitor.domains.items()):
        commons = learned_commons(dm, monitor.watermark)
        state = "cold: skipped" if commons is None else f"{commons.size:,} common fingerprints"
        if commons is not None:
            learned[name] = public.add(commons)
            state += f", {learned[name]:,} new"
        print(f"{name}: {state}", file=sys.stderr)
    return learned

"""`crosstalk simulate`: a deterministic multi-tenant, prefill/decode-disaggregated inference service.

Profiles (streams/sim/): `stdlib-code` (code_profile.py: coding agents on real Python source, the GLM-5.3
placeholder fault) and `multilingual` (multilingual.py: Chinese, Japanese, German, English and code tenants,
multi-turn sessions, public-text decoys, the placeholder fault plus a second bug class that leaks stale page
fragments with no mechanism symptom). The engine is engine.py, the shared types world.py, output writer.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

from streams.sim.corpus import corpus as _corpus
from streams.sim.corpus import words_of
from streams.sim.world import (
    DEFAULT_DOMAINS,
    DEFAULT_START_TS,
    FAULT_SHARE,
    INCIDENT_CAPACITY,
    INCIDENT_WINDOW,
    MARKER_PREFIX,
    PROBES,
    PROFILES,
    CacheDomain,
    Labels,
    SimConfig,
)
from streams.sim.writer import iter_simulation, public_corpus, write_public_corpus, write_simulation

__all__ = [
    "DEFAULT_DOMAINS",
    "DEFAULT_START_TS",
    "INCIDENT_CAPACITY",
    "INCIDENT_WINDOW",
    "MARKER_PREFIX",
    "PROBES",
    "PROFILES",
    "CacheDomain",
    "Labels",
    "SimConfig",
    "_corpus",
    "add_arguments",
    "config_from_args",
    "iter_simulation",
    "public_corpus",
    "run",
    "words_of",
    "write_public_corpus",
    "write_simulation",
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = SimConfig()
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    parser.add_argument("--profile", choices=PROFILES, default=d.profile, help="traffic profile (default %(default)s)")
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--duration", type=float, default=d.duration_s, help="simulated seconds")
    parser.add_argument("--rate", type=float, default=d.rate, help="requests per second of regular tenants")
    parser.add_argument("--tenants", type=int, default=d.tenants)
    parser.add_argument(
        "--fault-at",
        type=float,
        default=None,
        help=f"fault onset, seconds after start (default: {FAULT_SHARE * 100:.0f}%% of --duration)",
    )
    parser.add_argument("--no-fault", action="store_true", help="never switch the fault on")
    parser.add_argument("--gzip", action="store_true", help="write events.jsonl.gz")
    parser.add_argument(
        "--max-prompt-chars", type=int, default=d.max_prompt_text_chars, help="prompt_text cut (producer truncation)"
    )
    parser.add_argument(
        "--public-corpus-out",
        type=Path,
        default=None,
        help="also write the profile's public documents (decoy sources) to this file, for `crosstalk corpus add`",
    )


def config_from_args(args: argparse.Namespace) -> SimConfig:
    return SimConfig(
        seed=args.seed,
        duration_s=args.duration,
        rate=args.rate,
        tenants=args.tenants,
        fault_at_s=None if args.no_fault else ("auto" if args.fault_at is None else args.fault_at),
        max_prompt_text_chars=args.max_prompt_chars,
        profile=args.profile,
    )


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    summary = write_simulation(args.out, config, gzip_events=args.gzip, progress=sys.stderr.isatty())
    if args.public_corpus_out is not None:
        summary["public_corpus_path"] = str(args.public_corpus_out)
        summary["public_documents"] = write_public_corpus(args.public_corpus_out, config)
    sys.stdout.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streams.sim.simulate", description=__doc__.split("\n", 1)[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())

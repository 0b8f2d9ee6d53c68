#!/usr/bin/env python
"""Where blind-v1's false alarms come from: one run (shape, seed, key) replayed without a corpus, and each false high
traced to the longest text the output shares with the request the alert names, looked up in the profile's pools.

    python scripts/blind_false_alarms.py --shape mid-24 --seed 2 --key blind-key-2

Classes: `rag` (a sentence of the deployment's shared RAG collection, which the profile's model also writes
unprompted), `stock` (the model's openers, closers and intros), `template` (a framework's prompt template),
`news/quotes`, `other`, `short` (under 12 characters shared). An analysis of the frozen profile, never an input to
a threshold: docs/evaluation.md reports it beside the figures.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from difflib import SequenceMatcher
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluate_blind import SHAPES, key_of  # noqa: E402

from streams.embedded.runner import EmbeddedRunner  # noqa: E402
from streams.settings import Settings  # noqa: E402
from streams.sim.blind.__main__ import write  # noqa: E402
from streams.sim.blind.model import CLOSERS, INTROS, OPENERS  # noqa: E402
from streams.sim.blind.world import Shape, build_world  # noqa: E402
from streams.sim.evaluate import evaluate  # noqa: E402


def pools(shape: Shape) -> dict[str, list[str]]:
    world = build_world(shape)
    stock = [s for t in (OPENERS, CLOSERS) for ss in t.values() for s in ss]
    stock += [s for kinds in INTROS.values() for ss in kinds.values() for s in ss]
    return {
        "stock": stock,
        "template": list(world.templates.values()),
        "news/quotes": [s for ss in world.news.values() for s in ss],
        "rag": [s for ss in world.knowledge.values() for s in ss],
    }


def where(shared: str, known: dict[str, list[str]]) -> str:
    shared = shared.strip()
    if len(shared) < 12:
        return "short"
    probe = shared[:60]
    for name, texts in known.items():
        if any(probe in t or (name == "rag" and t in shared) for t in texts):
            return name
    return "other"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="mid-24", choices=sorted(SHAPES))
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--key", default="blind-key-2", help="a key label of scripts/evaluate_blind.py")
    ap.add_argument("--work", type=Path, default=Path("/tmp/crosstalk-blind-fa"))
    a = ap.parse_args()
    shape = Shape(seed=a.seed, **SHAPES[a.shape])
    paths = write(shape, a.work / f"{a.shape}-s{a.seed}")
    texts: dict[tuple[str, str], str] = {}
    for line in paths["events"].open("rb"):
        ev = orjson.loads(line)
        if ev.get("type") in ("request", "response"):
            texts[(ev["request_id"], ev["type"])] = ev.get("prompt_text") or ev.get("output_text") or ""
    settings = Settings(detection={"fingerprint_key": key_of(a.key)}, corpus={"path": None})
    result = EmbeddedRunner(settings).run_files([str(paths["events"])])
    labels = orjson.loads(paths["labels"].read_bytes())
    ev = evaluate(labels, result.alerts)
    by_request = defaultdict(list)
    for alert in result.alerts:
        for rid in alert.request_ids:
            by_request[rid].append(alert)
    known = pools(shape)
    classes: Counter[str] = Counter()
    for rid in ev.false_alarm_request_ids:
        out = texts.get((rid, "response"), "")
        found = set()
        for alert in by_request[rid]:
            signal = next(
                (s for s in alert.evidence if s.severity in ("high", "critical") and s.source_tenant_id), None
            )
            if signal is None:
                continue
            best = ""
            for source in signal.figures.get("source_request_ids", [])[:2]:
                for kind in ("request", "response"):
                    other = texts.get((source, kind), "")
                    m = SequenceMatcher(None, out, other, autojunk=False).find_longest_match(0, len(out), 0, len(other))
                    if m.size > len(best):
                        best = out[m.a : m.a + m.size]
            found.add(where(best, known))
        classes[" + ".join(sorted(found)) or "mechanism only"] += 1
    print(f"{a.shape} seed {a.seed} {a.key}: {ev.false_alarms} false high+ of {ev.clean_2xx} clean 2xx")
    for name, n in classes.most_common():
        print(f"  {n:4d}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

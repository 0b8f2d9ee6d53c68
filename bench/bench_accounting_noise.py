"""How often a clean prompt's usage departs from its tenant's counts, with two real tokenizers (ADR 0020).

The other-prompt check (`token_accounting_mismatch`, basis other_prompt) reads an answer's usage as another prompt's
when it departs from what the tenant's own counts make of the prompt. Our profiles count usage exactly as the gateway
does, so they cannot show its false alarms. Here the gateway counts with tiktoken's cl100k_base (LiteLLM's default
counter) and the engine with another real tokenizer (Anthropic's, shipped with LiteLLM, or o200k_base), plus a fixed
overhead the gateway does not count (0, 30 or 200 tokens: a template, an injected system prompt, tool schemas).

Each "tenant" writes one kind of text (UDHR articles, compiler diagnostics, UI strings in 8-11 languages, Python
code, and three mixes); its prompts are 2-12, 10-60 or 40-200 random units of it, or "clustered": mostly 20-30 units
and one in ten 2-6 (a tenant's prompts are seldom spread evenly over sizes). Every prompt goes through the real
AccountingDetector of the checkout on `sys.path` (run it with PYTHONPATH set to a worktree for a baseline), and then:
- clean: the prompt with its own engine count: an other-prompt signal is a false alarm;
- swapped: the same prompt with the engine count of the tenant's previous prompt: found when it is signalled (the
  share of swaps of two turns of one tenant, the hardest case: both prompts are of one kind and size range).

    TIKTOKEN_CACHE_DIR=<litellm>/litellm_core_utils/tokenizers python bench/bench_accounting_noise.py
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import random
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _pools() -> dict[str, list[str]]:
    with lzma.open(ROOT / "streams/sim/blind2/data/corpus.json.xz") as f:
        d = json.loads(f.read())
    pools = {f"udhr-{lang}": [s for a in arts for s in a] for lang, arts in d["udhr"].items()}
    pools |= {f"ts-{lang}": list(cat.values()) for lang, cat in d["typescript_diagnostics"].items()}
    pools |= {f"jl-{lang}": list(cat.values()) for lang, cat in d["jupyterlab"].items()}
    pools["code"] = [x["code"] for x in d["stdlib"]]
    pools["mixed-code-en"] = pools["code"][:300] + pools["udhr-en"] + pools["ts-en"][:300]
    pools["mixed-ja-en"] = pools["ts-ja"][:300] + pools["ts-en"][:300]
    pools["mixed-ar-en-code"] = pools["udhr-ar"] + pools["udhr-en"] + pools["code"][:100]
    return pools


def _counters() -> tuple[Callable[[str], int], dict[str, Callable[[str], int]]]:
    import litellm
    import tiktoken
    from tokenizers import Tokenizer

    here = Path(litellm.__file__).parent / "litellm_core_utils" / "tokenizers"
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(here))
    cl100k, o200k = tiktoken.get_encoding("cl100k_base"), tiktoken.get_encoding("o200k_base")
    anthropic = Tokenizer.from_file(str(here / "anthropic_tokenizer.json"))
    engines = {"anthropic": lambda t: len(anthropic.encode(t).ids), "o200k": lambda t: len(o200k.encode(t))}
    return (lambda t: len(cl100k.encode(t))), engines


def _units(rng: random.Random, units: tuple[int, int] | None) -> int:
    if units is None:  # clustered
        return rng.randint(2, 6) if rng.random() < 0.1 else rng.randint(20, 30)
    return rng.randint(*units)


def _run(pools: dict[str, list[str]], gateway: Callable[[str], int], engine: Callable[[str], int], overhead: int,
         units: tuple[int, int] | None, prompts: int, seed: int) -> tuple[int, int, int, int]:  # fmt: skip
    from detectors.settings import DetectionSettings
    from detectors.signals.mechanism import AccountingDetector
    from schemas.events import Request, Response
    from schemas.exchange import Exchange

    rng = random.Random(seed)
    det = AccountingDetector(DetectionSettings())
    clean = false = swaps = found = 0
    for t, (name, units_of) in enumerate(pools.items()):
        last: int | None = None
        for i in range(prompts):
            text = "\n".join(rng.choice(units_of) for _ in range(_units(rng, units)))
            g, e = gateway(text), engine(text) + overhead
            if not g:
                continue
            for counted, kind in ((e, "clean"), (last, "swap")):
                if counted is None:
                    continue
                rid = f"{name}-{i}-{kind}"
                req = Request(type="request", event_id=rid, ts=float(i), request_id=rid, tenant_id=name, model="m",
                              prompt_tokens=g)  # fmt: skip
                usage = {"input_tokens": counted}
                resp = Response(type="response", event_id=rid + "r", ts=i + 0.5, request_id=rid, tenant_id=name,
                                model="m", cache_domain="d", status_code=200, usage=usage)  # fmt: skip
                ex = Exchange(ts=i + 0.5, request=req, response=resp)
                hit = any(s.figures.get("basis") == "other_prompt" for s in det.observe(ex, None))  # type: ignore[arg-type]
                if kind == "clean":
                    det.learn(ex)
                    clean, false = clean + 1, false + hit
                else:
                    swaps, found = swaps + 1, found + hit
            last = e
        del t
    return clean, false, swaps, found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts", type=int, default=200, help="prompts per tenant and case")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--engines", nargs="+", default=["anthropic", "o200k"])
    ap.add_argument("--overheads", nargs="+", type=int, default=[0, 30, 200])
    a = ap.parse_args()
    pools = _pools()
    gateway, engines = _counters()
    print("engine | overhead | units | clean | false alarms | swaps of two turns | found", flush=True)
    for ename in a.engines:
        for overhead in a.overheads:
            for units in ((2, 12), (10, 60), (40, 200), None):
                c, f, s, found = _run(pools, gateway, engines[ename], overhead, units, a.prompts, a.seed)
                shown = "clustered" if units is None else f"{units[0]}-{units[1]}"
                print(f"{ename} | {overhead} | {shown} | {c} | {f} ({f / c:.3%}) | {s} | "
                      f"{found} ({found / max(1, s):.1%})", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.environ.get("PYTHONPATH", "") or str(ROOT))
    sys.exit(main())

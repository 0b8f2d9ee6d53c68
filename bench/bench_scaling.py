"""Benchmark 6: how cost grows with prompt size, number of tenants and number of cache domains.

1. Prompt size, 1k -> 1M tokens (4 characters a token; real Python source): fingerprinting
   (`fingerprint_text`, warm cache), index add (into an empty index), and a query of the same fingerprints by
   another tenant (every fingerprint matches: the worst case). Baseline: tokenising the same text.
2. Tenants, 10 -> 10,000: a fixed number of exchanges (request + response with short texts, private
   per tenant) through `parse_event` + `Monitor.observe`, one domain. Baseline: the same with 10 tenants.
3. Cache domains, 1 -> 1,000: a fixed number of text-free exchanges spread over D domains. Baseline:
   one domain.
Writes bench/results/bench_scaling.json and bench/results/scaling.png.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as c
import orjson

from detectors.fingerprint import Fingerprinter, words_of
from detectors.index import ContentIndex
from detectors.monitor import Monitor
from detectors.settings import DetectionSettings
from schemas.events import parse_event

NAME = "bench_scaling"
T0 = 1787821200.0


def corpus_text(chars: int) -> str:
    from streams.sim.simulate import _corpus

    files = _corpus().files
    parts: list[str] = []
    size = 0
    i = 0
    while size < chars:
        t = files[i % len(files)].text
        parts.append(t)
        size += len(t)
        i += 1
    return "".join(parts)[:chars]


def prompt_sizes(args, s: DetectionSettings) -> list[dict]:
    sizes = c.pick(
        args,
        full=[1_000, 4_000, 16_000, 64_000, 256_000, 1_000_000],
        quick=[1_000, 8_000, 64_000, 512_000],
        tiny=[1_000, 4_000],
    )
    big = corpus_text(4 * max(sizes))
    fp = Fingerprinter(s.fingerprint_key, s.k, s.w)
    rows = []
    for tokens in sizes:
        text = big[: 4 * tokens]
        repeat = max(1, min(20, 2_000_000 // (4 * tokens)))
        fp.fingerprint_text(text)  # warm the word-hash cache
        t_tok, words = c.best_of(lambda text=text: words_of(text), repeat)
        t_fp, tp = c.best_of(lambda text=text: fp.fingerprint_text(text), repeat)

        def add(tp=tp) -> ContentIndex:
            idx = ContentIndex(s.index_window_s, s.index_max_docs, 10**9, s.common_min_tenants)
            idx.add("tenant-a", "s-a", "r-a", T0, tp.hashes)
            return idx

        t_add, idx = c.best_of(add, repeat)
        t_q, ov = c.best_of(lambda idx=idx, tp=tp: idx.query("tenant-b", "s-b", tp.hashes, set()), repeat)
        rows.append(
            {
                "tokens": tokens,
                "words": len(words),
                "fingerprints": len(tp.hashes),
                "tokenise_ms": 1e3 * t_tok,
                "fingerprint_ms": 1e3 * t_fp,
                "index_add_ms": 1e3 * t_add,
                "query_ms": 1e3 * t_q,
                "total_ms": 1e3 * (t_fp + t_add + t_q),
                "ns/token": 1e9 * (t_fp + t_add + t_q) / tokens,
                "matched": ov.by_tenant.get("tenant-a", 0),
            }
        )
        c.log(args, f"  prompt {tokens:>9,} tokens: {rows[-1]['total_ms']:.1f} ms")
    return rows


def _words(rng: random.Random, vocab: list[str], n: int) -> str:
    return " ".join(rng.choice(vocab) for _ in range(n))


def tenant_events(tenants: int, exchanges: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    common = [f"common{i}" for i in range(300)]
    out: list[bytes] = []
    for i in range(exchanges):
        t = rng.randrange(tenants)
        vocab = [f"t{t}w{j}" for j in range(rng.randrange(50, 60))] + common[:50]
        prompt = _words(rng, vocab, 200)
        output = " ".join(prompt.split()[:40]) + " " + _words(rng, vocab, 20)
        ts = T0 + i * 0.05
        base = {"request_id": f"r{i}", "tenant_id": f"tenant-{t}", "model": "m", "session_id": f"s{t}-{i % 7}"}
        out.append(
            orjson.dumps(
                {
                    **base,
                    "type": "request",
                    "event_id": f"q{i}",
                    "ts": ts,
                    "prompt_tokens": 300,
                    "cache_domain": "d0",
                    "prompt_text": prompt,
                }
            )
        )
        out.append(
            orjson.dumps(
                {
                    **base,
                    "type": "response",
                    "event_id": f"p{i}",
                    "ts": ts + 0.02,
                    "cache_domain": "d0",
                    "status_code": 200,
                    "usage": {"input_tokens": 300},
                    "ttft_ms": 50.0,
                    "output_text": output,
                }
            )
        )
    return out


def domain_events(domains: int, exchanges: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    out: list[bytes] = []
    for i in range(exchanges):
        d = f"pool-{rng.randrange(domains)}"
        ts = T0 + i * 0.01
        if i % 20 == 0:
            out.append(
                orjson.dumps(
                    {
                        "type": "cache_stats",
                        "event_id": f"c{i}",
                        "ts": ts,
                        "cache_domain": d,
                        "role": "prefill",
                        "capacity_tokens": 681280,
                        "used_tokens": 300000,
                        "context_window": 1048576,
                    }
                )
            )
        base = {"request_id": f"r{i}", "tenant_id": f"tenant-{rng.randrange(50)}", "model": "m"}
        out.append(
            orjson.dumps(
                {**base, "type": "request", "event_id": f"q{i}", "ts": ts, "prompt_tokens": 5000, "cache_domain": d}
            )
        )
        out.append(
            orjson.dumps(
                {
                    **base,
                    "type": "response",
                    "event_id": f"p{i}",
                    "ts": ts + 0.005,
                    "cache_domain": d,
                    "status_code": 200,
                    "usage": {"input_tokens": 5000},
                    "ttft_ms": 80.0,
                }
            )
        )
    return out


def through_core(lines: list[bytes], repeat: int) -> tuple[float, Monitor]:
    def run() -> Monitor:
        m = Monitor(DetectionSettings())
        for raw in lines:
            m.observe(parse_event(raw))
        m.flush()
        return m

    return c.best_of(run, repeat)


def main(argv: list[str] | None = None) -> int:
    args = c.parser(__doc__.splitlines()[0]).parse_args(argv)
    s = DetectionSettings()
    repeat = c.pick(args, full=3, quick=2, tiny=1)
    c.log(args, "prompt size ...")
    p_rows = prompt_sizes(args, s)

    c.log(args, "tenants ...")
    n_ex = c.pick(args, full=10_000, quick=3_000, tiny=200)
    t_rows = []
    for tenants in c.pick(args, full=[10, 100, 1_000, 10_000], quick=[10, 100, 1_000, 10_000], tiny=[10, 100]):
        lines = tenant_events(tenants, n_ex, args.seed)
        secs, mon = through_core(lines, repeat)
        t_rows.append(
            {
                "tenants": tenants,
                "events": len(lines),
                "seconds": secs,
                "events/s": len(lines) / secs,
                "µs/event": 1e6 * secs / len(lines),
                "index_docs": mon.state_size().get("index_docs", 0),
            }
        )
        c.log(args, f"  {tenants:>6,} tenants: {t_rows[-1]['events/s']:,.0f} events/s")

    c.log(args, "domains ...")
    n_ex = c.pick(args, full=20_000, quick=6_000, tiny=300)
    d_rows = []
    for domains in c.pick(args, full=[1, 10, 100, 1_000], quick=[1, 10, 100, 1_000], tiny=[1, 10]):
        lines = domain_events(domains, n_ex, args.seed)
        secs, mon = through_core(lines, repeat)
        d_rows.append(
            {
                "domains": domains,
                "events": len(lines),
                "seconds": secs,
                "events/s": len(lines) / secs,
                "µs/event": 1e6 * secs / len(lines),
                "domains_seen": len(mon.domains),
            }
        )
        c.log(args, f"  {domains:>6,} domains: {d_rows[-1]['events/s']:,.0f} events/s")

    # Ratios against the smallest configuration of each axis (the baseline).
    p0, t0, d0 = p_rows[0], t_rows[0], d_rows[0]
    for r in p_rows:
        r["ns/token vs smallest"] = r["ns/token"] / p0["ns/token"]
        r["fingerprint/tokenise"] = r["tokenise_ms"] / r["fingerprint_ms"]
    for r in t_rows:
        r["cost vs 10"] = r["µs/event"] / t0["µs/event"]
    for r in d_rows:
        r["cost vs 1"] = r["µs/event"] / d0["µs/event"]

    png = args.out / "scaling.png"
    plot(p_rows, t_rows, d_rows, png)
    tables = {
        "prompt size (one text: fingerprint + index add + query of all its fingerprints)": c.table(p_rows),
        "tenants (fixed number of exchanges, one domain)": c.table(t_rows),
        "cache domains (fixed number of text-free exchanges)": c.table(d_rows),
    }
    path = c.write(
        NAME,
        args,
        params={"repeat": repeat, "k": s.k, "w": s.w},
        figures={"prompt_size": p_rows, "tenants": t_rows, "domains": d_rows},
        baseline={"prompt_size": p0, "tenants": t0, "domains": d0},
        ratio={
            "prompt_ns_per_token_largest_over_smallest": p_rows[-1]["ns/token vs smallest"],
            "tenant_cost_largest_over_smallest": t_rows[-1]["cost vs 10"],
            "domain_cost_largest_over_smallest": d_rows[-1]["cost vs 1"],
        },
        tables=tables,
        extra={"plot": str(png.relative_to(c.ROOT)) if png.is_relative_to(c.ROOT) else str(png)},
    )
    c.report("scaling", tables, None, path)
    return 0


def plot(p_rows: list[dict], t_rows: list[dict], d_rows: list[dict], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    ax = axes[0]
    x = [r["tokens"] for r in p_rows]
    for key, label in (
        ("fingerprint_ms", "fingerprint"),
        ("index_add_ms", "index add"),
        ("query_ms", "query"),
        ("tokenise_ms", "tokenise (baseline)"),
    ):
        ax.loglog(x, [r[key] for r in p_rows], marker="o", label=label)
    ax.loglog(x, [p_rows[0]["total_ms"] * t / x[0] for t in x], "k:", label="linear from smallest")
    ax.set_xlabel("prompt tokens")
    ax.set_ylabel("ms per text")
    ax.set_title("prompt size")
    ax.legend(fontsize=8)
    ax = axes[1]
    ax.semilogx([r["tenants"] for r in t_rows], [r["µs/event"] for r in t_rows], marker="o")
    ax.set_xlabel("tenants")
    ax.set_ylabel("µs per event")
    ax.set_ylim(bottom=0)
    ax.set_title("tenants (fixed traffic, with text)")
    ax = axes[2]
    ax.loglog([r["domains"] for r in d_rows], [r["µs/event"] for r in d_rows], marker="o")
    ax.set_xlabel("cache domains")
    ax.set_ylabel("µs per event")
    ax.set_title("cache domains (fixed traffic, text-free)")
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())

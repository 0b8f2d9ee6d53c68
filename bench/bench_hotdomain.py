"""Benchmark 9: one hot cache domain, its ceiling in one process, and the remedy past it (issue 43, target 2).

A cache domain's state (its content index, records, ledger, incidents) lives in one process, so the rate one process
sustains for one domain is the ceiling of a single deployment, whatever the number of workers. Input: bench_textrich's
multilingual file with every event moved into one cache domain ("hot"). Measured in one process, each as CPU time:

* the text-rich core on that file (`EmbeddedRunner.run_files`): the ceiling when the domain's worker also validates
  and fingerprints the text (the default, direct topology);
* the gateway's own work, fingerprinting at the edge (`GatewayProducer.prepare`, the producer library of
  streams/producer.py, no broker): text replaced by its keyed fingerprints before it leaves the gateway;
* the core on the edge-fingerprinted file: the domain's ceiling once that work runs elsewhere (in the gateways);
* the staged topology's judge stage alone on the exchange records its join stage hands on (bench/_staged_judge.py):
  the domain's ceiling when ingest and join run on other workers (the Kafka hops not included).

The alerts of the two replays are compared: edge prints carry no text, so canary markers are matched through their
fingerprints and not by the word scan, and a session's history is fingerprinted whole at the gateway.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as c
import orjson
from _staged_judge import judge, record_mb, sequence
from bench_textrich import KEY, TEXT_FIELDS, best_cpu, ensure_data, memory

from detectors.settings import DetectionSettings
from streams.embedded.runner import EmbeddedRunner
from streams.producer import GatewayProducer
from streams.settings import Settings

HOT = "hot"


def hot_lines(lines: list[bytes]) -> list[bytes]:
    """Every event in one cache domain."""
    out = []
    for line in lines:
        ev = orjson.loads(line)
        if "cache_domain" in ev:
            ev["cache_domain"] = HOT
        out.append(orjson.dumps(ev))
    return out


def main(argv: list[str] | None = None) -> int:
    args = c.parser(__doc__.splitlines()[0]).parse_args(argv)
    duration, rate, tenants = c.pick(args, full=(1200.0, 4.0, 24), quick=(300.0, 4.0, 24), tiny=(60.0, 1.0, 8))
    repeat = c.pick(args, full=3, quick=2, tiny=1)
    path, _ = ensure_data(args, duration, rate, tenants)
    lines = hot_lines([line for line in path.read_bytes().splitlines() if line.strip()])
    text_mb = sum(len(t.encode()) for ev in map(orjson.loads, lines) for f in TEXT_FIELDS if (t := ev.get(f))) / c.MB
    settings = Settings(detection=DetectionSettings(fingerprint_key=KEY))
    gateway = GatewayProducer(settings, producer=object())  # prepare() never sends

    def edge() -> list[bytes]:
        return [gateway.prepare(orjson.loads(line))[1] for line in lines]

    with tempfile.TemporaryDirectory() as tmp:
        text_file, edge_file = Path(tmp) / "hot-text.jsonl", Path(tmp) / "hot-edge.jsonl"
        text_file.write_bytes(b"\n".join(lines) + b"\n")
        c.log(args, f"{len(lines):,} events, {text_mb:.1f} MB of text, one domain; fingerprinting at the edge ...")
        t_edge, _, edge_lines = best_cpu(edge, repeat)
        edge_file.write_bytes(b"\n".join(edge_lines) + b"\n")
        # The gateway library's wire form: packed prints (base64), by default (docs/contract.md).
        edge_mb, packed = sum(map(len, edge_lines)) / c.MB, sum(b'"hashes_b64"' in line for line in edge_lines)

        def replay(p: Path) -> Any:
            return EmbeddedRunner(settings).run_files([str(p)])

        c.log(args, f"edge {t_edge:.2f}s CPU; replaying the text ...")
        t_text, w_text, r_text = best_cpu(lambda: replay(text_file), repeat)
        c.log(args, f"text {t_text:.2f}s CPU; replaying the edge prints ...")
        t_prints, w_prints, r_prints = best_cpu(lambda: replay(edge_file), repeat)
        c.log(args, f"edge prints {t_prints:.2f}s CPU; the staged topology's judge stage alone ...")
        staged = sequence(settings.detection, lines)
        t_staged, w_staged, staged_alerts = best_cpu(lambda: judge(settings.detection, staged), repeat)

    n = len(lines)
    mem = memory(r_text.monitor)  # the one domain at the end of the file: its index's window (900 s) is full
    ledger = sum(d.out.nbytes + d.prompt.nbytes for dm in r_text.monitor.domains.values() for d in dm.mixup.recent)
    ids_text = {a.alert_id for a in r_text.alerts}
    ids_prints = {a.alert_id for a in r_prints.alerts}
    figures = {
        "events": n,
        "text_mb": text_mb,
        "hot_text_cpu_s": t_text,
        "hot_text_events_s": n / t_text,
        "hot_text_mb_s": text_mb / t_text,
        "edge_cpu_s": t_edge,
        "edge_wire_mb": edge_mb,
        "edge_packed_events": packed,
        "hot_prints_cpu_s": t_prints,
        "hot_prints_events_s": n / t_prints,
        "staged_judge_cpu_s": t_staged,
        "staged_judge_events_s": n / t_staged,
        "staged_record_mb": record_mb(staged),
        "alerts_staged": staged_alerts,
        "alerts_text": len(ids_text),
        "alerts_prints": len(ids_prints),
        "alerts_both": len(ids_text & ids_prints),
        "rejects_text": sum(r_text.rejects.values()),
        "rejects_prints": sum(r_prints.rejects.values()),
        "domain_index_bytes": mem["native_bytes"],
        "domain_index_bytes_per_fingerprint": mem["native_bytes_per_fingerprint"],
        "domain_index_fingerprints": mem["fingerprints"],
        "domain_records_bytes": mem["records_bytes"],
        "domain_ledger_bytes": ledger,
    }
    gain = t_text / t_prints
    rows = [
        {"what": "one domain, text (the worker fingerprints)", "CPU s": t_text, "wall s": w_text,
         "events/s": n / t_text, "MB/s of text": text_mb / t_text, "alerts": len(ids_text)},
        {"what": "gateways' share: fingerprinting at the edge", "CPU s": t_edge, "wall s": "-",
         "events/s": n / t_edge, "MB/s of text": text_mb / t_edge, "alerts": "-"},
        {"what": "one domain, edge fingerprints", "CPU s": t_prints, "wall s": w_prints,
         "events/s": n / t_prints, "MB/s of text": text_mb / t_prints, "alerts": len(ids_prints)},
        {"what": "one domain, the staged judge stage alone", "CPU s": t_staged, "wall s": w_staged,
         "events/s": n / t_staged, "MB/s of text": text_mb / t_staged, "alerts": staged_alerts},
    ]  # fmt: skip
    mem_rows = [
        {"what": "content index (native postings)", "MB": mem["native_bytes"] / c.MB,
         "bytes per fingerprint": mem["native_bytes_per_fingerprint"]},
        {"what": "long-horizon records (fixed size)", "MB": mem["records_bytes"] / c.MB,
         "bytes per fingerprint": mem["records_bytes_per_insert"]},
        {"what": "mix-up ledger (deliveries' keys)", "MB": ledger / c.MB, "bytes per fingerprint": 8.0},
    ]  # fmt: skip
    tables = {
        "one hot domain, one process, same run": c.table(rows),
        "the domain's state at the end (its index window full)": c.table(mem_rows)
        + f"\n\n{mem['fingerprints']:,.0f} fingerprints in the index ({mem['distinct']:,.0f} distinct)",
    }
    out = c.write(
        "bench_hotdomain",
        args,
        params={"path": str(path), "events": n, "text_mb": text_mb, "repeat": repeat, "domain": HOT},
        figures=figures,
        baseline={"hot_text_events_s": n / t_text},
        ratio={"edge_prints_over_text": gain, "staged_judge_over_text": t_text / t_staged},
        tables=tables,
    )
    c.report("one hot cache domain", tables, None, out)
    print(
        f"ceiling of one domain: {n / t_text:,.0f} events/s with text, {n / t_prints:,.0f} with edge prints "
        f"({gain:.2f}x), {n / t_staged:,.0f} on the staged judge stage alone ({t_text / t_staged:.2f}x); alerts "
        f"{len(ids_text)} / {len(ids_prints)} ({len(ids_text & ids_prints)} the same ids) / {staged_alerts}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

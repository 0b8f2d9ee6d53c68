"""Benchmark: checkpoint time and bytes of the Kafka domain partitions, whole vs incremental, at today's index
size and at 10x it (issue 16, target 4).

The domain partitions are built by the worker's own stage classes without a broker (tests/support/stagepipe)
from a simulated run: "1x" is the first 180 s of a simulation the Kafka benchmark's snapshot figures came from (rate 4
requests/s), "10x" the same 180 s at ten times the rate (ten times the texts in each domain's index; the 900 s
index window keeps all of them). For each size, in one run:
  - baseline: the whole-partition snapshot as it was (`checkpoint.dumps`, one pickle per partition), and the
    first checkpoint of the piece layout (every piece whole);
  - figure: checkpoints after each of `rounds` batches of `events` new events (the same N at both sizes),
    written as changes; and the restore of the final state from the table (checked equal in size).
A second part does the same for a join partition whose producer lost halves: 20k and 200k requests waiting
for their responses (`detection.max_pending_joins` is 200k), then `rounds` checkpoints after `events` more
arrive and as many join; baseline: the whole-partition pickle and the first checkpoint (every piece whole).
Times are CPU time (the machine is shared: wall time there measures the neighbours) of the write into an in-memory
table (incr_cut_ms: the cut alone, which the worker's event loop waits for; its compression and writes run in the
background) (no Kafka produce: the bytes are what a changelog would carry), summed over the partitions; the ratios say
whether a cost follows the index size or the change.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as c

from schemas.events import Request
from streams.kafka import checkpoint
from streams.kafka.checkpoint import Checkpointer
from streams.kafka.stages import JoinState
from streams.settings import Settings
from tests.support.stagepipe import StagePipeline

NAME = "bench_checkpoint"


def sim_lines(args: Any, duration_s: float, rate: float, new_events: int) -> tuple[list[bytes], list[bytes]]:
    """The events of a `duration_s` simulation (its fault at half time, as in the 180 s run) and at least
    `new_events` events that follow them (the same simulation run on a little longer)."""
    import orjson

    from streams.sim.simulate import DEFAULT_START_TS, SimConfig, write_simulation

    # About 2.4 events per request (request, response, cache stats, canaries); half again for safety.
    extra_s = max(10.0, 1.5 * new_events / (2.4 * rate))
    d = args.data / f"checkpoint-seed{args.seed}-{int(duration_s)}+{int(extra_s)}s-r{rate:g}"
    path = d / "events.jsonl"
    if not path.exists():
        c.log(args, f"simulating {duration_s + extra_s:.0f}s at {rate:g} req/s (cached in {d}) ...")
        d.mkdir(parents=True, exist_ok=True)
        cfg = SimConfig(seed=args.seed, duration_s=duration_s + extra_s, rate=rate, fault_at_s=duration_s / 2)
        write_simulation(d, cfg)
    lines = [line for line in path.read_bytes().splitlines() if line.strip()]
    end = DEFAULT_START_TS + duration_s
    head = [line for line in lines if orjson.loads(line)["ts"] < end]
    tail = [line for line in lines if orjson.loads(line)["ts"] >= end]
    if len(tail) < new_events:
        raise SystemExit(f"{len(tail)} events after {duration_s:.0f}s, {new_events} needed")
    return head, tail[:new_events]


def feed(pipe: StagePipeline, lines: list[bytes], start: int, batch: int = 200) -> None:
    n = pipe.settings.kafka.input_partitions
    for i in range(0, len(lines), batch):
        chunk = lines[i : i + batch]
        pipe.feed(((start + i + j) % n, line) for j, line in enumerate(chunk))


def index_size(pipe: StagePipeline) -> tuple[int, int]:
    docs = fps = 0
    for st in pipe.domain_states.values():
        for dm in st.table.domains.values():
            size = dm.overlap.index.state_size()
            docs += size["docs"]
            fps += size["fingerprints"]
    return docs, fps


def write_all(
    cp: Checkpointer, pipe: StagePipeline, table: dict[bytes, bytes], cuts: list[float] | None = None
) -> tuple[float, int, Counter[str]]:
    """One checkpoint of every domain partition: CPU seconds, bytes, and how the pieces were written. `cuts` gets
    the CPU seconds of the cut alone: what a worker's event loop waits for (the rest runs in the background)."""
    how: Counter[str] = Counter()
    took = 0.0
    cut_s = 0.0
    total = 0
    for q, st in pipe.domain_states.items():
        t0 = time.process_time()
        cut = cp.cut("domain", q, st)
        t1 = time.process_time()
        done = cp.store(cut, table)
        cut_s += t1 - t0
        took += time.process_time() - t0
        total += done.bytes
        how.update(whole=done.whole, changes=done.changes, kept=done.kept)
    if cuts is not None:
        cuts.append(cut_s)
    return took, total, how


def measure(
    args: Any, label: str, sim: tuple[list[bytes], list[bytes]], events: int, rounds: int, repeat: int
) -> dict[str, Any]:
    s = Settings.model_validate({"detection": {"fingerprint_key": "bench-checkpoint-key"}})
    lines = sim[0] + sim[1]
    head = len(sim[0])
    c.log(args, f"{label}: feeding {head:,} events through the stages ...")
    pipe = StagePipeline(s)
    t0 = time.perf_counter()
    feed(pipe, lines[:head], 0)
    c.log(args, f"{label}: fed in {time.perf_counter() - t0:.1f}s")
    docs, fps = index_size(pipe)

    old_s, old_bytes = float("inf"), 0
    for _ in range(max(1, repeat)):  # the whole-partition snapshot as it was: one pickle per partition
        t0 = time.process_time()
        old_bytes = sum(len(checkpoint.dumps(st, pipe.counters)) for st in pipe.domain_states.values())
        old_s = min(old_s, time.process_time() - t0)
    first_s, first_bytes = float("inf"), 0
    for _ in range(max(1, repeat)):  # a fresh checkpointer each time: every piece written whole
        cp = Checkpointer(s.kafka, pipe.counters)
        table: dict[bytes, bytes] = {}
        took, first_bytes, how_first = write_all(cp, pipe, table)
        first_s = min(first_s, took)
    incr_s: list[float] = []
    incr_cut_s: list[float] = []
    incr_bytes: list[int] = []
    how_incr: Counter[str] = Counter()
    at = head
    for r in range(rounds):
        feed(pipe, lines[at : at + events], at)
        at += events
        took, nbytes, how = write_all(cp, pipe, table, incr_cut_s)
        incr_s.append(took)
        incr_bytes.append(nbytes)
        how_incr += how
        c.log(args, f"{label}: round {r + 1}/{rounds}: {took * 1000:.1f} ms CPU, {nbytes:,} bytes, {dict(how)}")
    t0 = time.process_time()
    again = Checkpointer(s.kafka, Counter())
    restored = {q: again.restore("domain", q, table, s.detection) for q in pipe.domain_states}
    restore_s = time.process_time() - t0
    for q, st in pipe.domain_states.items():
        got = restored[q]
        assert got is not None and len(got.table.domains) == len(st.table.domains)
        for name, dm in st.table.domains.items():
            assert got.table.domains[name].state_size() == dm.state_size(), f"{label}: restore of {name} differs"
    return {
        "size": label,
        "events_fed": head,
        "domains": sum(len(st.table.domains) for st in pipe.domain_states.values()),
        "index_docs": docs,
        "index_fingerprints": fps,
        "old_whole_ms": old_s * 1000,
        "old_whole_bytes": old_bytes,
        "first_ms": first_s * 1000,
        "first_bytes": first_bytes,
        "pieces_first": dict(how_first),
        "new_events": events,
        "incr_ms": statistics.median(incr_s) * 1000,
        "incr_bytes": int(statistics.median(incr_bytes)),
        "incr_ms_max": max(incr_s) * 1000,
        "incr_bytes_max": max(incr_bytes),
        "incr_ms_mean": statistics.mean(incr_s) * 1000,  # with the whole rewrites of pieces whose changes grew
        "incr_cut_ms": statistics.median(incr_cut_s) * 1000,  # the event loop's share: the rest is in the background
        "incr_cut_ms_max": max(incr_cut_s) * 1000,
        "incr_bytes_mean": statistics.mean(incr_bytes),
        "pieces_incr": dict(how_incr),
        "restore_ms": restore_s * 1000,
        "table_bytes": sum(len(v) for v in table.values()),
    }


def _request(i: int) -> Request:
    return Request(
        type="request",
        event_id=f"e{i}",
        ts=1_780_000_000.0 + i * 0.001,
        request_id=f"r{i}",
        tenant_id=f"t{i % 50}",
        model="m",
        prompt_tokens=100 + i % 900,
        cache_domain=f"d{i % 8}",
    )


def measure_waiting(args: Any, label: str, waiting: int, events: int, rounds: int) -> dict[str, Any]:
    """A join partition with `waiting` request halves whose responses never came, then `rounds` checkpoints
    after `events` more arrive and as many of the oldest join."""
    s = Settings.model_validate({"detection": {"fingerprint_key": "bench-checkpoint-key"}})
    st = JoinState.fresh(s.detection)
    joiner = st.joiner
    for i in range(waiting):
        joiner.observe_request(_request(i))
    counters: Counter[str] = Counter()
    t0 = time.process_time()
    old_bytes = len(checkpoint.dumps(st, counters))
    old_ms = (time.process_time() - t0) * 1000
    cp = Checkpointer(s.kafka, counters)
    table: dict[bytes, bytes] = {}
    t0 = time.process_time()
    first = cp.write("join", 0, st, table)
    first_ms = (time.process_time() - t0) * 1000
    incr_ms: list[float] = []
    incr_bytes: list[int] = []
    at, oldest = waiting, 0
    for r in range(rounds):
        for i in range(at, at + events):
            joiner.observe_request(_request(i))
        for rid in list(joiner._requests)[:events]:  # their responses came: the pairs leave
            joiner._requests.pop(rid)
        at, oldest = at + events, oldest + events
        t0 = time.process_time()
        done = cp.write("join", 0, st, table)
        incr_ms.append((time.process_time() - t0) * 1000)
        incr_bytes.append(done.bytes)
        c.log(args, f"waiting {label}: round {r + 1}/{rounds}: {incr_ms[-1]:.1f} ms CPU, {done.bytes:,} bytes")
    again = Checkpointer(s.kafka, Counter()).restore("join", 0, table, s.detection)
    assert isinstance(again, JoinState) and list(again.joiner._requests) == list(joiner._requests)
    return {
        "size": label,
        "waiting": waiting,
        "old_whole_ms": old_ms,
        "old_whole_bytes": old_bytes,
        "first_ms": first_ms,
        "first_bytes": first.bytes,
        "new_events": events,
        "incr_ms": statistics.median(incr_ms),
        "incr_bytes": int(statistics.median(incr_bytes)),
    }


def main(argv: list[str] | None = None) -> int:
    p = c.parser(__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=None, help="new events per incremental checkpoint")
    p.add_argument("--rounds", type=int, default=None, help="incremental checkpoints per size")
    args = p.parse_args(argv)
    duration = c.pick(args, 180.0, 60.0, 20.0)
    rate = c.pick(args, 4.0, 2.0, 2.0)
    events = args.events or c.pick(args, 200, 100, 20)
    rounds = args.rounds or c.pick(args, 10, 3, 2)
    repeat = c.pick(args, 3, 1, 1)
    rows = []
    for label, r in (("1x", rate), ("10x", rate * 10)):
        rows.append(measure(args, label, sim_lines(args, duration, r, events * rounds), events, rounds, repeat))
    one, ten = rows
    waiting = c.pick(args, 20_000, 20_000, 2_000)
    wrows = [measure_waiting(args, f"{n:,}", n, events * 10, rounds) for n in (waiting, waiting * 10)]

    def ratio(key: str) -> float:
        return ten[key] / one[key] if one[key] else float("nan")

    ratios = {
        "index_fingerprints_10x_over_1x": ratio("index_fingerprints"),
        "old_whole_ms_10x_over_1x": ratio("old_whole_ms"),
        "old_whole_bytes_10x_over_1x": ratio("old_whole_bytes"),
        "incr_ms_10x_over_1x": ratio("incr_ms"),
        "incr_bytes_10x_over_1x": ratio("incr_bytes"),
        "incr_ms_mean_10x_over_1x": ratio("incr_ms_mean"),
        "incr_bytes_mean_10x_over_1x": ratio("incr_bytes_mean"),
        "incr_over_old_whole_ms_10x": ten["incr_ms"] / ten["old_whole_ms"],
        "incr_over_old_whole_bytes_10x": ten["incr_bytes"] / ten["old_whole_bytes"],
        "waiting_incr_ms_10x_over_1x": wrows[1]["incr_ms"] / wrows[0]["incr_ms"],
        "waiting_incr_over_old_whole_ms_10x": wrows[1]["incr_ms"] / wrows[1]["old_whole_ms"],
        "waiting_incr_over_old_whole_bytes_10x": wrows[1]["incr_bytes"] / wrows[1]["old_whole_bytes"],
    }
    columns = [
        "size",
        "index_docs",
        "index_fingerprints",
        "old_whole_ms",
        "old_whole_bytes",
        "first_ms",
        "first_bytes",
        "new_events",
        "incr_ms",
        "incr_bytes",
        "incr_ms_mean",
        "incr_bytes_mean",
        "incr_cut_ms",
        "incr_cut_ms_max",
        "restore_ms",
    ]
    tables = {
        "domain partitions (sums; incr: median of the incremental checkpoints, mean: with whole rewrites)": c.table(
            rows, columns
        ),
        "a join partition with waiting halves (a producer that lost the other halves)": c.table(
            wrows, [k for k in columns if k in wrows[0]]
        ),
        "ratios": c.table([{"ratio": k, "value": v} for k, v in ratios.items()]),
    }
    # Checkpoint cost follows the change, not the index: at 10x the index, an incremental checkpoint costs
    # at most 2x what it costs at 1x (the same N events; a margin for noise and the per-domain pieces).
    targets = {
        "incremental checkpoint CPU ms, 10x index / 1x": c.target(ratios["incr_ms_10x_over_1x"], 2.0, at_least=False),
        "incremental checkpoint bytes, 10x index / 1x": c.target(ratios["incr_bytes_10x_over_1x"], 2.0, at_least=False),
        "incremental checkpoint CPU ms, 10x waiting halves / 1x": c.target(
            ratios["waiting_incr_ms_10x_over_1x"], 2.0, at_least=False
        ),
    }
    params = {"duration_s": duration, "rates": [rate, rate * 10], "events": events, "rounds": rounds}
    path = c.write(
        NAME,
        args,
        params=params,
        figures={"incremental": {r["size"]: {"ms": r["incr_ms"], "bytes": r["incr_bytes"]} for r in rows}},
        baseline={"old_whole": {r["size"]: {"ms": r["old_whole_ms"], "bytes": r["old_whole_bytes"]} for r in rows}},
        ratio=ratios,
        targets=targets,
        tables=tables,
        extra={"rows": rows, "waiting_rows": wrows},
    )
    c.report("checkpoints: whole vs incremental, at 1x and 10x the index", tables, targets, path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

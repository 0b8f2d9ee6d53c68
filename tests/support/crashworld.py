"""The Kafka topologies in memory with what a broker adds: durable topic logs, committed offsets, a changelog
table, and workers that crash at random points and restart from them.

stagepipe.py drains every message at once in one order; here a seeded random schedule decides which partition
is read next, how much of it, when a partition is checkpointed (the worker's own Checkpointer: incremental
pieces into a dict that stands for the changelog) and acked, when offsets are committed (lagging the acks), and
when the worker dies: a new one restores every partition from the table and reads on from the committed
offsets, replaying what the state already covers. `skew` is the share of reads that take one input partition
far ahead of the others, as a backlog after a restart is fetched. The alerts, collected across every worker,
must be the embedded runner's on the same lines (tests/kafka/test_crash_replay.py).

What this does not model: the producer's buffer and a broker's delivery (tests/broker/ run the real thing);
here every send is durable at once, so a checkpoint's flush-before-ack is trivially true.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson

from schemas.events import parse_event
from streams.inputs.corpus import load_public
from streams.kafka import checkpoint, frames
from streams.kafka.direct import DirectStage, DirectState
from streams.kafka.ingest import IngestStage
from streams.kafka.inputmsg import InputMessage
from streams.kafka.stages import DomainStage, DomainState, JoinStage, JoinState, Send
from streams.producer import direct_placement
from streams.routing import input_partition_of, routing_key
from streams.settings import Settings
from tests.support.rawevents import key_of
from tests.support.stagepipe import encode_send

WALL = 2e9  # the wall clock the stages bound event time by: far after any simulated event


@dataclass
class Schedule:
    seed: int
    crashes: int = 2
    rebalances: int = 0  # with two workers: partitions change hands (every one is revoked, as Faust's are)
    skew: float = 0.0  # share of ingest reads that take one partition up to 300 messages ahead
    checkpoint_p: float = 0.15  # chance a stateful step ends with a checkpoint of its partition


@dataclass
class Outcome:
    alerts: set[str] = field(default_factory=set)
    counters: Counter[str] = field(default_factory=Counter)
    crashes: int = 0


class _Log:
    """One topic: a durable list per partition, of which the producer has written `visible` so far."""

    def __init__(self, partitions: int) -> None:
        self.items: dict[int, list[Any]] = {p: [] for p in range(partitions)}
        self.visible: dict[int, int] = dict.fromkeys(range(partitions), 0)

    def append(self, p: int, item: Any) -> None:
        self.items[p].append(item)
        self.visible[p] = len(self.items[p])

    def write_more(self, rng: random.Random) -> None:
        for p, items in self.items.items():
            if self.visible[p] < len(items) and rng.random() < 0.5:
                self.visible[p] = min(len(items), self.visible[p] + rng.randint(1, 20))

    def written(self) -> bool:
        return all(self.visible[p] == len(v) for p, v in self.items.items())


class _StagedWorker:
    def __init__(self, s: Settings, world: StagedWorld, rng: random.Random) -> None:
        self.s, self.world, self.rng = s, world, rng
        self.counters: Counter[str] = Counter()
        self.public = load_public(s)
        self.ingest = IngestStage(s, self.counters)
        self.join = JoinStage(s, self.counters, world.now)
        self.domain = DomainStage(s, self.counters, world.now)
        self.cp = checkpoint.Checkpointer(s.kafka, self.counters)
        self.states: dict[tuple[str, int], Any] = {}
        self.pos: dict[tuple[str, int], int] = dict(world.committed)  # next offset each partition reads
        self.acked: dict[tuple[str, int], int] = {}
        self.owned: set[tuple[str, int]] | None = None  # None: every partition (one worker)

    def assign(self, owned: set[tuple[str, int]]) -> None:
        """A rebalance as the worker's app handles one (eager: every partition revoked, then the new set
        assigned): states and acks not committed are dropped, reading restarts at the committed offsets."""
        for stage, p in self.owned if self.owned is not None else set(self.states) | set(self.pos):
            self.states.pop((stage, p), None)
            if stage == "input":
                self.ingest.forget(p)
            else:
                self.cp.forget(stage, p)
        self.acked.clear()
        self.owned = owned
        self.ingest.assign([p for stage, p in owned if stage == "input"], self.world.now)
        self.pos = {k: v for k, v in self.world.committed.items() if k in owned}

    def _mine(self, stage: str, p: int) -> bool:
        return self.owned is None or (stage, p) in self.owned

    def state(self, stage: str, p: int) -> Any:
        st = self.states.get((stage, p))
        if st is None:
            d = self.s.detection
            st = self.cp.restore(stage, p, self.world.tables[stage], d, self.public)
            if st is None:
                st = JoinState.fresh(d) if stage == "join" else DomainState.fresh(d, self.counters, self.public)
            if isinstance(st, JoinState):
                self.join.restored(p, st, self.world.now)
            else:
                self.domain.restored(p, self.world.now)
            self.states[(stage, p)] = st
        return st

    def _send(self, topic: _Log, sends: list[Send]) -> None:
        for send in sends:
            topic.append(send.partition, encode_send(send))

    def read_input(self, skew: float) -> bool:
        w, rng = self.world, self.rng
        ps = [p for p in w.input.items if self._mine("input", p) and self.pos.get(("input", p), 0) < w.input.visible[p]]
        if not ps:
            return False
        ahead = rng.random() < skew
        msgs = []
        for p in rng.sample(ps, 1 if ahead else rng.randint(1, len(ps))):
            start = self.pos.get(("input", p), 0)
            end = min(w.input.visible[p], start + rng.randint(1, 300 if ahead else 30))
            msgs += [InputMessage(p, off, None, w.input.items[p][off], False) for off in range(start, end)]
            self.pos[("input", p)] = end
        res = self.ingest.read(msgs, w.now, WALL)
        self.ingest.publish(res.newest, res.read_to)
        self._caught_up()
        self._send(w.join, self.ingest.sends(res.to_join, w.now, force=False))
        for p in {m.partition for m in msgs}:  # the ingest acks once it sent (its commit flushes first)
            self.acked[("input", p)] = self.pos[("input", p)]
        return True

    def _caught_up(self) -> None:
        """What the worker's stall check tells its ingest: the input partitions it owns read up to what the producer
        has written so far (only those may be reported idle)."""
        w = self.world
        self.ingest.caught_up = {
            p for p in w.input.items if self._mine("input", p) and self.pos.get(("input", p), 0) >= w.input.visible[p]
        }

    def heartbeat(self) -> None:
        self._caught_up()
        self._send(self.world.join, self.ingest.sends({}, self.world.now, force=True))

    def read_stage(self, stage: str, checkpoint_p: float) -> bool:
        """Up to 20 messages of one partition, as the worker's `_stateful` loop handles them."""
        w, rng = self.world, self.rng
        topic = w.join if stage == "join" else w.domain
        ps = [p for p, v in topic.items.items() if self._mine(stage, p) and self.pos.get((stage, p), 0) < len(v)]
        if not ps:
            return False
        p = rng.choice(ps)
        for _ in range(rng.randint(1, 20)):
            off = self.pos.get((stage, p), 0)
            if off >= len(topic.items[p]):
                break
            st = self.state(stage, p)
            if off > st.offset:
                batch = frames.decode(topic.items[p][off])
                if stage == "join":
                    self._send(w.domain, self.join.handle(st, p, off, batch, w.now).sends)
                else:
                    w.alerts |= {a.alert_id for a in self.domain.handle(st, p, batch, w.now).alerts}
                st.offset = off
            self.pos[(stage, p)] = off + 1
            if rng.random() < checkpoint_p:
                self.cp.store(self.cp.cut(stage, p, st), w.tables[stage])
                self.acked[(stage, p)] = off + 1
        return True

    def commit(self) -> None:
        for key, off in self.acked.items():
            if self.rng.random() < 0.7:
                self.world.committed[key] = max(self.world.committed.get(key, 0), off)


class StagedWorld:
    """ingest -> join -> domain over durable in-memory topics; input lines keyed as the staged producer keys."""

    def __init__(self, s: Settings, lines: list[bytes]) -> None:
        self.s = s
        k = s.kafka
        self.input = _Log(k.input_partitions)
        for line in lines:
            self.input.items[input_partition_of(key_of(orjson.loads(line)), k.input_partitions)].append(line)
        self.join = _Log(k.internal_partitions)
        self.domain = _Log(k.internal_partitions)
        self.committed: dict[tuple[str, int], int] = {}
        self.tables: dict[str, dict[bytes, bytes]] = {"join": {}, "domain": {}}
        self.alerts: set[str] = set()
        self.now = 1000.0  # monotonic seconds: idleness only

    def run(self, sched: Schedule) -> Outcome:
        rng = random.Random(sched.seed)
        out = Outcome()
        total = sum(len(v) for v in self.input.items.values())
        crash_at = sorted(int(total * rng.uniform(0.1, 0.95)) for _ in range(sched.crashes))
        move_at = sorted(int(total * rng.uniform(0.05, 0.95)) for _ in range(sched.rebalances))
        workers = [_StagedWorker(self.s, self, rng) for _ in range(2 if sched.rebalances else 1)]
        if len(workers) > 1:
            self._rebalance(workers, rng)
        rounds = 0
        while True:
            self.now += rng.choice([0.01, 0.05, 0.2, 1.0])
            self.input.write_more(rng)
            read = sum(self.committed.get(("input", p), 0) for p in self.input.items)
            read = max(read, *(sum(w.pos.get(("input", p), 0) for p in self.input.items) for w in workers))
            if crash_at and read >= crash_at[0]:
                crash_at.pop(0)
                for w in workers:
                    out.counters.update(w.counters)
                out.crashes += 1
                self.now += rng.choice([1.0, 10.0, 40.0])  # the restart takes a while
                workers = [_StagedWorker(self.s, self, rng) for _ in workers]
                if len(workers) > 1:
                    self._rebalance(workers, rng)
                continue
            if move_at and read >= move_at[0]:
                move_at.pop(0)
                self._rebalance(workers, rng)
                continue
            worker = rng.choice(workers)
            r = rng.random()
            if r < 0.4:
                did = worker.read_input(sched.skew)
            elif r < 0.7:
                did = worker.read_stage("join", sched.checkpoint_p)
            elif r < 0.95:
                did = worker.read_stage("domain", sched.checkpoint_p)
            else:
                worker.commit()
                did = True
            if rng.random() < 0.05:
                worker.heartbeat()
            if did or not self.input.written():
                continue
            busy = False
            for w in workers:
                busy |= w.read_input(sched.skew)
                busy |= w.read_stage("join", sched.checkpoint_p)
                busy |= w.read_stage("domain", sched.checkpoint_p)
            if not busy:  # everything read: quiet input, heartbeats release the last items
                rounds += 1
                self.now += 40.0
                for w in workers:
                    w.heartbeat()
                while any(w.read_stage("join", 0.0) | w.read_stage("domain", 0.0) for w in workers):
                    pass
                if rounds > 4:
                    break
        for w in workers:
            out.counters.update(w.counters)
        out.alerts = set(self.alerts)
        return out

    def _rebalance(self, workers: list[_StagedWorker], rng: random.Random) -> None:
        k = self.s.kafka
        parts = [("input", p) for p in range(k.input_partitions)]
        parts += [(stage, p) for stage in ("join", "domain") for p in range(k.internal_partitions)]
        for w in workers:
            if rng.random() < 0.5:
                w.commit()  # a commit may or may not come in before the revocation
        shares: list[set[tuple[str, int]]] = [set() for _ in workers]
        for key in parts:
            shares[rng.randrange(len(workers))].add(key)
        for w, share in zip(workers, shares, strict=True):
            w.assign(share)


class DirectWorld:
    """The direct topology: every event on its domain's input partition (placed, as produce_file writes it),
    canaries copied to every partition; `foreign` is the share of events keyed by request id instead, unplaced,
    which the stage re-routes to their domain's partition."""

    def __init__(self, s: Settings, lines: list[bytes], domains: dict[str, str], foreign: float, seed: int) -> None:
        self.s = s
        n = s.kafka.input_partitions
        rng = random.Random(seed)
        self.input = _Log(n)
        for line in lines:
            ev = parse_event(line, max_bytes=10**9)
            if ev.type != "canary" and rng.random() < foreign:
                self.input.items[input_partition_of(routing_key(ev).encode(), n)].append((line, False))
                continue
            for q in direct_placement(ev, domains, n)[1]:
                self.input.items[q].append((line, True))
        self.committed: dict[int, int] = {}
        self.table: dict[bytes, bytes] = {}
        self.alerts: set[str] = set()

    def run(self, sched: Schedule) -> Outcome:
        rng = random.Random(sched.seed)
        out = Outcome()
        total = sum(len(v) for v in self.input.items.values())
        crash_at = sorted(int(total * rng.uniform(0.1, 0.95)) for _ in range(sched.crashes))
        worker = _DirectWorker(self)
        while True:
            self.input.write_more(rng)
            if crash_at and sum(worker.pos.get(p, 0) for p in self.input.items) >= crash_at[0]:
                crash_at.pop(0)
                out.counters.update(worker.counters)
                out.crashes += 1
                worker = _DirectWorker(self)
                continue
            if rng.random() < 0.1:
                worker.commit(rng)
            elif not worker.read(rng, sched.checkpoint_p * 2) and self.input.written():
                break
        out.counters.update(worker.counters)
        out.alerts = set(self.alerts)
        return out


class _DirectWorker:
    def __init__(self, world: DirectWorld) -> None:
        self.world = world
        self.counters: Counter[str] = Counter()
        self.public = load_public(world.s)
        self.stage = DirectStage(world.s, self.counters)
        self.cp = checkpoint.Checkpointer(world.s.kafka, self.counters)
        self.states: dict[int, DirectState] = {}
        self.pos: dict[int, int] = dict(world.committed)
        self.acked: dict[int, int] = {}

    def state(self, p: int) -> DirectState:
        st = self.states.get(p)
        if st is None:
            d = self.world.s.detection
            restored = self.cp.restore("direct", p, self.world.table, d, self.public)
            assert restored is None or isinstance(restored, DirectState)
            st = self.states[p] = restored or DirectState.fresh_direct(d, self.counters, self.public)
        return st

    def read(self, rng: random.Random, checkpoint_p: float) -> bool:
        """Up to 60 messages of one partition, as the worker's `_direct_batch` hands them over."""
        w = self.world
        ps = [p for p in w.input.items if self.pos.get(p, 0) < w.input.visible[p]]
        if not ps:
            return False
        p = rng.choice(ps)
        st = self.state(p)
        start = self.pos.get(p, 0)
        end = min(w.input.visible[p], start + rng.randint(1, 60))
        items = w.input.items[p]
        msgs = [InputMessage(p, off, None, items[off][0], False, items[off][1]) for off in range(start, end)]
        res = self.stage.read(st, p, msgs, WALL)
        w.alerts |= {a.alert_id for a in res.alerts}
        for _key, value, q in res.reroute:
            w.input.append(q, (value, True))
        self.pos[p] = end
        if rng.random() < checkpoint_p:
            self.cp.store(self.cp.cut("direct", p, st), w.table)
            self.acked[p] = end
        return True

    def commit(self, rng: random.Random) -> None:
        for p, off in self.acked.items():
            if rng.random() < 0.7:
                self.world.committed[p] = max(self.world.committed.get(p, 0), off)

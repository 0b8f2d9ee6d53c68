"""The pipeline's first stage (detectors/ingest.py): text becomes prints and keys in one place, for every runner."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from factories import PROBE_MARKER, TEXTS, canary, request, response

from detectors.canaries import CanaryRegistry
from detectors.dedup import Deduper
from detectors.front import Front
from detectors.ingest import Ingest
from detectors.join import Joiner
from detectors.monitor import make_fingerprinter
from detectors.session_prints import session_cache
from detectors.settings import DetectionSettings
from schemas.events import Fingerprint

ROOT = Path(__file__).resolve().parents[2]
S = DetectionSettings(canary_tenants=["probe-*"])
# Where text may become prints or keys: the stage, and the pieces it calls (their definitions and their own helpers).
TEXT_STEP = {"detectors/ingest.py", "detectors/fingerprint.py", "detectors/session_prints.py", "detectors/canaries.py"}


def text_steps(root: Path) -> list[str]:
    """Every call in detectors/ or streams/ that turns text into prints or marker keys, outside the stage."""
    found = []
    for package in ("detectors", "streams"):
        for path in sorted((root / package).rglob("*.py")):
            rel = str(path.relative_to(root))
            if rel in TEXT_STEP or rel.startswith("tests/support/"):
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                f = node.func if isinstance(node, ast.Call) else None
                if isinstance(f, ast.Attribute) and f.attr in ("fingerprint_text", "token_keys", "scan"):
                    found.append(f"{rel}:{node.lineno} {f.attr}")
    return found


def test_text_becomes_prints_and_keys_in_the_ingest_stage_only() -> None:
    # The join fingerprinted text for one process, and the Kafka ingest again for the staged topology (issue 41).
    assert text_steps(ROOT) == []


def test_the_text_step_check_sees_a_second_text_step(tmp_path: Path) -> None:
    (tmp_path / "detectors").mkdir()
    (tmp_path / "streams" / "kafka").mkdir(parents=True)
    (tmp_path / "detectors" / "join.py").write_text("def f(fp, t):\n    return fp.fingerprint_text(t)\n")
    (tmp_path / "streams" / "kafka" / "ingest.py").write_text("def g(reg, t):\n    return reg.token_keys(t)\n")
    assert text_steps(tmp_path) == ["detectors/join.py:2 fingerprint_text", "streams/kafka/ingest.py:2 token_keys"]


def _ingest(scan_always: bool = True) -> tuple[Ingest, CanaryRegistry]:
    fpr = make_fingerprinter(S)
    keys = CanaryRegistry(fpr)
    return Ingest(fpr, keys, session_cache(S, fpr), scan_always=scan_always), keys


def test_a_request_leaves_ingest_without_its_text_and_markers_and_with_their_keys() -> None:
    ingest, keys = _ingest()
    text = f"{TEXTS[0]} and the marker {PROBE_MARKER} again"
    req = request("r1", "probe-a", 5.0, text=text, canaries=[PROBE_MARKER])
    printed = ingest(req)
    assert printed.event.type == "request"
    assert printed.event.prompt_text is None and printed.event.canaries == []
    fresh = make_fingerprinter(S).fingerprint_text(text, ends=False)
    assert printed.prints is not None and np.array_equal(printed.prints.hashes, fresh.hashes)
    token_key, marker_id = keys.keyed(PROBE_MARKER) or (0, "")
    assert printed.keys is not None and token_key in printed.keys  # the prompt re-sends its own marker
    assert [(p.token_key, p.marker_id, p.tenant_id, p.ts) for p in printed.plants] == [
        (token_key, marker_id, "probe-a", 5.0)
    ]
    assert PROBE_MARKER not in repr(printed) and TEXTS[0][:40] not in repr(printed)


def test_a_given_fingerprint_wins_and_only_an_output_printed_here_is_scanned() -> None:
    ingest, _ = _ingest()
    fpr = make_fingerprinter(S)
    given = Fingerprint(**fpr.wire_fields(fpr.fingerprint_text(TEXTS[1])))
    wire = given.model_dump(exclude_none=True)
    text = f"{TEXTS[2]} {PROBE_MARKER}"
    resp = ingest(response("r1", "bob", 1.0, text=text, output_fingerprint=wire))
    assert resp.prints is None and resp.keys is None  # the given print is the output's: its text is not scanned
    assert resp.event.output_text is None and resp.event.output_fingerprint == given
    req = ingest(request("r2", "bob", 1.0, text=text, prompt_fingerprint=wire))
    assert req.prints is None and req.keys  # a prompt's text is scanned still: markers it re-sends are its own
    plain = ingest(response("r3", "bob", 1.0, text=text))
    assert plain.prints is not None and plain.keys


def test_in_one_process_a_text_is_scanned_only_once_a_marker_is_planted() -> None:
    ingest, keys = _ingest(scan_always=False)
    assert ingest(response("r1", "bob", 1.0, text=f"{TEXTS[0]} {PROBE_MARKER}")).keys is None
    keys.register("probe-a", PROBE_MARKER, None, 0.0)
    assert ingest(response("r2", "bob", 1.0, text=f"{TEXTS[0]} {PROBE_MARKER}")).keys


def test_text_free_events_pass_the_stage_untouched() -> None:
    # Which events need the stage is decided where they are joined (`Front.join`, on every runner's per-event path): a
    # front without an ingest stage (a staged join partition) takes text-free events and refuses the others.
    ingest, _ = _ingest()
    apart = Front(Joiner(S, CanaryRegistry(make_fingerprinter(S))), Deduper(10, 10.0), None, Counter())
    for event in (request("r1", "a", 1.0), response("r1", "a", 2.0)):
        assert ingest(event).event is event
        apart.join(event)
    for needs in (canary("probe-a", PROBE_MARKER), request("r2", "a", 3.0, text=TEXTS[0])):
        with pytest.raises(ValueError, match="without an ingest stage"):
            apart.join(needs)


def test_a_snapshot_from_when_the_join_fingerprinted_text_restores_and_ingests() -> None:
    # Before the stage, a Front pickled its four slots (no ingest flag) and a Joiner its session cache.
    fpr = make_fingerprinter(S)
    joiner = Joiner(S, CanaryRegistry(fpr))
    old_joiner = {**joiner.__getstate__(), "sessions": session_cache(S, fpr)}
    restored_joiner = Joiner.__new__(Joiner)
    restored_joiner.__setstate__(old_joiner)
    assert not hasattr(restored_joiner, "sessions")
    old_front = (None, {"counters": Counter(), "dedup": Deduper(10, 10.0), "joiner": restored_joiner, "policy": None})
    front = Front.__new__(Front)
    front.__setstate__(old_front)
    assert front.ingest is not None and front.ingest.keys is restored_joiner.canaries
    out = front.join(request("r1", "bob", 1.0, text=TEXTS[0])) + front.join(response("r1", "bob", 2.0, text=TEXTS[1]))
    assert len(out) == 1 and out[0].prompt_print is not None and out[0].output_print is not None

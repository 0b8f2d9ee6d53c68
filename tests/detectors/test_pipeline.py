"""The pipeline declared once (detectors/pipeline.py): three stages, each topology a cut of them, and the runners
building stages only through it. Parity of the runners' alerts is tests/parity.py's, over every scenario here."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from detectors import pipeline
from detectors.back import Back
from detectors.front import Front
from detectors.ingest import Ingest
from detectors.settings import DetectionSettings

ROOT = Path(__file__).resolve().parents[2]
S = DetectionSettings(fingerprint_key="pipeline-test-key")
BUILDERS = {"Monitor", "Front", "Back", "Ingest", "Joiner", "Deduper", "CanaryRegistry", "DomainTable"}


def test_every_topology_is_a_cut_of_the_one_chain() -> None:
    chain = tuple(stage.name for stage in pipeline.STAGES)
    assert chain == ("ingest", "join", "judge")
    for name, runs in pipeline.TOPOLOGIES.items():
        assert tuple(s for run in runs for s in run) == chain, f"{name} leaves out, repeats or reorders a stage"


def test_every_topology_says_how_its_judge_tables_hear_the_fleet() -> None:
    # The fleet record (detectors/fleet.py) is the one state shared across domains: a topology that split the domains
    # without saying how they hear each other would judge with less than one process does.
    assert set(pipeline.FLEET_HEARS) == set(pipeline.TOPOLOGIES)


def test_the_chain_in_one_process_is_the_declared_stages() -> None:
    kinds = {stage.name: stage.kind for stage in pipeline.STAGES}
    m = pipeline.whole(S)
    assert isinstance(m.front.ingest, kinds["ingest"]) and isinstance(m.front, kinds["join"])
    assert isinstance(m.back, kinds["judge"])
    joiner, dedup = pipeline.join_state(S)
    apart = (pipeline.ingest_apart(S), pipeline.join_apart(joiner, dedup, Counter()), pipeline.judge_apart(m.table))
    assert [type(stage) for stage in apart] == [Ingest, Front, Back] == [kinds[n] for n in ("ingest", "join", "judge")]
    assert apart[0].scan_always and apart[1].ingest is None  # apart, the join takes records that ingest made


def kafka_imports_of_the_core(root: Path) -> list[str]:
    """Every import in streams/kafka/ of a detectors module other than the pipeline, as path:line module."""
    found = []
    for path in sorted((root / "streams" / "kafka").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            mods = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            mods += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            for mod in mods:
                if (mod == "detectors" or mod.startswith("detectors.")) and mod != "detectors.pipeline":
                    found.append(f"{path.relative_to(root)}:{node.lineno} {mod}")
    return found


def stage_builds(root: Path) -> list[str]:
    """Every call in streams/ (test support aside) that builds a stage or a stage's state itself."""
    found = []
    for path in sorted((root / "streams").rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[1] == "testing":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
                if name in BUILDERS:
                    found.append(f"{rel}:{node.lineno} {name}")
    return found


def test_the_kafka_shell_imports_the_core_only_through_the_pipeline() -> None:
    assert kafka_imports_of_the_core(ROOT) == []


def test_no_runner_builds_a_stage_but_through_the_pipeline() -> None:
    assert stage_builds(ROOT) == []


def test_both_checks_see_what_they_forbid(tmp_path: Path) -> None:
    (tmp_path / "streams" / "kafka").mkdir(parents=True)
    (tmp_path / "streams" / "kafka" / "x.py").write_text(
        "from detectors.front import Front\nimport detectors.back\nfrom detectors.pipeline import whole\n"
        "def f(j, d, c):\n    return Front(j, d, None, c)\n"
    )
    assert kafka_imports_of_the_core(tmp_path) == [
        "streams/kafka/x.py:1 detectors.front",
        "streams/kafka/x.py:2 detectors.back",
    ]
    assert stage_builds(tmp_path) == ["streams/kafka/x.py:5 Front"]

"""The documentation holds together: README.md is a short front door, every relative link in it and in
docs/ resolves (file and heading), the example alert is a valid alert, the configuration and YAML
examples load, and every `crosstalk` command and flag named in a recipe exists.

The examples live in the docs/ file that explains them; these tests read all of them, so a recipe that
moves between files stays checked."""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import sys
import unicodedata
from pathlib import Path

import pytest
import yaml

from schemas.alert import Alert
from schemas.events import parse_event
from streams.cli.main import build_parser
from streams.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = [README, ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
TEXTS = {path: path.read_text(encoding="utf-8") for path in DOCS}
ALL = "\n".join(TEXTS.values())


def _blocks(lang: str) -> list[tuple[str, str]]:
    return [
        (f"{path.relative_to(ROOT)}#{i}", block)
        for path, text in TEXTS.items()
        for i, block in enumerate(re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.S | re.M))
    ]


def test_readme_is_a_front_door() -> None:
    lines = TEXTS[README].splitlines()
    assert len(lines) < 300, len(lines)
    # The two commands for a fresh machine come first.
    first_block = re.search(r"```bash\n(.*?)```", TEXTS[README], flags=re.S)
    assert first_block is not None
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines()]
    assert commands == ["bash scripts/demo.sh", "bash scripts/test.sh"]
    # No commit hashes in the prose: the README describes the tree it is in, not how it got there (ids
    # inside the example alert's code block are the alert's own).
    prose = re.sub(r"^```.*?^```", "", TEXTS[README], flags=re.S | re.M)
    assert not re.findall(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,12}\b", prose)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|\[|\]\([^)]*\)", "", heading.strip()).lower()
    kept = "".join(ch for ch in text if ch in " -_" or unicodedata.category(ch)[0] in "LNM")
    return kept.replace(" ", "-")


def _anchors(text: str) -> set[str]:
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, flags=re.M):
        slug = _slug(heading)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _links(text: str) -> list[str]:
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    text = re.sub(r"`[^`\n]*`", "", text)
    return re.findall(r"\]\(([^)\s]+)\)", text)


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    broken = []
    for link in _links(TEXTS[path]):
        if re.match(r"[a-z]+:", link):
            continue  # http(s), mailto: not ours to check offline
        target, _, anchor = link.partition("#")
        dest = (path.parent / target).resolve() if target else path
        missing_anchor = dest.suffix == ".md" and dest.exists() and anchor not in _anchors(dest.read_text("utf-8"))
        if not dest.exists() or (anchor and missing_anchor):
            broken.append(link)
    assert not broken, broken


def test_the_link_checker_sees_broken_links(tmp_path: Path) -> None:
    assert _slug("Dependencies, and why each") == "dependencies-and-why-each"
    assert _slug("Units and the guarantee in every script (winnow-v2)") == (
        "units-and-the-guarantee-in-every-script-winnow-v2"
    )
    assert _links("[a](docs/x.md#y) `[b](c.md)` [d](https://e)") == ["docs/x.md#y", "https://e"]
    assert "intro" in _anchors("# Intro\n```\n# not a heading\n```\n") and "not-a-heading" not in _anchors(
        "```\n# not a heading\n```\n"
    )


def test_the_example_alert_is_an_alert() -> None:
    [block] = [b for _, b in _blocks("json") if '"alert_id"' in b and "…" not in b][:1]
    alert = Alert.model_validate_json(block)
    assert alert.kind == "cross_tenant_contamination" and alert.source_tenant_id


@pytest.mark.parametrize(("where", "block"), _blocks("toml"), ids=[w for w, _ in _blocks("toml")])
def test_every_toml_example_loads(where: str, block: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in [v for v in os.environ if v.startswith("CROSSTALK_")]:
        monkeypatch.delenv(var)
    cfg = tmp_path / "example.toml"
    cfg.write_text(block, encoding="utf-8")
    load_settings(cfg)  # raises on unknown keys or bad values


@pytest.mark.parametrize(("where", "block"), _blocks("yaml"), ids=[w for w, _ in _blocks("yaml")])
def test_every_yaml_example_parses_and_names_what_exists(where: str, block: str) -> None:
    doc = yaml.safe_load(block)
    assert isinstance(doc, dict)
    callbacks = doc.get("litellm_settings", {}).get("callbacks")
    if callbacks:  # a dotted path LiteLLM imports: the module must provide that name (it may be lazy)
        module, _, name = callbacks.rpartition(".")
        source = (ROOT / (module.replace(".", "/") + ".py")).read_text(encoding="utf-8")
        assert re.search(rf"^{name}\b|[\"']{name}[\"']", source, flags=re.M), callbacks
    kafka = doc.get("exporters", {}).get("kafka")
    if kafka:  # the Collector's topic is the one crosstalk reads by default
        # current Collector releases take the topic per signal (a top-level `topic` is rejected)
        assert "topic" not in kafka and kafka["traces"]["topic"] == load_settings(None).otlp.kafka_topic


def _command_lines() -> list[str]:
    lines = []
    for _, block in _blocks("bash"):
        joined = block.replace("\\\n", " ")
        for line in joined.splitlines():
            for part in re.split(r"\s(?:\||&&|&)\s", re.sub(r"\s&\s*$", "", line.split(" #")[0])):
                words = part.strip().split()
                while words and re.match(r"^[A-Z_]+=", words[0]):
                    words.pop(0)  # environment assignments before the command
                if words[:1] == ["crosstalk"]:
                    lines.append(" ".join(words[1:]))
    return lines


def test_every_crosstalk_subcommand_named_exists() -> None:
    named = set(re.findall(r"`crosstalk (\w+)", ALL)) | {line.split()[0] for line in _command_lines() if line}
    choices = set(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    assert named and named <= choices, named - choices


@pytest.mark.parametrize("line", _command_lines())
def test_every_crosstalk_command_in_a_recipe_parses(line: str) -> None:
    argv = [w for w in shlex.split(line.replace("…", "x")) if w != "..."]
    try:
        build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on an unknown flag or a bad value
        pytest.fail(f"crosstalk {line}: exit {exc.code}")


@pytest.mark.parametrize(("where", "block"), _blocks("python"), ids=[w for w, _ in _blocks("python")])
def test_every_python_example_compiles_and_its_events_are_valid(where: str, block: str) -> None:
    tree = ast.parse(block)
    # An event a recipe publishes must be one the contract accepts, not an approximation of it.
    for call in [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "publish"]:
        event = ast.literal_eval(call.args[0])
        parse_event(json.dumps(event).encode())


def _speed_figures() -> dict[str, str]:
    """The README's speed table as the committed benchmark results format it (bench/results/*.json)."""
    core = json.loads((ROOT / "bench/results/bench_textrich.json").read_text(encoding="utf-8"))
    kafka = json.loads((ROOT / "bench/results/bench_kafka_textrich.json").read_text(encoding="utf-8"))
    ext = json.loads((ROOT / "bench/results/bench_textrich-ext-v2-s7.json").read_text(encoding="utf-8"))
    hot = json.loads((ROOT / "bench/results/bench_hotdomain.json").read_text(encoding="utf-8"))
    direct = json.loads((ROOT / "bench/results/bench_kafka_direct.json").read_text(encoding="utf-8"))
    fig, ratio = core["figures"], core["ratio"]["core_over_fingerprint"]
    half = next(t for name, t in kafka["targets"].items() if "text-rich" in name and "half" in name)
    return {
        "CORE_EPS": f"{fig['core_events_per_s']:,.0f} events/s",
        "CORE_MBS": f"{fig['core_text_mb_s']:.1f} MB/s",
        "FP_MBS": f"{core['baseline']['fingerprint_text_mb_s']:.1f} MB/s",
        "CORE_RATIO": f"{100 * ratio:.1f} %",
        "COST_X": f"{1 / ratio:.1f}×",
        "JOBS": f"{fig['jobs2_speedup_cpu_alone']:.2f}×",
        "KAFKA_EPS": f"{kafka['figures']['worker_end_to_end_events_per_s']:,.0f} events/s",
        "KAFKA_RATIO": f"{100 * kafka['ratio']['worker_over_core']:.0f} %",
        "EDGE_P99": f"{kafka['figures']['latency_direct, text-rich_p99_ms']:,.0f} ms",
        "HALF_P99": f"{half['value']:,.0f} ms",
        "EDGE_RATE": f"{kafka['figures']['latency_direct, text-rich_rate']:,.0f} events/s",
        "EXT_RATIO": f"{100 * ext['ratio']['core_over_fingerprint']:.1f} %",
        "HOT_EPS": f"{hot['figures']['hot_text_events_s']:,.0f} events/s",
        "HOT_EDGE": f"{hot['ratio']['edge_prints_over_text']:.2f}×",
        "HOT_INDEX": f"{hot['figures']['domain_index_bytes_per_fingerprint']:.1f} B",
        "DIRECT_RATIO": f"{100 * direct['ratio']['direct_batched_over_core']:.1f} %",
    }


def test_the_speed_table_is_the_committed_benchmark_result() -> None:
    section = TEXTS[README].split("## How fast it is", 1)[1].split("\n## ", 1)[0]
    missing = {name: value for name, value in _speed_figures().items() if value not in section}
    assert not missing, f"README's speed table differs from bench/results: {missing}"


def test_the_evaluation_table_is_a_committed_result_file() -> None:
    section = TEXTS[README].split("## How well it works", 1)[1].split("\n## ", 1)[0]
    sys.path.insert(0, str(ROOT / "scripts"))
    import evaluate_all

    tables = [
        evaluate_all.readme_table(json.loads(path.read_text(encoding="utf-8")))
        for path in sorted((ROOT / "bench/results").glob("eval-all-*.json"))
    ]
    assert any(t in section for t in tables), "README's table is no result file's (scripts/evaluate_all.py --readme)"

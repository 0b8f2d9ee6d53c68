"""The whole evaluation (scripts/evaluate_all.py): seeds pool by their denominators, the worst is taken over shapes
and keys, ext-v2's scorer is read from what it prints, and a quick run goes end to end on every profile."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from factories import incident_alert

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import evaluate_all  # noqa: E402


def _run(shape: str, key: str, seed: int, **f: float) -> dict:
    return {"profile": "p", "shape": shape, "key": key, "seed": seed, "f": f}


def test_seeds_pool_by_their_denominators_and_the_worst_is_over_shapes_and_keys() -> None:
    runs = [
        # shape a, key 1: 1 of 10 leaks missed on one seed, none of 90 on the other: 99 % pooled, not 95 %
        _run("a", "k1", 1, exposure=0.9, **{"n:exposure": 10}, false_high=1, clean_2xx=1000),
        _run("a", "k1", 2, exposure=1.0, **{"n:exposure": 90}, false_high=0, clean_2xx=1000),
        # shape b, key 1: worse exposure, fewer false highs
        _run("b", "k1", 1, exposure=0.96, **{"n:exposure": 50}, false_high=0, clean_2xx=500),
    ]
    w = evaluate_all.worst(runs)["p"]
    assert w["exposure"] == pytest.approx(0.96)
    assert w["false_high"] == pytest.approx(1 / 2000)  # shape a pooled: 1 of 2,000
    a = evaluate_all.pooled([r["f"] for r in runs[:2]])
    assert a["exposure"] == pytest.approx(0.99)


def test_the_pooled_table_adds_every_shape_seed_and_key_and_shows_before_and_after() -> None:
    runs = [
        _run("a", "k1", 1, exposure=0.5, **{"n:exposure": 10}, false_high=1, clean_2xx=1000),
        _run("a", "k2", 1, exposure=1.0, **{"n:exposure": 10}, false_high=3, clean_2xx=1000),
        _run("b", "k1", 1, exposure=0.9, **{"n:exposure": 20}, false_high=0, clean_2xx=2000),
    ]
    pooled = evaluate_all.overall(runs)["p"]
    assert pooled["exposure"] == pytest.approx((5 + 10 + 18) / 40)
    assert pooled["false_high"] == pytest.approx(4 / 4000)
    assert evaluate_all.worst(runs)["p"]["exposure"] == pytest.approx(0.5)  # the worst-of is another figure
    report = {"commit": "new", "date": "d", "keys": ["k1", "k2"], "runs": runs, "worst": evaluate_all.worst(runs)}
    before_runs = [dict(r, f={**r["f"], "exposure": 0.5}) for r in runs]
    before = {"commit": "old", "runs": before_runs, "worst": evaluate_all.worst(before_runs)}
    md = evaluate_all.markdown(report, before)
    pooled_part = md.split("Pooled over every shape, seed and key")[1].split("Per run:")[0]
    assert "| exposure (≥ 97 %) | 50.0 % → 82.5 % |" in pooled_part
    assert "| exposure (≥ 97 %) | 50.0 % → 50.0 % |" in md.split("Pooled over")[0]


SCORER_OUTPUT = """alerts=3 kinds={} severities={}
group                        n  exposure exp_warn+    attrib  attr_any  delay_s
overall                     40     0.950     0.975     0.925     0.950      2.0
content_only                20     0.900     0.950     0.900     0.900      0.0
src_cjk                     10     1.000     1.000     0.900     1.000      0.0
recv_cjk                    12     1.000     1.000     0.917     1.000      0.0
false alarms: high+ 3/6000 = 0.0005   warning+ 9/6000 = 0.0015   (cjk receivers high+ 1/10, warning+ 1/10)
incidents: 4 with a leak, 2 false (high+, no leaked response) = 3.33 per 10,000 clean responses
exposure=0.950 attribution=0.925 false_alarm_rate=0.0005 (3/6000) content_only_exposure=0.900 attribution_cjk=0.917 \
attribution_src_cjk=0.900 detect_delay_s=2.0 FAIL
"""


def test_ext_v2_figures_are_read_from_its_scorers_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scorer = tmp_path / "score.py"
    scorer.write_text(f"print({SCORER_OUTPUT.replace(chr(92) + chr(10), '')!r}, end='')\n")
    monkeypatch.setattr(evaluate_all, "EXT_V2", tmp_path)
    # Incidents by their own severity are ours to count (ADR 0018), from its labels and the alerts.
    (tmp_path / "l").write_text(json.dumps({"positives": {"leak": "t"}, "cross_session": {"xs": "s"}}))
    (tmp_path / "a").write_text(
        "\n".join(
            incident_alert(rid, inc, sev).model_dump_json()
            for rid, inc, sev in (("clean", "i1", "warning"), ("leak", "i2", "high"), ("xs", "i3", "high"))
        )
    )
    # Its labels give no times: episodes are timed from the events' responses (streams/sim/episodes.py).
    times = (("clean", 0.0), ("leak", 0.5), ("xs", 0.8))
    (tmp_path / "e").write_text(
        "\n".join(json.dumps({"type": "response", "request_id": r, "ts": t, "cache_domain": "d1"}) for r, t in times)
    )
    f = evaluate_all.ext_v2(tmp_path / "l", tmp_path / "a", tmp_path / "e")
    assert (f["episodes_cold"], f["ttd_cold_s"], f["episodes_warm"], f["ttd_warm_s"]) == (1, 0.5, 0, None)
    assert (f["false_high"], f["clean_2xx"], f["false_warning"], f["false_incidents_by_alert"]) == (3, 6000, 9, 2)
    assert (f["false_incidents"], f["unpaged_incidents"], f["incident_delay_s"]) == (0, 0, 0.0)
    assert (f["exposure"], f["content_only"], f["attribution"]) == (0.95, 0.9, 0.925)
    assert (f["attribution_cjk_source"], f["attribution_cjk_receiver"], f["delay_s"]) == (0.9, 0.917, 2.0)
    assert (f["n:exposure"], f["n:content_only"], f["n:attribution_cjk_source"]) == (40, 20, 10)


@pytest.mark.slow
def test_a_quick_run_scores_every_profile_and_prints_the_readme_table(tmp_path: Path) -> None:
    # ext-v2 lives beside the checkout (../shared/eval/ext-v2), not in it: a clone elsewhere runs the others.
    profiles = [p for p in evaluate_all.QUICK if p != "ext-v2" or (evaluate_all.EXT_V2 / "generate.py").exists()]
    out = tmp_path / "quick"
    cmd = [sys.executable, "scripts/evaluate_all.py", "--quick", "--keys", "1", "--work", str(tmp_path / "w")]
    cmd += ["--profiles", *profiles, "--out", str(out)]
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, timeout=900)
    report = json.loads(out.with_suffix(".json").read_text())
    assert {r["profile"] for r in report["runs"]} == set(profiles)
    for r in report["runs"]:
        f = r["f"]
        assert f["clean_2xx"] > 0 and f.get("exposure") is not None, r
        # Every leak not flagged high has one reason (streams/sim/misses.py): they add up to the leaks missed.
        missed = sum(v for k, v in f.items() if k.startswith("miss:"))
        assert missed == round(f["leaks"] * (1 - f["exposure"])), r
        assert sum(v for k, v in f.items() if k.startswith("missed:")) == missed, r  # and one label shape each
    assert "Where the missed leaks went" in out.with_suffix(".md").read_text()
    assert (tmp_path / "quick-ttd.png").read_bytes().startswith(b"\x89PNG")  # time to detect, per episode
    table = subprocess.run(
        [sys.executable, "scripts/evaluate_all.py", "--readme", str(out.with_suffix(".json"))],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert table.startswith("| target | ours (3 shapes) |") and "| blind-v1b (dev) | blind-v1 (dev) | met |" in table
    assert "| blind-v4 (held out) | blind-v3 (dev) |" in table  # the one profile whose alerts nobody reads


def test_every_leak_class_is_pooled_and_the_worst_class_is_the_target() -> None:
    runs = [
        # two seeds of one shape: the spliced-page class pools 1 of 2 and 4 of 4 into 5 of 6; cross-session 0 of 1
        _run("a", "k1", 1, **{"class:spliced_page": 0.5, "n:spliced_page": 2, "class:whole_response": 1.0}),
        _run("a", "k1", 2, **{"class:spliced_page": 1.0, "n:spliced_page": 4, "class:cross_session": 0.0}),
        _run("b", "k1", 1, **{"class:spliced_page": 0.75, "n:spliced_page": 4, "n:whole_response": 1}),
    ]
    runs[0]["f"]["n:whole_response"] = 3
    runs[1]["f"]["n:cross_session"] = 1
    a = evaluate_all.pooled([r["f"] for r in runs[:2]])
    assert a["class:spliced_page"] == pytest.approx(5 / 6) and a["class:cross_session"] == 0.0
    w = evaluate_all.worst(runs)["p"]
    assert w["class:spliced_page"] == pytest.approx(0.75)  # shape b is worse than shape a pooled
    assert w["class:worst"] == 0.0  # the class no row of the old table showed
    table = evaluate_all.readme_table({"worst": {"sim": w}})
    assert "| the worst leak class (≥ 95 %) | 0.0 % | **no**: ours |" in table


def test_incidents_pool_their_counts_and_the_readme_shows_what_paging_on_them_costs() -> None:
    # False incidents by the incident's own severity are the target; counted by alert severity, and the page per
    # leak episode (how soon, and the episodes never paged), are shown beside it (ADR 0018). The per-incident
    # figures stay in the result files.
    runs = [
        _run("a", "k1", 1, false_incidents=0, false_incidents_by_alert=2, unpaged_incidents=1, incident_delay_s=30.0,
             ttp_warm_s=20.0, episodes_warm_unpaged=0),
        _run("a", "k1", 2, false_incidents=1, false_incidents_by_alert=1, unpaged_incidents=2, incident_delay_s=400.0,
             ttp_warm_s=400.0, episodes_warm_unpaged=2),
    ]  # fmt: skip
    w = evaluate_all.worst(runs)["p"]
    assert (w["unpaged_incidents"], w["incident_delay_s"]) == (3.0, 400.0)
    assert (w["ttp_warm_s"], w["episodes_warm_unpaged"]) == (400.0, 2.0)
    table = evaluate_all.readme_table({"worst": {"sim": w}})
    assert "| time to page, warm episode (incident high) | 400 s | – |" in table
    assert "| warm episodes never paged | 2 | – |" in table
    assert "leak incidents not paged" not in table  # in the result files' tables, not the README's
    assert "| …counted by alert severity |" in table and "| false incidents /10k (≤ 1) |" in table


def test_time_to_detect_is_judged_per_warm_episode_and_an_episode_never_flagged_misses_it() -> None:
    runs = [
        _run("a", "k1", 1, delay_s=0.0, ttd_warm_s=30.0, episodes_warm=3, episodes_warm_missed=0, ttd_cold_s=400.0),
        _run("a", "k1", 2, delay_s=0.0, ttd_warm_s=45.0, episodes_warm=2, episodes_warm_missed=1),
    ]
    w = evaluate_all.worst(runs)["p"]
    assert (w["ttd_warm_s"], w["episodes_warm_missed"], w["ttd_cold_s"]) == (45.0, 1, 400.0)
    table = evaluate_all.readme_table({"worst": {"sim": w}})
    assert "| time to detect, warm episode (≤ 60 s) | 45 s | yes |" in table
    assert "| warm episodes never flagged high (0) | 1 | **no**: ours |" in table
    assert "| time to detect, cold episode (bounded) | 400 s | – |" in table  # reported, bounded in the README
    assert "a run's first leak" not in table  # no longer the target's figure (the result files keep it)


def test_the_time_to_detect_plot_is_written_beside_the_tables(tmp_path: Path) -> None:
    f = {"episodes_warm": 3, "delays_warm": [0.0, 12.5], "episodes_cold": 1, "delays_cold": [400.0]}
    report = {"commit": "c", "date": "d", "keys": ["k1"], "runs": [_run("a", "k1", 1, **f)]}
    report["runs"][0]["profile"] = "sim"
    report["worst"] = evaluate_all.worst(report["runs"])
    md = evaluate_all.write(report, None, tmp_path / "eval-all-c")
    assert "![time to detect](eval-all-c-ttd.png)" in md and md == (tmp_path / "eval-all-c.md").read_text()
    assert (tmp_path / "eval-all-c-ttd.png").read_bytes().startswith(b"\x89PNG")
    assert json.loads((tmp_path / "eval-all-c.json").read_text())["runs"][0]["f"]["delays_warm"] == [0.0, 12.5]


def test_cjk_attribution_is_judged_within_three_points_of_the_profiles_attribution() -> None:
    w = {
        "sim": {"attribution": 0.978, "attribution_cjk_source": 0.939, "attribution_cjk_receiver": 0.95},
        "ext-v2": {"attribution": 0.975, "attribution_cjk_source": 0.99, "attribution_cjk_receiver": None},
    }
    table = evaluate_all.readme_table({"worst": w})
    assert "| CJK-source attribution (within 3 points) | 93.9 % | 99.0 % | **no**: ours |" in table
    assert "| CJK-receiver attribution (within 3 points) | 95.0 % | – | yes |" in table  # 2.8 points below: within

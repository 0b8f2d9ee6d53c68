"""docker-compose.yml agrees with the Settings model (no Docker needed: the YAML is only parsed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streams.settings import KafkaSettings, Settings

yaml = pytest.importorskip("yaml", reason="PyYAML is needed to parse docker-compose.yml (add it to the test extra)")

ROOT = Path(__file__).resolve().parents[2]


def _compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _crosstalk_services(c: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: svc for name, svc in c["services"].items() if "build" in svc}


def _known(name: str) -> bool:
    """CROSSTALK_<SECTION>__<FIELD> names a field of the Settings model."""
    assert name.startswith("CROSSTALK_"), name
    section, _, fld = name[len("CROSSTALK_") :].lower().partition("__")
    model = Settings.model_fields.get(section)
    if model is None or model.annotation is None:
        return False
    return fld in model.annotation.model_fields  # type: ignore[union-attr]


def test_env_var_names_are_settings_fields() -> None:
    services = _crosstalk_services(_compose())
    assert {"worker-1", "worker-2", "deliver"} <= set(services)
    for name, svc in services.items():
        for var in svc.get("environment", {}):
            if var.startswith("CROSSTALK_") and var != "CROSSTALK_CONFIG":  # the settings file itself
                assert _known(var), f"{name}: {var} is not a Settings field"


def test_topics_and_ports_agree_with_settings_defaults() -> None:
    c = _compose()
    k = KafkaSettings()  # the defaults, not whatever this shell's environment overrides
    env = c["services"]["worker-1"]["environment"]
    assert env["CROSSTALK_KAFKA__INPUT_TOPIC"] == k.input_topic
    assert env["CROSSTALK_KAFKA__ALERTS_TOPIC"] == k.alerts_topic
    assert env["CROSSTALK_KAFKA__DEADLETTER_TOPIC"] == k.deadletter_topic
    assert env["CROSSTALK_KAFKA__APP_ID"] == k.app_id
    assert int(env["CROSSTALK_KAFKA__WEB_PORT"]) == k.web_port
    assert any(p.endswith(f":{k.web_port}") for p in c["services"]["worker-1"]["ports"])
    # The host listener of the broker is the default bootstrap port of the settings.
    assert f"{k.bootstrap.rsplit(':', 1)[1]}:19092" in c["services"]["kafka"]["ports"]
    assert c["services"]["kafka"]["image"] == "apache/kafka:4.1.1"
    assert env["CROSSTALK_OTEL__ENDPOINT"].endswith(":4318")


def test_kafka_data_lives_in_the_volume() -> None:
    kafka = _compose()["services"]["kafka"]
    # apache/kafka writes to log.dirs, /tmp/kraft-combined-logs unless KAFKA_LOG_DIRS says otherwise.
    log_dirs = kafka["environment"]["KAFKA_LOG_DIRS"]
    mounts = {m.split(":")[1]: m.split(":")[0] for m in kafka["volumes"]}
    assert log_dirs in mounts and mounts[log_dirs] in _compose()["volumes"]  # a named volume, kept by `down`
    # A kept volume is formatted with a cluster id: the next container must present the same one.
    import base64

    cid = kafka["environment"]["CLUSTER_ID"]
    assert len(base64.urlsafe_b64decode(cid + "==")) == 16


def test_healthchecks_poll_only_what_serves_http() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    [hc] = [line for line in dockerfile.splitlines() if "/health" in line and "CMD" in line]
    assert "CROSSTALK_KAFKA__WEB_PORT" in hc  # the worker's own web port, whatever it is set to
    services = _crosstalk_services(_compose())
    for name, svc in services.items():
        serves_http = svc.get("command", ["worker"])[0] == "worker" and "entrypoint" not in svc
        assert serves_http != svc.get("healthcheck", {}).get("disable", False), name


def test_deliver_without_receivers_does_not_restart_loop() -> None:
    deliver = _compose()["services"]["deliver"]
    assert deliver["command"] == ["deliver"]
    assert not any(k.startswith("CROSSTALK_WEBHOOKS__RECEIVERS") for k in deliver.get("environment", {}))
    # ... so it must idle rather than exit (a supervisor restarts what exits): run it as compose would.
    import argparse
    import os

    from streams.kafka import deliver as deliver_mod

    os.environ.pop("CROSSTALK_CONFIG", None)
    args = argparse.Namespace(config=None, topic=None, group_id=None, max_idle_s=0.01, loglevel="error")
    assert deliver_mod.run(args) == 0


def test_jaeger_is_v2_and_takes_otlp() -> None:
    c = _compose()
    jaeger = c["services"]["jaeger"]
    assert jaeger["image"].startswith("jaegertracing/jaeger:2.")
    assert any("otlp" in arg for arg in jaeger.get("command", []))
    collector = yaml.safe_load((ROOT / "deploy" / "otel-collector-telemetry.yaml").read_text())
    assert collector["exporters"]["otlp/jaeger"]["endpoint"] == "jaeger:4317"
    # Jaeger takes no metrics: the metrics pipeline must not point at it.
    assert all("jaeger" not in e for e in collector["service"]["pipelines"]["metrics"]["exporters"])


def test_readme_produce_path_is_the_mounted_one() -> None:
    produce = _compose()["services"]["produce"]
    [events] = [m for m in produce["volumes"] if m.startswith("./events:")]
    target = events.split(":")[1]
    readme = "\n".join(p.read_text() for p in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
    runs = [line for line in readme.splitlines() if "docker compose run --rm produce" in line]
    assert runs and all(f" {target}/" in line for line in runs), runs


def test_no_public_fingerprint_key_and_keygen_writes_one_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess
    import sys

    from streams.settings import load_settings

    raw = (ROOT / "docker-compose.yml").read_text()
    assert "crosstalk-dev-key-change-me" not in raw
    c = _compose()
    for name in ("worker-1", "worker-2", "deliver"):
        svc = c["services"][name]
        assert svc["depends_on"]["keygen"]["condition"] == "service_completed_successfully"
        assert "secrets:/secrets:ro" in svc["volumes"]
    cfg = c["services"]["worker-1"]["environment"]["CROSSTALK_CONFIG"]
    keygen = c["services"]["keygen"]
    assert keygen["entrypoint"][-1] == cfg
    # Run the shipped script as compose does (its path mapped to this checkout).
    target = tmp_path / "secrets" / "crosstalk.toml"
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("CROSSTALK_")}
    script = ROOT / "deploy" / "keygen.py"
    out = subprocess.run([sys.executable, str(script), str(target)], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    monkeypatch.delenv("CROSSTALK_DETECTION__FINGERPRINT_KEY", raising=False)
    key = load_settings(target).detection.fingerprint_key
    assert key.configured and len(key.get_secret_value()) == 64
    assert key.get_secret_value() not in out.stdout  # never printed
    again = subprocess.run([sys.executable, str(script), str(target)], env=env, capture_output=True, text=True)
    assert again.returncode == 0 and load_settings(target).detection.fingerprint_key == key  # kept


def test_host_ports_do_not_collide_with_crosstalk_defaults() -> None:
    """Issue 26: worker-2's host port was 6067, the default port of `crosstalk scrape` on the same host."""
    from streams.settings import OtlpSettings, ScrapeSettings

    host_ports = [p.split(":")[0] for svc in _compose()["services"].values() for p in svc.get("ports", [])]
    assert len(host_ports) == len(set(host_ports)), host_ports
    theirs = {str(ScrapeSettings().limits_port), str(OtlpSettings().port)}
    assert not theirs & set(host_ports), theirs & set(host_ports)


def test_the_events_directory_of_the_produce_recipe_exists_on_a_fresh_clone() -> None:
    """`cp events.jsonl events/` failed on a fresh clone: git keeps no empty directory."""
    import subprocess

    produce = _compose()["services"]["produce"]
    [events] = [m for m in produce["volumes"] if m.startswith("./events:")]
    tracked = subprocess.run(
        ["git", "ls-files", "events"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert tracked == ["events/.gitkeep"], tracked
    ignored = subprocess.run(["git", "check-ignore", "-q", "events/events.jsonl"], cwd=ROOT)
    assert ignored.returncode == 0 and events.split(":")[0] == "./events"

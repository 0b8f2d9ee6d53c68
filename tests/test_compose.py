"""docker-compose.yml agrees with the Settings model (no Docker needed: the YAML is only parsed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streams.settings import KafkaSettings, Settings

yaml = pytest.importorskip("yaml", reason="PyYAML is needed to parse docker-compose.yml (add it to the test extra)")

ROOT = Path(__file__).resolve().parents[1]


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
            if var.startswith("CROSSTALK_"):
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

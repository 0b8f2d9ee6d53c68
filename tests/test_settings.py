"""Settings precedence: defaults < TOML file < environment < values given in code."""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.settings import KafkaSettings, Settings, load_settings


def test_precedence_defaults_file_env_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[kafka]\nbootstrap = "file:1"\nalerts_topic = "from-file"\n[detection]\nk = 6\n')
    monkeypatch.delenv("CROSSTALK_CONFIG", raising=False)
    monkeypatch.setenv("CROSSTALK_KAFKA__BOOTSTRAP", "env:2")
    s = load_settings(cfg)
    assert (s.kafka.bootstrap, s.kafka.alerts_topic, s.detection.k, s.detection.w) == ("env:2", "from-file", 6, 12)
    monkeypatch.setenv("CROSSTALK_CONFIG", str(cfg))
    assert load_settings().kafka.alerts_topic == "from-file"
    # A section given in code is taken whole: the environment must not clobber it field by field.
    s = Settings(kafka=KafkaSettings(bootstrap="code:3", alerts_topic="t"))
    assert (s.kafka.bootstrap, s.kafka.alerts_topic) == ("code:3", "t")


def test_unknown_keys_are_refused(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text("[kafka]\nbootstrapp = 'x'\n")
    with pytest.raises(ValueError, match="bootstrapp"):
        load_settings(cfg)

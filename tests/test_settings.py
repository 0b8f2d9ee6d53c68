"""Settings precedence: defaults < TOML file < environment < values given in code."""

from __future__ import annotations

from pathlib import Path

import pytest

from detectors.settings import DetectionSettings
from streams.settings import KafkaSettings, Settings, load_settings


def test_precedence_defaults_file_env_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[kafka]\nbootstrap = "file:1"\nalerts_topic = "from-file"\n[detection]\nk = 6\n')
    monkeypatch.delenv("CROSSTALK_CONFIG", raising=False)
    monkeypatch.setenv("CROSSTALK_KAFKA__BOOTSTRAP", "env:2")
    s = load_settings(cfg)
    default_w = DetectionSettings.model_fields["w"].default
    assert (s.kafka.bootstrap, s.kafka.alerts_topic, s.detection.k, s.detection.w) == (
        "env:2",
        "from-file",
        6,
        default_w,
    )
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


# --------------------------------------------------------------------------- secrets

SECRETS = {
    "fingerprint": "fp-key-5f1c0a9e2b7d4c31e0",
    "webhook": "wh-secret-9d0e7a51c2b4",
    "receiver": "rx-secret-61aa04f3b9",
    "otel": "Bearer otel-token-3c7e19",
}


def _secret_config(tmp_path: Path) -> Path:
    cfg = tmp_path / "secrets.toml"
    cfg.write_text(
        f'[detection]\nfingerprint_key = "{SECRETS["fingerprint"]}"\n'
        f'[webhooks]\nsecret = "{SECRETS["webhook"]}"\n'
        f'[[webhooks.receivers]]\nname = "r"\nurl = "https://hooks.example/x"\nsecret = "{SECRETS["receiver"]}"\n'
        f'[otel]\nheaders = {{ Authorization = "{SECRETS["otel"]}" }}\n'
    )
    return cfg


def test_settings_dump_masks_every_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from streams.cli.main import main

    monkeypatch.delenv("CROSSTALK_DETECTION__FINGERPRINT_KEY", raising=False)
    cfg = _secret_config(tmp_path)
    s = load_settings(cfg)
    # The secrets are there for the code that needs them ...
    assert s.detection.fingerprint_key.get_secret_value() == SECRETS["fingerprint"]
    assert s.webhooks.secret is not None and s.webhooks.secret.get_secret_value() == SECRETS["webhook"]
    assert s.otel.headers["Authorization"].get_secret_value() == SECRETS["otel"]
    # ... and nowhere a person or a log can read them.
    assert main(["--config", str(cfg), "settings"]) == 0
    out = capsys.readouterr().out
    shown = [out, repr(s), str(s), s.model_dump_json(), f"{s.detection.fingerprint_key}", str(s.model_dump())]
    for text in shown:
        for secret in SECRETS.values():
            assert secret not in text
    assert '"fingerprint_key": "set"' in out  # said, never shown


def test_settings_say_when_no_fingerprint_key_is_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 40: the mask read the same with a key and without one; an operator could not tell."""
    from streams.cli.main import main

    monkeypatch.delenv("CROSSTALK_DETECTION__FINGERPRINT_KEY", raising=False)
    cfg = tmp_path / "none.toml"
    cfg.write_text("[detection]\nk = 5\n")
    assert main(["--config", str(cfg), "settings"]) == 0
    out = capsys.readouterr().out
    assert '"fingerprint_key": "not set (a random key for this process)"' in out
    assert "*****" not in out


def test_fingerprint_key_still_hashes_with_its_value() -> None:
    from detectors.fingerprint import Fingerprinter, key_id_of
    from detectors.settings import DetectionSettings

    s = DetectionSettings(fingerprint_key="k-123456")
    assert key_id_of(s.fingerprint_key) == key_id_of("k-123456")
    text = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen"
    assert Fingerprinter(s.fingerprint_key, 5, 12).fingerprint(text) == Fingerprinter("k-123456", 5, 12).fingerprint(
        text
    )
    # Unconfigured: a random key of this process, never a public constant.
    d1, d2 = DetectionSettings(), DetectionSettings()
    assert not d1.fingerprint_key.configured and d1.fingerprint_key == d2.fingerprint_key
    assert d1.fingerprint_key.get_secret_value() != "crosstalk-dev-key-change-me"


@pytest.mark.parametrize("url", ["file:///etc/passwd", "gopher://h:70/x", "hooks.example/x", "ftp://h/x", "http://"])
def test_receiver_urls_must_be_http(url: str) -> None:
    from pydantic import ValidationError

    from streams.settings import WebhookReceiver

    with pytest.raises(ValidationError, match="http:// or https://"):
        WebhookReceiver(name="r", url=url)
    assert WebhookReceiver(name="r", url="HTTPS://hooks.example/x").url == "HTTPS://hooks.example/x"


def test_worker_without_key_exits_2(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("CROSSTALK_")}
    env["CROSSTALK_KAFKA__BOOTSTRAP"] = "127.0.0.1:9"  # never reached: the key check comes first
    root = Path(__file__).resolve().parents[1]
    cli = "import sys; from streams.cli.main import main; sys.exit(main())"
    proc = subprocess.run([sys.executable, "-c", cli, "worker"], cwd=root, env=env, capture_output=True, timeout=120)
    assert proc.returncode == 2, proc.stderr.decode()[-2000:]
    err = proc.stderr.decode().strip().splitlines()
    assert len(err) == 1 and "no fingerprint key configured" in err[0]


def test_replay_without_key_says_it_uses_a_random_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from streams.cli.main import main

    events = tmp_path / "e.jsonl"
    events.write_text('{"type":"canary","event_id":"c1","ts":1,"tenant_id":"probe-a","marker":"x"}\n')
    args = ["replay", str(events), "--alerts-out", str(tmp_path / "a.jsonl"), "--rejects", str(tmp_path / "r.jsonl")]
    monkeypatch.delenv("CROSSTALK_DETECTION__FINGERPRINT_KEY", raising=False)
    monkeypatch.delenv("CROSSTALK_CONFIG", raising=False)
    main([*args, "--quiet"])
    err = capsys.readouterr().err
    assert "using a random key for this run only" in err
    monkeypatch.setenv("CROSSTALK_DETECTION__FINGERPRINT_KEY", "given-key-xyz")
    main([*args, "--quiet"])
    err = capsys.readouterr().err
    assert "random key" not in err and "given-key-xyz" not in err

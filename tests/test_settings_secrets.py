"""No secret of the settings is ever shown: every URL, headers and secret field, found by walking the model.

A URL field (`streams.redact.Url`) keeps its real value for the clients and shows a redacted one;
headers and whole secrets are `SecretStr`. The walk makes a field added later without one of these
types fail here, instead of printing its credential in `crosstalk settings`.
"""

from __future__ import annotations

import json
import os
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, PlainSerializer, SecretStr

from streams.redact import SecretUrl, _dump_url, check_webhook_url, redact_text, redact_url
from streams.settings import Settings, load_settings

# Words of a field name that say "this may hold a credential": such a field must have a redacting type.
_SUSPECT = {"url", "urls", "endpoint", "headers", "secret", "key", "token", "password", "auth", "credentials", "dsn"}


def _unwrap(annotation: Any) -> list[Any]:
    """The types inside Optional/Union/list/dict/Annotated, the annotation itself first."""
    out = [annotation]
    for arg in typing.get_args(annotation):
        out.extend(_unwrap(arg))
    return out


def _is_url(field: Any) -> bool:
    # The Url type's serializer, on the field itself or inside `Url | None`.
    found = [*field.metadata, *_unwrap(field.annotation)]
    return any(isinstance(m, PlainSerializer) and m.func is _dump_url for m in found)


def _kind(field: Any) -> str | None:
    inner = _unwrap(field.annotation)
    if _is_url(field):
        return "url"
    if typing.get_origin(field.annotation) is dict or any(typing.get_origin(t) is dict for t in inner):
        return "headers" if SecretStr in inner else "dict"
    if SecretStr in inner:
        return "secret"
    if any(getattr(t, "__name__", "") == "FingerprintKey" for t in inner):
        return "secret"
    return None


def _may_hold_credential(path: str, field: Any) -> bool:
    """A text field named like a credential, or one whose default is a URL."""
    if str not in _unwrap(field.annotation):
        return False  # numbers and flags hold no credential (`max_tokens` is not a token)
    words = set(path.rsplit(".", 1)[-1].split("_"))
    return bool(words & _SUSPECT) or "://" in str(field.default)


def _walk(model: type[BaseModel], prefix: str = "") -> dict[str, tuple[str | None, Any]]:
    """Every leaf field of the settings tree: dotted path -> (kind, field). Lists of models as `name[]`."""
    out: dict[str, tuple[str | None, Any]] = {}
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        sub = [t for t in _unwrap(field.annotation) if isinstance(t, type) and issubclass(t, BaseModel)]
        if sub:
            is_list = any(typing.get_origin(t) is list for t in _unwrap(field.annotation))
            out.update(_walk(sub[0], f"{path}{'[]' if is_list else ''}."))
        else:
            out[path] = (_kind(field), field)
    return out


FIELDS = _walk(Settings)

# What each kind of field is set to: every credential a URL can carry, each unique so a leak is pinned.
PASSWORD, QUERY_TOKEN, PATH_TOKEN, HEADER_TOKEN, SECRET = (
    "pw-6a1f0c93e2",
    "qt-4b8e27d10f",
    "Zq8X0aBcDeFgHiJkLmNoPqRs",
    "hb-91c3e7a0d4",
    "sv-0e5d72c8b1f47a9c",
)
URL = f"https://ops:{PASSWORD}@hooks.example/services/T0001/B0002/{PATH_TOKEN}?token={QUERY_TOKEN}&team=sre"
LEAKS = (PASSWORD, QUERY_TOKEN, PATH_TOKEN, HEADER_TOKEN, SECRET)


def test_every_suspect_field_has_a_redacting_type() -> None:
    assert FIELDS, "the walk found no fields"
    kinds = {p: k for p, (k, _) in FIELDS.items()}
    # The walk must see the credential-bearing fields there are today (and any added later).
    for known in ("webhooks.receivers[].url", "webhooks.receivers[].headers", "otel.headers", "litellm.limits_url"):
        assert kinds[known] in ("url", "headers"), known
    bare = [p for p, (k, f) in FIELDS.items() if _may_hold_credential(p, f) and k not in ("url", "headers", "secret")]
    assert not bare, f"fields that may hold a credential without a redacting type: {bare}"


def _set(tree: dict[str, Any], path: str, value: Any) -> None:
    node = tree
    parts = path.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part[:-2], [{}])[0] if part.endswith("[]") else node.setdefault(part, {})
    node[parts[-1]] = value


def _config_with_every_credential() -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for path, (kind, _) in FIELDS.items():
        if kind == "url":
            _set(tree, path, URL)
        elif kind == "headers":
            _set(tree, path, {"Authorization": f"Bearer {HEADER_TOKEN}"})
        elif kind == "secret":
            _set(tree, path, SECRET)
    # The required fields of the list items that now exist.
    _set(tree, "webhooks.receivers[].name", "r")
    _set(tree, "scrape.targets[].engine", "vllm")
    _set(tree, "scrape.targets[].cache_domain", "pool-1")
    _set(tree, "otlp.tokens[].sender", "gateway")
    return tree


def _inline(value: Any) -> str:
    """TOML for a value as inline tables and arrays (a JSON string is a TOML basic string)."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_inline(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_inline(v) for v in value) + "]"
    return json.dumps(value)


def _toml(tree: dict[str, Any]) -> str:
    return "".join(f"{section} = {_inline(body)}\n" for section, body in tree.items())


def test_settings_show_no_credential_of_any_url_headers_or_secret_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from streams.cli.main import main

    for var in [v for v in os.environ if v.startswith("CROSSTALK_")]:
        monkeypatch.delenv(var)
    cfg = tmp_path / "all.toml"
    cfg.write_text(_toml(_config_with_every_credential()))
    s = load_settings(cfg)
    # Every URL field holds the real URL, for the clients that use it ...
    urls = [p for p, (k, _) in FIELDS.items() if k == "url"]
    assert len(urls) >= 5
    assert s.webhooks.receivers[0].url == URL and s.litellm.limits_url == URL and s.scrape.targets[0].url == URL
    assert s.webhooks.receivers[0].headers["Authorization"].get_secret_value() == f"Bearer {HEADER_TOKEN}"
    # ... and no way of showing the settings shows any credential.
    assert main(["--config", str(cfg), "settings"]) == 0
    out = capsys.readouterr().out
    shown = {
        "cli": out,
        "repr": repr(s),
        "str": str(s),
        "json": s.model_dump_json(),
        "dump": str(s.model_dump()),
        "receiver": repr(s.webhooks.receivers[0]),
    }
    for where, text in shown.items():
        for leak in LEAKS:
            assert leak not in text, f"{leak} shown in {where}"
    # What is shown still says where the URL points and which query names it has.
    assert "https://****:****@hooks.example/services/T0001/B0002/****?token=****&team=****" in out


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "https://hooks.slack.com/services/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",
            "https://hooks.slack.com/services/****/****/****",
        ),
        ("http://u:p@h:8080/x?token=abc#frag", "http://****:****@h:8080/x?token=****#****"),
        ("http://tok@h/", "http://****@h/"),
        ("http://127.0.0.1:6067/limits", "http://127.0.0.1:6067/limits"),
        (
            "https://discord.com/api/webhooks/123456789012345678/" + "x" * 68,
            "https://discord.com/api/webhooks/****/****",
        ),
        ("127.0.0.1:19092", "127.0.0.1:19092"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert repr(SecretUrl(url)) == repr(shown) and SecretUrl(url) == url


def test_error_messages_are_redacted() -> None:
    import httpx

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404)

    with httpx.Client(transport=httpx.MockTransport(answer)) as c, pytest.raises(httpx.HTTPStatusError) as info:
        c.get(URL).raise_for_status()
    assert PASSWORD in str(info.value)  # what the client says on its own ...
    text = redact_text(info.value)
    assert "404" in text and not any(leak in text for leak in LEAKS)  # ... and what crosstalk logs


@pytest.mark.parametrize(
    "url",
    [
        "http://@/x",
        "http://\nevil/",
        "http://ev\til.example/",
        "http://evil.example/\x7f",
        "http://a b/",
        "http://evil.example\\@good.example/",
        "http://a@b@c/",
        "http://169.254.169.254/latest/meta-data/",
        "http://169.254.0.1:8080/",
        "http://2852039166/",
        "http://0xa9fea9fe/",
        "http://0251.0376.0251.0376/",
        "http://[fd00:ec2::254]/",
        "http://[::ffff:169.254.169.254]/",
        "http://[fe80::1]/",
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://METADATA.google.internal./",
        "http://100.100.100.200/",
    ],
)
def test_webhook_url_refuses_ambiguous_and_metadata_hosts(url: str) -> None:
    from pydantic import ValidationError

    from streams.settings import WebhookReceiver

    with pytest.raises(ValidationError):
        WebhookReceiver(name="r", url=url)


def test_metadata_host_only_when_explicitly_allowed() -> None:
    from streams.settings import WebhookReceiver

    url = "http://169.254.169.254/hook"
    assert WebhookReceiver(name="r", url=url, allow_metadata_address=True).url == url
    # Ordinary hosts and private addresses stay allowed: an in-cluster receiver is normal.
    for ok in ("http://10.0.0.5:9093/api/v2/alerts", "https://alerts.example/x", "http://[::1]:8080/", "http://h/"):
        assert check_webhook_url(ok) == ok


def test_the_refusal_does_not_quote_the_credential() -> None:
    with pytest.raises(ValueError) as info:
        check_webhook_url(f"http://ops:{PASSWORD}@169.254.169.254/?token={QUERY_TOKEN}")
    assert PASSWORD not in str(info.value) and QUERY_TOKEN not in str(info.value)


def test_walk_sees_nested_types() -> None:
    # The walk itself must be able to fail: a plain dict[str, str] or str is not redacting.
    class Probe(BaseModel):
        headers: dict[str, str] = {}
        url: str = ""

    got = _walk(Probe)
    assert got["headers"][0] == "dict" and got["url"][0] is None

"""The fingerprint key: a secret that never shows itself (detectors.settings.DetectionSettings.fingerprint_key)."""

from __future__ import annotations

import secrets
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer, SecretStr

_MASK = "**********"


class FingerprintKey(str):
    """The secret of the keyed hash: a str (the fingerprinter hashes with it) that never shows itself.

    repr/str/format and the settings' JSON give a mask, so `crosstalk settings`, logs and tracebacks
    cannot print it; `get_secret_value()` is the one way to read it. `configured` tells a key from
    settings (file, env, code) from the per-process random default, which workers refuse.
    """

    configured: bool

    def __new__(cls, value: str, configured: bool = True) -> FingerprintKey:
        obj = super().__new__(cls, value)
        obj.configured = configured
        return obj

    def __reduce__(self) -> tuple[Any, ...]:
        return (FingerprintKey, (self.get_secret_value(), self.configured))

    def get_secret_value(self) -> str:
        return str.__str__(self)

    def __repr__(self) -> str:
        return f"FingerprintKey({_MASK!r})"

    def __str__(self) -> str:
        return _MASK

    def __format__(self, spec: str) -> str:
        return _MASK


_PROCESS_KEY: list[FingerprintKey] = []


def process_key() -> FingerprintKey:
    """A random key for this process: fingerprints match within the process and mean nothing outside it.

    The default for library use and tests that build settings in code; never a shared constant,
    since anyone holding fingerprints made with a public key can test guessed passages against them.
    """
    if not _PROCESS_KEY:
        _PROCESS_KEY.append(FingerprintKey(secrets.token_hex(32), configured=False))
    return _PROCESS_KEY[0]


def _to_key(value: Any) -> Any:
    if isinstance(value, FingerprintKey):
        return value
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if isinstance(value, str):
        if not value:
            raise ValueError("fingerprint_key must not be empty")
        return FingerprintKey(value)
    return value


Key = Annotated[
    FingerprintKey,
    BeforeValidator(_to_key),
    PlainSerializer(lambda v: _MASK, return_type=str, when_used="json"),
]

"""Probe identities and their canary markers.

A marker is `<prefix>-<32 lowercase hex digits>` (128 random bits from `secrets`), the format the monitor
accepts from probe tenants (`detection.canary_tenants`, `detection.canary_min_hex`). Markers are secrets
of the probe: they go to the monitor in canary/request events and nowhere else. Anything printed or
exported names a marker by its keyed id (`Fingerprinter.marker_id`, the id the monitor's alerts carry).
"""

from __future__ import annotations

import os
import re
import secrets
from collections import deque
from dataclasses import dataclass

from detectors.fingerprint import Fingerprinter

_ENV_NAME = re.compile(r"[^A-Za-z0-9]+")


@dataclass(frozen=True)
class Identity:
    tenant: str
    api_key: str

    def __repr__(self) -> str:  # never the key
        return f"Identity({self.tenant!r})"


def parse_identity(spec: str) -> Identity:
    """`NAME` (API key: $CROSSTALK_PROBE_KEY_<NAME>, else the name itself) or `NAME=ENV_VAR`."""
    name, sep, env = spec.partition("=")
    name = name.strip()
    if not name:
        raise ValueError(f"bad identity {spec!r}: expected NAME or NAME=ENV_VAR")
    if sep:
        key = os.environ.get(env.strip())
        if not key:
            raise ValueError(f"identity {name}: environment variable {env.strip()} is not set")
        return Identity(name, key)
    default_env = "CROSSTALK_PROBE_KEY_" + _ENV_NAME.sub("_", name).upper()
    return Identity(name, os.environ.get(default_env) or name)


def new_marker(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(16)}"


class MarkerBook:
    """The markers each identity planted in the last few cycles, and finding them in outputs."""

    def __init__(self, fingerprinter: Fingerprinter, keep_cycles: int = 4) -> None:
        self.fingerprinter = fingerprinter
        self._by_tenant: dict[str, deque[str]] = {}
        self.keep_cycles = keep_cycles

    def plant(self, tenant: str, prefix: str) -> str:
        marker = new_marker(prefix)
        self._by_tenant.setdefault(tenant, deque(maxlen=self.keep_cycles)).appendleft(marker)
        return marker

    def current(self, tenant: str) -> str:
        return self._by_tenant[tenant][0]

    def marker_id(self, marker: str) -> str:
        return self.fingerprinter.marker_id(marker)

    def foreign(self, receiver: str, text: str) -> list[tuple[str, str]]:
        """(owner tenant, marker id) of every other identity's marker found in `text`."""
        hits = []
        for owner, markers in self._by_tenant.items():
            if owner == receiver:
                continue
            for m in markers:
                if m in text:
                    hits.append((owner, self.marker_id(m)))
        return hits

    def redact(self, text: str) -> str:
        """Text with every known marker replaced by its keyed id (for anything that might be shown).

        Endpoints echo prompts in error messages, not always verbatim: upper-cased, without the prefix,
        cut short. So any run of 8 or more hex digits (either case) that shares 8 consecutive digits with
        a marker's random part is replaced, whole, along with the prefix in front of it."""
        secrets_by_id = {m.rsplit("-", 1)[1].lower(): m for ms in self._by_tenant.values() for m in ms}
        if not secrets_by_id:
            return text
        prefixes = {re.escape(m.rsplit("-", 1)[0]) for m in secrets_by_id.values()}
        pattern = re.compile(rf"(?:(?:{'|'.join(sorted(prefixes))})-?)?([0-9a-f]{{8,}})", re.IGNORECASE)

        def replace(match: re.Match[str]) -> str:
            run = match.group(1).lower()
            for random_part, marker in secrets_by_id.items():
                if any(run[i : i + 8] in random_part for i in range(len(run) - 7)):
                    return f"<marker:{self.marker_id(marker)}>"
            return match.group(0)

        return pattern.sub(replace, text)

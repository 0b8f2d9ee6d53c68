"""Who may send spans to the OTLP receiver, and what they may say (docs/security.md, who may send what).

A span asserts its tenant, and so decides whose data a finding names: the receiver cannot tell a real
gateway from anyone else who can reach its port. With `otlp.tokens` set, each request must carry
`Authorization: Bearer <token>`; the token names a sender, and the sender's spans may assert only the
tenants its glob patterns allow (probe tenants and canaries only with `probe`). Without tokens the
receiver trusts whoever reaches it, which is acceptable on loopback only: on any other bind it refuses
to start unless `otlp.allow_unauthenticated` says the operator means it, and then warns loudly.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging

from streams.inputs.otlp import Sender
from streams.settings import Settings

log = logging.getLogger("crosstalk.otlp")


class Unauthenticated(Exception):
    """No token, or not one of ours. The reason names neither (nothing of a presented token is logged)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class UnsafeBind(Exception):
    """A non-loopback bind without authentication and without otlp.allow_unauthenticated (the command
    ends with EXIT_CONFIG: it is a settings problem)."""


def is_loopback(bind: str) -> bool:
    if bind == "localhost":
        return True
    try:
        return ipaddress.ip_address(bind.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name, or "" (all addresses): not provably loopback


class Authenticator:
    """Bearer tokens -> senders. Compared as SHA-256 digests with hmac.compare_digest over every token, so
    neither the length nor the first differing byte of a guess shows in the time taken."""

    def __init__(self, settings: Settings) -> None:
        probe_tenants = tuple(settings.detection.canary_tenants)
        self._senders = [
            (
                hashlib.sha256(t.token.get_secret_value().encode()).digest(),
                Sender(t.sender, tuple(t.tenants), t.probe, probe_tenants),
            )
            for t in settings.otlp.tokens
        ]

    @property
    def required(self) -> bool:
        return bool(self._senders)

    def authenticate(self, authorization: str | None) -> Sender | None:
        """The sender of a request (None when no tokens are configured: an open receiver); raise
        Unauthenticated when tokens are configured and the header does not carry one of them."""
        if not self._senders:
            return None
        scheme, _, presented = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not presented.strip():
            raise Unauthenticated("no bearer token")
        digest = hashlib.sha256(presented.strip().encode("utf-8", "surrogateescape")).digest()
        found: Sender | None = None
        for known, sender in self._senders:
            if hmac.compare_digest(known, digest):
                found = sender
        if found is None:
            raise Unauthenticated("unknown bearer token")
        return found


class _NoRequestLines(logging.Filter):
    """aiohttp logs a request it cannot parse with the parser's message, which quotes the offending line:
    an Authorization header with a control character in it went to the log whole, token included. The
    line becomes one line naming the peer and the kind of error, without the exception or its message."""

    def filter(self, record: logging.LogRecord) -> bool:
        from aiohttp.http_exceptions import HttpProcessingError

        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            remote = record.args[0] if isinstance(record.args, tuple) and record.args else "?"
            record.msg = "unparseable HTTP request from %s (%s; the request is not quoted: it may hold a token)"
            record.args = (remote, type(exc).__name__)
            record.exc_info = record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


_FILTER = _NoRequestLines()


def quiet_request_lines() -> None:
    """Keep aiohttp's server log from quoting what a peer sent (idempotent: one filter however often)."""
    server_log = logging.getLogger("aiohttp.server")
    if _FILTER not in server_log.filters:
        server_log.addFilter(_FILTER)


def check_bind(settings: Settings, bind: str, port: int) -> None:
    """Refuse to serve an open receiver beyond loopback unless told to; warn loudly when told to."""
    o = settings.otlp
    if o.tokens or is_loopback(bind):
        if not o.tokens:
            log.info("OTLP receiver on loopback without tokens: every local process may send spans")
        return
    if not o.allow_unauthenticated:
        raise UnsafeBind(
            f"crosstalk otlp: refusing to listen on {bind}:{port} without authentication; set otlp.tokens "
            "(bearer tokens per sender), bind to loopback, or set otlp.allow_unauthenticated=true to accept "
            "spans from anyone who can reach the port"
        )
    for line in (
        f"UNAUTHENTICATED OTLP RECEIVER on {bind}:{port} (otlp.allow_unauthenticated=true)",
        "anyone who can reach this port may assert any tenant, name a victim tenant as the source of a leak,",
        "plant canaries as a probe tenant, and reuse another sender's request ids: set otlp.tokens",
    ):
        log.warning("!!! %s", line)

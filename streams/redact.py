"""Secrets in settings: the one place that decides what of a URL or a header may be shown.

Settings hold credentials in three shapes: whole values (keys, HMAC secrets: `SecretStr`), request
headers (`Authorization: Bearer ...`: a `dict[str, SecretStr]`), and URLs that carry a credential
inside them (`https://user:pw@host`, `?token=...`, a Slack webhook's path token). A URL is still
needed as itself by the HTTP clients, so it stays a `str` (a `SecretUrl`) whose value is the real URL,
while everything that shows it to a person -- `repr`, the settings JSON, dead letters, log lines --
goes through `redact_url`.

Also here: the webhook URL check, because what a URL may point at is the other half of what it may
reveal (a receiver at the cloud metadata address would post alerts, and signed headers, to it).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import re
import socket
from typing import Annotated, Any
from urllib.parse import urlsplit, urlunsplit

import idna
from pydantic import AfterValidator, PlainSerializer

MASK = "****"

# A path segment this long, or this long with a digit in it, reads as a token (Slack's
# /services/T.../B.../<24 chars>, Discord's /webhooks/<id>/<68 chars>, Teams' GUIDs), not a route.
_TOKEN_SEGMENT_LEN = 16
_DIGIT_SEGMENT_LEN = 8


def _tokenish(segment: str) -> bool:
    if len(segment) >= _TOKEN_SEGMENT_LEN:
        return True
    return len(segment) >= _DIGIT_SEGMENT_LEN and any(c.isdigit() for c in segment)


def _redact_path(path: str) -> str:
    return "/".join(MASK if _tokenish(seg) else seg for seg in path.split("/"))


def _redact_query(query: str) -> str:
    # Every value goes: a query string on a receiver or engine URL is where tokens are passed
    # (?token=, ?key=, ?sig=, ?code=), and a name alone says enough to recognise the URL.
    parts = []
    for item in query.split("&"):
        name, sep, _ = item.partition("=")
        parts.append(f"{name}={MASK}" if sep else (MASK if _tokenish(name) else name))
    return "&".join(parts)


def redact_url(url: str) -> str:
    """The URL as it may be shown: userinfo, query values, fragment and token-like path segments masked.

    Strings that are not URLs (no `scheme://`) come back unchanged, so this can run over any field.
    A URL that does not even parse is masked whole: it cannot be shown safely in part.
    """
    if "://" not in url:
        return url
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, hostport = netloc.rpartition("@")
            netloc = f"{MASK}:{MASK}@{hostport}" if ":" in userinfo else f"{MASK}@{hostport}"
        return urlunsplit(
            (
                parts.scheme,
                netloc,
                _redact_path(parts.path),
                _redact_query(parts.query) if parts.query else "",
                MASK if parts.fragment else "",
            )
        )
    except ValueError:
        return f"{url.partition('://')[0][:16]}://{MASK}"


_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,15}://[^\s'\"<>]+")


def redact_text(text: object) -> str:
    """`str(text)` with every URL in it redacted: for log lines that quote an exception, since HTTP
    clients put the full request URL, password and token included, into their error messages."""
    return _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), str(text))


class RedactUrls(logging.Filter):
    """Rewrites a log record's message with its URLs redacted (and always lets it through)."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        if "://" in msg:
            record.msg, record.args = redact_text(msg), None
        return True


_CLIENT_LOGGERS = ("httpx", "httpcore", "urllib3")


def protect_client_logs() -> None:
    """HTTP clients log each request with its full URL (httpx at INFO: `HTTP Request: POST
    http://user:password@host/?token=...`): filter those loggers so that, whatever level a process
    logs at, the line shows the redacted URL. Idempotent; called by every module that sends to a
    configured URL."""
    for name in _CLIENT_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactUrls) for f in logger.filters):
            logger.addFilter(RedactUrls())


def target_id(url: str, key: str | None = None) -> str:
    """A stable id of a full URL (secrets included) that reveals none of it: which receiver URL a
    dead letter was meant for, telling apart two URLs that redact alike.

    Keyed with the receiver's signing secret when there is one, so that a short password in the URL
    cannot be guessed offline from the id; unkeyed it is still a one-way 64-bit digest.
    """
    k = (key or "crosstalk-target-id").encode()
    return hmac.new(k, url.encode(), hashlib.sha256).hexdigest()[:16]


class SecretUrl(str):
    """A URL that may carry a credential: the real URL as a str (clients use it as it is), but its
    repr -- what pydantic, dict dumps and tracebacks show -- is the redacted URL."""

    __slots__ = ()

    def __repr__(self) -> str:
        return repr(redact_url(str.__str__(self)))

    @property
    def redacted(self) -> str:
        return redact_url(str.__str__(self))


def _to_secret_url(value: str) -> SecretUrl:
    return value if isinstance(value, SecretUrl) else SecretUrl(value)


def _dump_url(value: Any) -> Any:
    return redact_url(value) if isinstance(value, str) else value


# The settings type of every URL field: validated as a str, kept as a SecretUrl, dumped redacted.
Url = Annotated[str, AfterValidator(_to_secret_url), PlainSerializer(_dump_url, when_used="json")]


# --------------------------------------------------------------------------- webhook URL check

# Cloud instance-metadata endpoints: a receiver there would post alerts (and their signed headers) to
# the credentials service of the host. Link-local 169.254.0.0/16 and fe80::/10 cover AWS, GCP, Azure,
# Oracle and OpenStack by address; these are the names and the addresses outside those ranges.
_METADATA_HOSTS = frozenset(
    {"metadata.google.internal", "metadata", "metadata.goog", "instance-data", "instance-data.ec2.internal"}
)
_METADATA_ADDRESSES = frozenset(
    {
        ipaddress.ip_address("fd00:ec2::254"),  # AWS IMDS over IPv6
        ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud
    }
)


def _as_ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        # The resolver (inet_aton) also takes 2852039166, 0xa9fea9fe and 0251.0376.0251.0376 for
        # 169.254.169.254: read the host the way the connection will.
        if not host or not all(c in "0123456789abcdefx." for c in host):
            return None
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def metadata_reason(host: str) -> str | None:
    """Why `host` is a link-local or cloud-metadata address, or None."""
    name = host.lower().rstrip(".")
    if name in _METADATA_HOSTS:
        return f"host {name!r} is a cloud metadata service"
    ip = _as_ip(name)
    if ip is None:
        return None
    if ip in _METADATA_ADDRESSES:
        return f"address {ip} is a cloud metadata service"
    if ip.is_link_local:
        return f"address {ip} is link-local (the cloud metadata range)"
    return None


def client_host(host: str) -> str:
    """`host` as the HTTP client will connect to it. httpx (and browsers) encode a non-ASCII host
    with IDNA, which reads the ideographic and fullwidth full stops (U+3002, U+FF0E, U+FF61) as dots:
    `169。254。169。254` is 169.254.169.254 on the wire. Raises ValueError when no client could."""
    name = host.lower()
    if name.isascii():
        return name
    forms = set()
    for uts46 in (False, True):  # httpx's encoding first; UTS46 also maps fullwidth letters
        try:
            forms.add(idna.encode(name, uts46=uts46).decode("ascii"))
        except idna.IDNAError:
            continue
    if not forms:
        raise ValueError("host is not a valid internationalised domain name")
    # Any reading that is an address or a metadata name decides: the check must not depend on which
    # of the two encodings a client version picks.
    return min(forms, key=lambda f: (metadata_reason(f) is None, _as_ip(f.rstrip(".")) is None))


def check_webhook_url(value: str, allow_metadata: bool = False) -> str:
    """A receiver URL: http(s) with a real host, nothing a parser could read two ways, and not the
    metadata service unless `allow_metadata`. Raises ValueError with the reason (URL redacted)."""
    shown = redact_url(value)
    bad = next((c for c in value if ord(c) <= 0x20 or 0x7F <= ord(c) <= 0x9F or c == "\\"), None)
    if bad is not None:
        # Control characters and spaces are dropped or split on differently by different parsers
        # (http://\nevil/); a backslash is a path separator to some and userinfo to others.
        raise ValueError(f"webhook receiver url must not contain {bad!r} (control character, space or backslash)")
    scheme, sep, rest = value.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or not rest or rest.startswith("/"):
        raise ValueError(f"webhook receiver url must be http:// or https:// with a host, got {shown!r}")
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"webhook receiver url {shown!r} does not parse: {exc}") from None
    if parts.netloc.count("@") > 1:
        raise ValueError(f"webhook receiver url {shown!r}: more than one '@' (encode it in the userinfo)")
    host = parts.hostname or ""
    if not host:
        raise ValueError(f"webhook receiver url must be http:// or https:// with a host, got {shown!r}")
    if port == 0:
        raise ValueError(f"webhook receiver url {shown!r}: port 0")
    try:
        wire = client_host(host)
    except ValueError as exc:
        raise ValueError(f"webhook receiver url {shown!r}: {exc}") from None
    if wire != host.lower() and _as_ip(wire.rstrip(".")) is not None:
        # An address spelt with Unicode dots or digits is only ever a way around this check.
        raise ValueError(f"webhook receiver url {shown!r}: an address written with non-ASCII characters")
    reason = metadata_reason(wire)
    if reason and not allow_metadata:
        raise ValueError(f"webhook receiver url {shown!r}: {reason}; set allow_metadata_address = true to allow it")
    return value

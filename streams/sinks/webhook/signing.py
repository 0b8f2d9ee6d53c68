"""The HMAC scheme receivers check: `v1=<hex HMAC-SHA256(secret, "<ts>." + body)>`.

`verify_signature` is what a receiver calls on untrusted headers, so it never raises: anything it
cannot read (non-ASCII, an odd timestamp spelling) is simply not a valid signature.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time

from pydantic import SecretStr

# Plain decimal digits only: "+N", "00N", "1_796…", " N" and "N.0" all parse as int() in Python and
# would let one signed timestamp be presented in many spellings.
_TIMESTAMP = re.compile(r"(?:0|[1-9][0-9]{0,14})")


def _key(secret: str | SecretStr) -> bytes:
    return (secret.get_secret_value() if isinstance(secret, SecretStr) else secret).encode()


def sign(secret: str | SecretStr, timestamp: int | str, body: bytes) -> str:
    """`v1=<hex HMAC-SHA256(secret, f"{timestamp}." + body)>`; the timestamp is bound in to stop replays."""
    mac = hmac.new(_key(secret), f"{timestamp}.".encode() + body, hashlib.sha256)
    return "v1=" + mac.hexdigest()


def verify_signature(
    secret: str | SecretStr,
    timestamp: str | int,
    body: bytes,
    signature: str,
    tolerance_s: float = 300.0,
    now: float | None = None,
) -> bool:
    """For receivers: True iff `signature` (header value, maybe several comma-separated v1= entries
    during secret rotation) matches and the timestamp is within `tolerance_s` of `now`. Never raises."""
    try:
        if isinstance(timestamp, bool):
            return False
        if isinstance(timestamp, int):
            ts = timestamp
            if ts < 0:
                return False
        elif isinstance(timestamp, str) and timestamp.isascii() and _TIMESTAMP.fullmatch(timestamp):
            ts = int(timestamp)
        else:
            return False
        if not isinstance(signature, str) or not signature.isascii() or not isinstance(body, bytes | bytearray):
            return False
        now = time.time() if now is None else now
        if abs(now - ts) > tolerance_s:
            return False
        expected = sign(secret, ts, bytes(body)).encode()
        return any(hmac.compare_digest(expected, part.strip().encode()) for part in signature.split(","))
    except Exception:  # a receiver's verifier must answer False to whatever an attacker sends
        return False

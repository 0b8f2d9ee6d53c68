"""Write the deployment's fingerprint key once: `python keygen.py /secrets/crosstalk.toml`.

docker compose runs this before the workers. The key is the secret of the keyed hash: the same one
must be used by every worker (and by gateways that fingerprint at the edge), and it must not change
while stored state exists, so an existing file is never touched. $FINGERPRINT_KEY (compose passes
$CROSSTALK_FINGERPRINT_KEY as it), when set, is used instead of a random key. The key is never printed.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path


def main(path: str) -> int:
    target = Path(path)
    if target.exists():
        print(f"keygen: {target} exists; keeping its fingerprint key")
        return 0
    given = os.environ.get("FINGERPRINT_KEY", "")
    key = given or secrets.token_hex(32)
    if any(c in key for c in '"\\\n'):
        print("keygen: the given key must not contain quotes, backslashes or newlines", file=sys.stderr)
        return 2
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o640)
    with os.fdopen(fd, "w") as f:
        f.write(f'[detection]\nfingerprint_key = "{key}"\n')
    os.replace(tmp, target)
    print(f"keygen: wrote {'the given' if given else 'a random'} fingerprint key to {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "/secrets/crosstalk.toml"))

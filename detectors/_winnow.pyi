"""Types of the optional native extension built from detectors/_winnow.c."""

from schemas.exchange import TextFingerprint

class Winnower:
    def __init__(
        self,
        k: int,
        w: int,
        classes: bytes,
        fold: bytes,
        max_units: int,
        max_bytes: int,
        model: type[TextFingerprint] | None = None,
    ) -> None: ...
    def hashes(self, text: str, hash_fn: object, /) -> bytearray: ...
    def fingerprint(self, text: str, hash_fn: object, /) -> TextFingerprint | tuple[list[int], int]: ...
    def clear(self) -> None: ...
    @property
    def cached(self) -> int: ...

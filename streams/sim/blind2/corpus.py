"""The vendored corpus (data/corpus.json.xz), read into pools of real text per language and per tenant."""

from __future__ import annotations

import json
import lzma
import random
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).with_name("data") / "corpus.json.xz"
TENANT_LANGS = ("en", "ko", "ru", "fr", "es", "ja", "zh", "pt")
PUBLIC_ONLY_LANGS = ("ar", "th", "vi")
LANG_NAMES = {
    "en": "English", "ko": "Korean", "ru": "Russian", "fr": "French", "es": "Spanish", "ja": "Japanese",
    "zh": "Chinese (Simplified)", "pt": "Portuguese (Brazil)", "ar": "Arabic", "th": "Thai", "vi": "Vietnamese",
}  # fmt: skip
# Scripts written without spaces between words: each character is one unit of text.
_DENSE = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff\u0e00-\u0e7f]")
_PLACEHOLDER = re.compile(r"\{\d\}|%\d")
# A unit of text as it streams: one dense-script character (with trailing punctuation/space), or a word with its space.
UNIT = re.compile(
    r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff\u0e00-\u0e7f][\s、。，．！？」』）]*|[^\s\u3040-\u30ff\u3400-\u9fff]+\s*|\s+"
)


@cache
def raw() -> dict[str, Any]:
    return json.loads(lzma.decompress(DATA.read_bytes()))


def min_len(lang: str) -> int:
    return 10 if lang in ("ja", "zh", "ko") else 24


@cache
def pool(lang: str) -> tuple[str, ...]:
    """Every usable sentence of a tenant language, in a fixed order (TypeScript diagnostics, then JupyterLab)."""
    c = raw()
    texts = list(c["typescript_diagnostics"][lang].values())
    if lang == "en":
        texts += list(c["jupyterlab"]["fr"].keys())
    else:
        texts += list(c["jupyterlab"][lang].values())
    seen: set[str] = set()
    out = []
    for t in texts:
        t = " ".join(t.split("\x04")[-1].split())  # a gettext key is "context\x04msgid"
        if len(t) >= min_len(lang) and t not in seen and "http" not in t:
            seen.add(t)
            out.append(t)
    return tuple(out)


@cache
def parallel(lang: str) -> tuple[tuple[str, str], ...]:
    """(text in `lang`, the same message in English) pairs of the TypeScript diagnostics."""
    c = raw()["typescript_diagnostics"]
    en = c["en"]
    return tuple((v, en[k]) for k, v in c[lang].items() if k in en and len(v) >= min_len(lang))


def udhr(lang: str) -> list[list[str]]:
    return raw()["udhr"][lang]


def licences() -> dict[str, str]:
    return raw()["licences"]


def stdlib() -> list[dict[str, str]]:
    return raw()["stdlib"]


def ts_lib() -> list[str]:
    return raw()["typescript_lib"]


def tokens(text: str) -> int:
    """A tokenizer's count, estimated: ~1 per dense-script character, ~1.3 per Latin word, more for other scripts."""
    dense = len(_DENSE.findall(text))
    hangul = sum(1 for ch in text if "\uac00" <= ch <= "\ud7af")
    rest = _DENSE.sub(" ", text)
    words = re.findall(r"[A-Za-z0-9_]+|[^\sA-Za-z0-9_]+", rest)
    latin = sum(1 for w in words if w[0].isascii())
    other = len(words) - latin
    return max(1, int(dense * 0.9 + hangul * 0.6 + latin * 1.3 + other * 1.8))


def units(text: str) -> list[str]:
    """`text` cut into stream units; their concatenation is `text` again."""
    return UNIT.findall(text)


@dataclass
class Slice:
    """The private sentences of one tenant: a disjoint share of its language's pool, with placeholders filled."""

    lang: str
    sentences: list[str]
    names: list[str]

    def fill(self, text: str, rng: random.Random) -> str:
        return _PLACEHOLDER.sub(lambda _m: rng.choice(self.names), text)

    def draw(self, rng: random.Random, n: int) -> list[str]:
        return [self.fill(rng.choice(self.sentences), rng) for _ in range(n)]


_NAME_PARTS = (
    "invoice", "ledger", "payroll", "cart", "shipment", "claim", "patient", "policy", "tariff", "booking", "route",
    "sensor", "meter", "contract", "vendor", "quota", "refund", "ticket", "lesson", "recipe", "dosage", "parcel",
)  # fmt: skip


def tenant_names(rng: random.Random, tenant: str) -> list[str]:
    """Identifiers a tenant's own code and data use (they fill the corpus' {0}/%1 placeholders)."""
    stem = tenant.split("-")[0]
    out = []
    for _ in range(12):
        a, b = rng.sample(_NAME_PARTS, 2)
        form = rng.randrange(4)
        out.append(
            f"{a}{b.capitalize()}"
            if form == 0
            else f"{stem}_{a}_{rng.randrange(10, 999)}"
            if form == 1
            else f"{a}-{b}.{rng.choice(('ts', 'json', 'py', 'csv'))}"
            if form == 2
            else f"{b.upper()}-{rng.randrange(1000, 99999)}"
        )
    return out


def slices(rng: random.Random, tenants: list[tuple[str, str, float]]) -> dict[str, Slice]:
    """Give each (tenant, lang, weight) a disjoint share of its language's pool, in proportion to its weight."""
    out: dict[str, Slice] = {}
    by_lang: dict[str, list[tuple[str, float]]] = {}
    for tid, lang, w in tenants:
        by_lang.setdefault(lang, []).append((tid, w))
    for lang, members in sorted(by_lang.items()):
        sentences = list(pool(lang))
        rng.shuffle(sentences)
        total = sum(w for _, w in members)
        floor = min(60, len(sentences) // (2 * len(members)))
        spare = len(sentences) - floor * len(members)
        start = 0
        for tid, w in members:
            end = start + floor + int(spare * w / total)
            out[tid] = Slice(lang, sentences[start:end], tenant_names(rng, tid))
            start = end
    return out

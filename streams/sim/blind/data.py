"""The vendored real text (data/corpus.json.xz), split into what tenants own and what everybody shares.

Units: one CJK/kana/hangul character, one run of word characters, or one punctuation mark. Pages, passage
lengths and the two token counters below are in these units, not in any detector's.
"""

from __future__ import annotations

import lzma
import math
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import orjson

DATA = Path(__file__).parent / "data" / "corpus.json.xz"
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uff66-\uff9f"
UNIT = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+|[^\s\w]", re.UNICODE)
_SENT_LATIN = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])|\n{2,}")
_SENT_CJK = re.compile(r"(?<=[。！？])|\n+")
_MARKUP = re.compile(r"^\s*(\.\. |:[a-z]+:|={3,}|-{3,}|\*{3,}|#{1,6} |\||```|<|!\[)")


@cache
def corpus() -> dict[str, Any]:
    return orjson.loads(lzma.decompress(DATA.read_bytes()))


def units(text: str) -> list[str]:
    return UNIT.findall(text)


def is_cjk(ch: str) -> bool:
    return bool(ch) and bool(re.match(rf"[{_CJK}]", ch[0]))


def gateway_tokens(text: str) -> int:
    """A BPE-like count the gateway makes: ~4 characters a token for words, one per CJK character or mark."""
    n = 0
    for u in UNIT.findall(text):
        n += 1 if len(u) == 1 else math.ceil(len(u) / 4.2)
    return n + text.count("\n") // 2


def engine_tokens(text: str, cjk_per_token: float, latin_chars: float) -> int:
    """The engine's own tokenizer (another vocabulary): its ratio to the gateway's differs per model."""
    n = 0.0
    for u in UNIT.findall(text):
        n += 1.0 / cjk_per_token if is_cjk(u) else 1.0 if len(u) == 1 else math.ceil(len(u) / latin_chars)
    return int(n)


def sentences(text: str, lang: str) -> list[str]:
    """Prose sentences of a text, markup lines (rst/markdown directives, rules, tables, code fences) dropped."""
    lines = [ln for ln in text.splitlines() if not _MARKUP.match(ln)]
    body = "\n".join(lines)
    parts = (_SENT_CJK if lang in ("zh", "ja") else _SENT_LATIN).split(body)
    out = []
    for p in parts:
        p = " ".join(p.split()) if lang not in ("zh", "ja") else p.strip()
        if len(units(p)) >= 4:
            out.append(p)
    return out


@dataclass
class Doc:
    """One piece of text with who may hold it: a tenant (private) or nobody in particular (public)."""

    text: str
    lang: str  # en, de, ja, zh, code
    kind: str  # catalog, readme, docstring, news, review, quote, code, vendored, licence
    source: str
    owner: str | None = None  # tenant id for private material
    # catalogs: (English msgid, {lang: translation}) in file order
    entries: list[tuple[str, dict[str, str]]] = field(default_factory=list)


Entries = list[tuple[str, dict[str, str]]]


def catalog_blocks(public: bool, size: int) -> list[tuple[str, Entries]]:
    """Consecutive entries of one catalog component (file order), `size` a block: (source, entries).

    Public: the documentation-like catalogs everybody can read (Django, Sphinx, Trac's trac.ini manual);
    the others (Wagtail, allauth, JupyterLab, Trac's UI) are dealt out as tenants' own product strings.
    """
    out = []
    for cat in corpus()["catalogs"]:
        is_public = cat["source"] in ("django", "sphinx") or "tracini" in cat["component"]
        if is_public != public:
            continue
        rows = [(m, tr) for m, tr in cat["entries"] if len(units(m)) >= 3]
        for i in range(0, len(rows) - 2, size):
            out.append((f"{cat['source']}:{cat['component']}", [(m, dict(tr)) for m, tr in rows[i : i + size]]))
    return out


def block_doc(source: str, entries: Entries, lang: str, owner: str | None = None) -> Doc | None:
    """A block as its owner holds it: the English strings, or their translations into `lang`."""
    keep = [(m, tr) for m, tr in entries if lang == "en" or lang in tr]
    if len(keep) < 3:
        return None
    text = "\n".join(m if lang == "en" else tr[lang] for m, tr in keep)
    return Doc(text, lang, "catalog", source, owner, keep)


def licence_texts() -> list[Doc]:
    return [Doc(x["text"], "en", "licence", f"licence:{x['id']}") for x in corpus()["licences"]]

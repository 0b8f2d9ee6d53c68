"""Build `data/texts.json.xz`, the only text the blind-v4 profile generates from.

Not imported at generation time: it runs once, by hand, on the author's machine. Exact commands (root on the
project's Debian 12 machine; every source comes from a registry through its ordinary client):

    mkdir -p /tmp/b4src && cd /tmp/b4src
    apt-get update && apt-get download coreutils=9.1-1 wget=1.21.3-1+deb12u1
    mkdir cu wg && dpkg-deb -x coreutils_9.1-1_amd64.deb cu && dpkg-deb -x wget_1.21.3-1+deb12u1_amd64.deb wg
    GOPATH=/tmp/b4src/gopath go mod download -json github.com/spf13/cobra@v1.8.1
    mkdir -p npmp/x && (cd npmp && npm pack commander@12.1.0) && tar xzf npmp/commander-12.1.0.tgz -C npmp/x
    /work/main/.venv/bin/pip install pycountry==26.2.16
    /work/main/.venv/bin/python -m streams.sim.blind4.build_data /tmp/b4src

What it keeps (README.md, "Data sources"): sentences of the coreutils catalogues (English msgids and nine
translations) as the tenants' own private material; message pairs of the wget catalogues as the "public manual"
several tenants paste, in English and translated; ISO 3166-2 subdivision names and translated country names from
pycountry (iso-codes) as entities and shared reference lists; functions of cobra (Go) and commander (JavaScript).
"""

from __future__ import annotations

import json
import lzma
import re
import struct
import sys
from pathlib import Path

LANGS = ("it", "nl", "sv", "fi", "cs", "hu", "et", "hr")
COUNTRY = {"it": "IT", "nl": "NL", "sv": "SE", "fi": "FI", "cs": "CZ", "hu": "HU", "et": "EE", "hr": "HR"}
COUNTRY["en"] = "IE"
PRIVATE_PER_LANG = 520
PUBLIC_PAIRS = 150
OUT = Path(__file__).parent / "data" / "texts.json.xz"

_OPTION = re.compile(r"^\s*(?:-\w(?:,\s*|\s+))?(?:--?[\w-]+(?:\[?=[\w\[\].-]+\]?)?,?\s*)+\s{2,}")
_JUNK = re.compile(r"\s{2,}|[%`\\\\|<>=*]|--|^[-(]")
_SENT = re.compile(r"(?<=[.!?;:])\s+")


def read_mo(path: Path) -> dict[str, str]:
    """msgid -> msgstr of a GNU .mo file, decoded with the catalogue's own charset."""
    data = path.read_bytes()
    magic = struct.unpack("<I", data[:4])[0]
    end = "<" if magic == 0x950412DE else ">"
    _, n, off_o, off_t = struct.unpack(end + "4I", data[4:20])
    pairs = []
    for i in range(n):
        ln, lo = struct.unpack(end + "2I", data[off_o + 8 * i : off_o + 8 * i + 8])
        tn, to = struct.unpack(end + "2I", data[off_t + 8 * i : off_t + 8 * i + 8])
        pairs.append((data[lo : lo + ln], data[to : to + tn]))
    header = dict(pairs).get(b"", b"").decode("ascii", "replace")
    m = re.search(r"charset=([\w-]+)", header)
    cs = m.group(1) if m else "utf-8"
    out = {}
    for k, v in pairs:
        if k and v:
            out[k.split(b"\0")[0].decode(cs, "replace")] = v.split(b"\0")[0].decode(cs, "replace")
    return out


def sentences(text: str) -> list[str]:
    """The prose of a help message: option syntax stripped, lines joined, cut into sentences of 5..45 words."""
    lines = [_OPTION.sub("", ln).strip() for ln in text.splitlines()]
    prose = " ".join(ln for ln in lines if ln)
    out = []
    for s in _SENT.split(prose):
        s = s.strip()
        words = s.split()
        shouty = sum(len(w) > 2 and w.isupper() for w in words)
        if 5 <= len(words) <= 45 and shouty < 2 and not _JUNK.search(s):
            out.append(s)
    return out


def catalogue(mo_dir: Path, pkg: str, lang: str) -> dict[str, str]:
    path = mo_dir / "usr/share/locale" / lang / "LC_MESSAGES" / f"{pkg}.mo"
    return read_mo(path) if path.exists() else {}


def go_functions(root: Path) -> list[str]:
    out = []
    for f in sorted(root.glob("*.go")):
        if f.name.endswith("_test.go"):
            continue
        for m in re.finditer(r"^func [^\n]*\{\n.*?^\}\n", f.read_text(), re.M | re.S):
            body = m.group(0)
            if 6 <= body.count("\n") <= 40:
                out.append(body)
    return out


def js_functions(root: Path) -> list[str]:
    out = []
    for f in sorted(root.glob("*.js")):
        for m in re.finditer(r"^  (?:/\*\*.*?\*/\n  )?\w+\([^)]*\) \{\n.*?^  \}\n", f.read_text(), re.M | re.S):
            body = m.group(0)
            if 6 <= body.count("\n") <= 40:
                out.append(body)
    return out


def build(src: Path) -> dict[str, object]:
    import pycountry  # a build-time source only

    cu, wg = src / "cu", src / "wg"
    private: dict[str, list[str]] = {}
    en_private: list[str] = []
    seen: set[str] = set()
    for lang in LANGS:
        cat = catalogue(cu, "coreutils", lang)
        got: list[str] = []
        for msgid in sorted(cat):
            for s in sentences(cat[msgid]):
                if s not in seen:
                    seen.add(s)
                    got.append(s)
        private[lang] = got[:: max(1, len(got) // PRIVATE_PER_LANG)][:PRIVATE_PER_LANG]
    # English: msgids of the coreutils catalogue (Swedish has the most)
    for msgid in sorted(catalogue(cu, "coreutils", "sv")):
        for s in sentences(msgid):
            if s not in seen:
                seen.add(s)
                en_private.append(s)
    private["en"] = en_private[:: max(1, len(en_private) // PRIVATE_PER_LANG)][:PRIVATE_PER_LANG]
    # Public manual: wget messages translated into every language (sentence-aligned only when counts agree).
    cats = {lang: catalogue(wg, "wget", lang) for lang in LANGS}
    public: list[dict[str, str]] = []
    for msgid in sorted(set.intersection(*(set(c) for c in cats.values()))):
        en = sentences(msgid)
        if len(en) != 1 or en[0] in seen:
            continue
        row = {"en": en[0]}
        for lang, c in cats.items():
            tr = sentences(c[msgid])
            if len(tr) == 1:
                row[lang] = tr[0]
        if len(row) >= 6:
            public.append(row)
    public = public[:PUBLIC_PAIRS]
    places: dict[str, list[str]] = {}
    countries: dict[str, list[str]] = {}
    for lang, cc in COUNTRY.items():
        places[lang] = sorted({s.name for s in pycountry.subdivisions.get(country_code=cc) or []})[:80]
        if lang == "en":
            countries[lang] = sorted(c.name for c in pycountry.countries)[:120]
            continue
        import gettext

        tr = gettext.translation("iso3166-1", pycountry.LOCALES_DIR, languages=[lang], fallback=True)
        countries[lang] = sorted(tr.gettext(c.name) for c in pycountry.countries)[:120]
    cobra = next((src / "gopath/pkg/mod/github.com/spf13").glob("cobra@v1.8.1"))
    code = {"go": go_functions(cobra), "js": js_functions(src / "npmp/x/package/lib")}
    return {"private": private, "public": public, "places": places, "countries": countries, "code": code}


def main() -> None:
    data = build(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/b4src"))
    raw = json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_bytes(lzma.compress(raw, preset=9 | lzma.PRESET_EXTREME))
    sizes = {k: len(v) for k, v in data["private"].items()}  # type: ignore[attr-defined]
    print(f"{OUT}: {OUT.stat().st_size} bytes xz, {len(raw)} raw; private {sizes}")
    print("public", len(data["public"]), "code", {k: len(v) for k, v in data["code"].items()})  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()

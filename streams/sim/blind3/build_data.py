"""Build the vendored text of blind-v3 (`data/*.json.xz`) from packages fetched with the registries' own clients.

Run once by the profile's author; the generator reads only the files this writes (no network). Inputs, fetched into
SRC (e.g. /tmp/b3dl) with these exact commands::

    pip download --no-deps -d SRC chatterbot-corpus==1.3.3 faker==40.54.0 django==5.2.8
    (cd SRC && mkdir cb fk dj && (cd cb && unzip -q ../chatterbot_corpus-1.3.3-py2.py3-none-any.whl)
        && (cd fk && unzip -q ../faker-40.54.0-py3-none-any.whl)
        && (cd dj && unzip -q ../django-5.2.8-py3-none-any.whl 'django/conf/locale/*/LC_MESSAGES/django.po'
            'django/contrib/admin/locale/*/LC_MESSAGES/django.po'
            'django/contrib/auth/locale/*/LC_MESSAGES/django.po'))
    # a scratch cargo project whose [dependencies] pin semver =1.0.26, smallvec =1.13.2, hex =0.4.3,
    # itoa =1.0.15, humantime =2.2.0, then:
    CARGO_HOME=SRC/cargohome cargo fetch

and then ``python -m streams.sim.blind3.build_data SRC``.

Licences: chatterbot-corpus BSD-3-Clause; Faker MIT (only its locale data is used, through Faker itself, seeded);
Django BSD-3-Clause (its translation catalogues); the crates MIT OR Apache-2.0.
"""

from __future__ import annotations

import lzma
import re
import sys
from pathlib import Path
from typing import Any

import orjson

DATA = Path(__file__).with_name("data")
CRATES = ("semver-1.0.26", "smallvec-1.13.2", "hex-0.4.3", "itoa-1.0.15", "humantime-2.2.0")
FAKER_LOCALES = {
    "de": "de_DE",
    "pl": "pl_PL",
    "tr": "tr_TR",
    "uk": "uk_UA",
    "vi": "vi_VN",
    "id": "id_ID",
    "hi": "hi_IN",
    "ar": "ar_SA",
    "he": "he_IL",
    "th": "th_TH",
    "en": "en_US",
}
DIALOG_DIRS = {
    "de": "german",
    "tr": "turkish",
    "uk": "ukrainian",
    "hi": "hindi",
    "id": "indonesian",
    "he": "hebrew",
    "th": "thai",
    "en": "english",
}
DJANGO_LANGS = ("de", "pl", "tr", "uk", "vi", "id", "hi", "ar", "he", "th")


def _write(name: str, obj: Any) -> None:
    raw = orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
    (DATA / name).write_bytes(lzma.compress(raw, preset=9 | lzma.PRESET_EXTREME))


def _entities(src: Path) -> dict[str, dict[str, list[str]]]:
    sys.path.insert(0, str(src / "fk"))
    from faker import Faker

    out: dict[str, dict[str, list[str]]] = {}
    for lang, loc in FAKER_LOCALES.items():
        f = Faker(loc)
        f.seed_instance(20260)

        def many(fn: Any, n: int) -> list[str]:
            return sorted({str(fn()).replace("\n", ", ") for _ in range(n)})

        out[lang] = {
            "name": many(f.name, 260),
            "address": many(f.address, 160),
            "company": many(f.company, 80),
            "phone": many(f.phone_number, 120),
            "iban": many(f.iban, 80),
            "job": many(f.job, 60),
            "city": many(f.city, 80),
            "email": many(f.email, 120),
        }
    return out


def _dialogs(src: Path) -> dict[str, list[list[str]]]:
    import yaml  # type: ignore[import-untyped]

    base = src / "cb" / "chatterbot_corpus" / "data"
    out: dict[str, list[list[str]]] = {}
    for lang, folder in DIALOG_DIRS.items():
        convs: list[list[str]] = []
        for path in sorted((base / folder).glob("*.yml")):
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
            for conv in doc.get("conversations") or []:
                lines = [str(x).strip() for x in conv if isinstance(x, (str, int, float)) and str(x).strip()]
                if len(lines) >= 2:
                    convs.append(lines)
        out[lang] = convs[:400]
    return out


_PO = re.compile(r'^msgid "(.*)"\nmsgstr "(.*)"$', re.M)


def _ui_strings(src: Path) -> dict[str, list[list[str]]]:
    out: dict[str, list[list[str]]] = {}
    for lang in DJANGO_LANGS:
        pairs: dict[str, str] = {}
        for po in sorted((src / "dj" / "django").glob(f"**/locale/{lang}/LC_MESSAGES/django.po")):
            for msgid, msgstr in _PO.findall(po.read_text(encoding="utf-8")):
                if len(msgid) >= 24 and msgstr and "%" not in msgid and "{" not in msgid:
                    pairs.setdefault(msgid.replace('\\"', '"'), msgstr.replace('\\"', '"'))
        out[lang] = [[k, v] for k, v in sorted(pairs.items())][:260]
    return out


def _code(src: Path) -> dict[str, list[list[str]]]:
    reg = next((src / "cargohome" / "registry" / "src").iterdir())
    out: dict[str, list[list[str]]] = {}
    for crate in CRATES:
        root = reg / crate
        files = sorted(p for p in root.glob("src/**/*.rs") if p.stat().st_size < 60_000)
        out[crate] = [[str(p.relative_to(root)), p.read_text(encoding="utf-8")] for p in files]
        out[crate].append(["README.md", (root / "README.md").read_text(encoding="utf-8")])
    return out


def main(argv: list[str]) -> int:
    src = Path(argv[0])
    DATA.mkdir(exist_ok=True)
    _write("entities.json.xz", _entities(src))
    _write("dialogs.json.xz", _dialogs(src))
    _write("ui_strings.json.xz", _ui_strings(src))
    _write("code.json.xz", _code(src))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""Benchmark 2: keyed winnowing (`Fingerprinter.fingerprint_text`, scheme winnow-v2) in every script and size.

Baselines, measured in the same run on the same texts:
* the ASCII rate: fingerprinting non-ASCII text (Chinese, Japanese, Thai, German, Russian, mixed
  Chinese/English) should reach >= 50 % of the MB/s on ASCII text of the same size class (issue 10);
* `words_of` (tokenising alone): fingerprinting should reach >= 60 % of its rate per size class and
  >= 50 % at 300 bytes (issue 16); texts/s is reported beside MB/s, since short texts pay a fixed cost.
Also, in the same run: the pure numpy path (`Fingerprinter(..., native=False)`, what runs without the
optional C extension `detectors/_winnow.c`), the cold-cache rate (every distinct unit hashed with blake2b
once), and the last winnow-v1 fingerprinter (loaded from git) on the ASCII texts, which must give
identical fingerprints: winnow-v2 changes nothing for ASCII text.

Session: 30 turns re-sending a history that grows to ~200k tokens (154k words), every turn in full
against `detectors.session_prints.SessionPrints` (issue 16, target >= 10x less work, same fingerprints).

Texts: the simulator's ASCII prompts and outputs (code, prose, system prompts) and Faker's locales
(zh_CN, ja_JP, th_TH, de_DE, ru_RU; mixed = Chinese with English words), cut to 300 B, 2 KB and 20 KB.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as c

from detectors.fingerprint import NATIVE, Fingerprinter, words_of
from detectors.session_prints import SessionPrints
from detectors.settings import DetectionSettings

NAME = "bench_fingerprint"
V1_REV = "d457451~1"  # the last commit with winnow-v1 fingerprints
SIZES = (300, 2_000, 20_000)
LOCALES = {"zh": "zh_CN", "ja": "ja_JP", "th": "th_TH", "de": "de_DE", "ru": "ru_RU"}
KEY = "bench-key"
# The production parameters (detectors.settings defaults), so the figures are those a deployment pays.
K: int = DetectionSettings.model_fields["k"].default
W: int = DetectionSettings.model_fields["w"].default


def best_cpu(fn, repeat: int) -> tuple[float, None]:
    """Smallest CPU time of `repeat` runs. This work is single-threaded, and on a shared machine CPU time
    measures it much more steadily than wall time (which the other processes' load inflates)."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best, None


def v1_fingerprinter(args) -> type | None:
    try:
        src = subprocess.run(
            ["git", "-C", str(c.ROOT), "show", f"{V1_REV}:detectors/fingerprint.py"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        c.log(args, "winnow-v1 fingerprinter not available from git; skipping that check")
        return None
    # The v1 module imported TextFingerprint by its old name from its old home (issue 12 renamed and moved it).
    src = src.replace("from detectors.exchange import TextPrint", "from schemas.exchange import TextFingerprint")
    src = src.replace("TextPrint", "TextFingerprint")
    # ...and built it as the pydantic model it was then; it is a plain dataclass now (ADR 0013).
    src = src.replace("TextFingerprint.model_construct(", "TextFingerprint(")
    mod = types.ModuleType("fingerprint_v1")
    exec(compile(src, "fingerprint_v1.py", "exec"), mod.__dict__)
    return mod.Fingerprinter


def ascii_stream(args) -> str:
    parts: list[str] = []
    total = 0
    for ev in c.sim_events(args.seed, 1e7, 4.0):
        for f in c.TEXT_FIELDS:
            t = ev.get(f)
            if t and t.isascii():
                parts.append(t)
                total += len(t)
        if total >= 3 * c.MB:
            break
    return "\n".join(parts)


def locale_stream(locale: str, seed: int, nbytes: int) -> str:
    import faker

    f = faker.Faker(locale)
    f.seed_instance(seed)
    parts: list[str] = []
    total = 0
    while total < nbytes:
        t = f.text(400)
        parts.append(t)
        total += len(t.encode())
    return "\n".join(parts)


def mixed_stream(seed: int, nbytes: int) -> str:
    """Chinese sentences with English words and numbers in them, as in technical chat."""
    import faker

    zh, en = faker.Faker("zh_CN"), faker.Faker("en_US")
    zh.seed_instance(seed)
    en.seed_instance(seed)
    parts: list[str] = []
    total = 0
    while total < nbytes:
        t = f"{zh.sentence()}{en.word()} {en.word()}{zh.sentence()}{en.random_int(1, 9999)}{zh.sentence()}"
        parts.append(t)
        total += len(t.encode())
    return "".join(parts)


def cut(stream: str, size: int, count: int) -> list[str]:
    """`count` texts of about `size` UTF-8 bytes, taken at successive offsets of the stream (cut anywhere,
    a partial character at the end dropped)."""
    raw = stream.encode()
    step = max(1, (len(raw) - size) // max(count, 1))
    return [raw[i * step : i * step + size].decode("utf-8", "ignore") for i in range(count)]


def session_run(stream: str, turns: int, history_words: int, repeat: int) -> dict[str, float]:
    """A session re-sending its growing history (issue 16): every turn fingerprinted in full, against
    SessionPrints reusing the previous turn. Same fingerprints required; CPU time of all turns."""
    words = stream.split()
    while len(words) < history_words:
        words = words + words
    step = history_words // turns
    texts = [" ".join(words[: step * (i + 1)]) + "\n" for i in range(turns)]
    fp = Fingerprinter(KEY, K, W)
    for t in texts:
        fp.fingerprint_text(t)  # warm unit cache for both runs
    t_full, _ = best_cpu(lambda: [fp.fingerprint_text(t) for t in texts] and None, repeat)
    sp = SessionPrints(fp)

    def incremental() -> None:
        sp._states.clear()
        sp._prints = 0
        for t in texts:
            sp.fingerprint_text("session", t)

    t_inc, _ = best_cpu(incremental, repeat)
    sp._states.clear()
    sp._prints = 0
    assert all(sp.fingerprint_text("session", t) == fp.fingerprint_text(t) for t in texts), "session prints differ"
    units_full = sum(len(words_of(t)) for t in texts)
    return {
        "units_fingerprinted_full": units_full,
        "units_fingerprinted_incremental": len(words_of(texts[-1])),
        "turns": turns,
        "history_bytes": len(texts[-1].encode()),
        "history_units": len(words_of(texts[-1])),
        "full_s": t_full,
        "incremental_s": t_inc,
        "state_fingerprints": sp.state_size(),
        # The membership set beside the list (C hash set, or a sorted array without the extension).
        "state_set_bytes": sum(st.seen.nbytes for st in sp._states.values()),
    }


def main(argv: list[str] | None = None) -> int:
    args = c.parser(__doc__.splitlines()[0]).parse_args(argv)
    cell_bytes = c.pick(args, full=4 * c.MB, quick=c.MB, tiny=20_000)
    repeat = c.pick(args, full=5, quick=3, tiny=1)
    streams = {"ascii": ascii_stream(args)}
    for name, loc in LOCALES.items():
        streams[name] = locale_stream(loc, args.seed, 3 * c.MB if not args.tiny else 60_000)
    streams["mixed"] = mixed_stream(args.seed, 3 * c.MB if not args.tiny else 60_000)
    c.log(args, f"{len(streams)} scripts x {len(SIZES)} sizes, ~{cell_bytes / c.MB:.2f} MB each; best of {repeat}")

    warm = Fingerprinter(KEY, K, W)
    pure = Fingerprinter(KEY, K, W, native=False)
    built = "built, measured" if warm.native else "NOT BUILT: pure path only"
    c.log(args, f"native loop (detectors/_winnow.c): {built}")
    rows: list[dict] = []
    cells: dict[tuple[str, int], dict[str, float]] = {}
    prog = c.Progress("measuring", len(streams) * len(SIZES), not args.no_progress)
    for size in SIZES:
        for name, stream in streams.items():
            texts = cut(stream, size, max(10, cell_bytes // size))
            nbytes = sum(len(t.encode()) for t in texts)
            nunits = sum(len(words_of(t)) for t in texts)
            for t in texts:  # warm the unit caches
                warm.fingerprint_text(t)
                pure.fingerprint_text(t)
            t_fp, _ = best_cpu(lambda texts=texts: [warm.fingerprint_text(t) for t in texts] and None, repeat)
            t_tok, _ = best_cpu(lambda texts=texts: [words_of(t) for t in texts] and None, repeat)
            t_pure, _ = best_cpu(lambda texts=texts: [pure.fingerprint_text(t) for t in texts] and None, repeat)
            cell = {
                "fp_mb_s": nbytes / t_fp / c.MB,
                "fp_texts_s": len(texts) / t_fp,
                "pure_mb_s": nbytes / t_pure / c.MB,
                "words_of_mb_s": nbytes / t_tok / c.MB,
                "words_of_texts_s": len(texts) / t_tok,
                "ns_per_unit": 1e9 * t_fp / max(nunits, 1),
            }
            cells[(name, size)] = cell
            prog.update(len(cells))
    prog.done()
    for size in SIZES:
        base = cells[("ascii", size)]["fp_mb_s"]
        for name in streams:
            cell = cells[(name, size)]
            cell["of_ascii"] = cell["fp_mb_s"] / base
            cell["of_words_of"] = cell["fp_mb_s"] / cell["words_of_mb_s"]
            rows.append(
                {
                    "size": f"{size:,} B",
                    "script": name,
                    "fingerprint MB/s": cell["fp_mb_s"],
                    "texts/s": cell["fp_texts_s"],
                    "ns/unit": cell["ns_per_unit"],
                    "words_of MB/s": cell["words_of_mb_s"],
                    "words_of texts/s": cell["words_of_texts_s"],
                    "of words_of": f"{cell['of_words_of']:.0%}",
                    "pure path MB/s": cell["pure_mb_s"],
                    "of ASCII": f"{cell['of_ascii']:.0%}",
                }
            )

    # Cold cache and the winnow-v1 check, on the 2 KB ASCII texts.
    ascii_texts = cut(streams["ascii"], 2_000, max(10, cell_bytes // 2_000))
    abytes = sum(len(t.encode()) for t in ascii_texts)

    def cold_pass() -> None:
        fresh = Fingerprinter(KEY, K, W)  # an empty unit cache: every distinct unit hashed once
        for t in ascii_texts:
            fresh.fingerprint_text(t)

    t_cold, _ = best_cpu(cold_pass, repeat)
    v1_cls = v1_fingerprinter(args)
    v1_same = None
    if v1_cls is not None:
        v1 = v1_cls(KEY, K, W)
        v1_same = all(v1.print_text(t) == warm.fingerprint_text(t) for t in ascii_texts)
        assert v1_same, "winnow-v2 changed the fingerprints of ASCII text"

    # 30 turns to a history of ~200k model tokens (~154k English words at ~1.3 tokens a word).
    sess = session_run(streams["ascii"], 30, c.pick(args, full=154_000, quick=154_000, tiny=5_000), repeat)
    non_ascii = [n for n in streams if n != "ascii"]
    worst_of_ascii = {s: min(cells[(n, s)]["of_ascii"] for n in non_ascii) for s in SIZES}
    worst_of_words = {s: min(cells[(n, s)]["of_words_of"] for n in streams) for s in SIZES}
    targets = {
        f"non-ASCII >= 50% of ASCII MB/s, {s:,} B (worst script)": c.target(worst_of_ascii[s], 0.5) for s in SIZES
    }
    targets.update(
        {f"fingerprint >= 60% of words_of, {s:,} B (worst script)": c.target(worst_of_words[s], 0.6) for s in SIZES}
    )
    targets["fingerprint >= 50% of words_of at 300 B (worst script)"] = c.target(worst_of_words[300], 0.5)
    targets["30-turn session: fingerprinting work >= 10x less than full passes (CPU time)"] = c.target(
        sess["full_s"] / sess["incremental_s"], 10, unit="x"
    )
    targets["30-turn session: units fingerprinted >= 10x fewer"] = c.target(
        sess["units_fingerprinted_full"] / sess["units_fingerprinted_incremental"], 10, unit="x"
    )
    targets["cold cache >= 30 MB/s (2 KB ASCII)"] = c.target(abytes / t_cold / c.MB, 30, unit=" MB/s")
    tables = {
        f"warm cache, one core (CPU time); native loop {'built' if NATIVE else 'NOT built'}": c.table(rows),
        "cold cache": f"2 KB ASCII texts, a new Fingerprinter per pass: {abytes / t_cold / c.MB:.1f} MB/s"
        + ("" if v1_same is None else f"\nwinnow-v1 ({V1_REV}) gives the same fingerprints on ASCII: {v1_same}"),
        "session re-sending its history": (
            f"{sess['turns']} turns to {sess['history_bytes'] / c.MB:.2f} MB ({sess['history_units']:,} units): "
            f"every turn in full {sess['full_s']:.3f} s, SessionPrints {sess['incremental_s']:.3f} s "
            f"({sess['full_s'] / sess['incremental_s']:.1f}x less CPU time; units fingerprinted "
            f"{sess['units_fingerprinted_full'] / sess['units_fingerprinted_incremental']:.1f}x fewer; per turn the "
            f"re-sent history is still read once by the keyed digest that checks it), same fingerprints; "
            f"state {sess['state_fingerprints']:,} fingerprints (~56 B each in the shared list, "
            f"+ {sess['state_set_bytes'] / max(sess['state_fingerprints'], 1):.0f} B each in the membership set)"
        ),
    }
    path = c.write(
        NAME,
        args,
        params={"k": K, "w": W, "repeat": repeat, "cell_bytes": cell_bytes, "sizes": list(SIZES), "native": NATIVE},
        figures={**{f"{n}_{s}": cells[(n, s)] for n, s in cells}, "session": sess},
        baseline={f"ascii_{s}_fp_mb_s": cells[("ascii", s)]["fp_mb_s"] for s in SIZES},
        ratio={
            **{f"worst_non_ascii_over_ascii_{s}": worst_of_ascii[s] for s in SIZES},
            **{f"worst_over_words_of_{s}": worst_of_words[s] for s in SIZES},
            "session_full_over_incremental": sess["full_s"] / sess["incremental_s"],
            "session_units_full_over_incremental": sess["units_fingerprinted_full"]
            / sess["units_fingerprinted_incremental"],
        },
        targets=targets,
        tables=tables,
    )
    c.report("keyed winnowing throughput by script and size", tables, targets, path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

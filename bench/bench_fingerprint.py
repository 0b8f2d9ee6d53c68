"""Benchmark 2: MB/s of prompt/output text through keyed winnowing (`Fingerprinter.fingerprint_text`).

Baseline: tokenising the same text alone (`words_of`, the tokeniser the fingerprints are made of).
Targets: >= 60 % of the baseline rate, and >= 30 MB/s on one core. Cold (empty word-hash cache) and
warm (every word seen before) are measured separately. Also measured in the same run, for reference:
the previous tokeniser (`re.findall(r"\\w+", text.lower())`), the previous fingerprinter (the module
as of the commit before the hot-path rewrite, loaded from git if available), and a Unicode-heavy
variant of the texts (non-ASCII words take the exact, slower regex path). Stage rows (cumulative):
`text_hashes` (tokenise + word-hash table lookup, fingerprint_text's first half), + k-gram hashes; and
`words_of` + `word_hashes(words)`, the path of callers that need the words too (`print_words`).

Texts: the prompts and outputs of a simulated run (real Python source, prose, system prompts).
"""

from __future__ import annotations

import re
import subprocess
import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as c

from detectors.fingerprint import Fingerprinter, words_of

NAME = "bench_fingerprint"
PREVIOUS_REV = "5a40571~1"  # the fingerprinter before the hot-path rewrite (same hashes, slower)
_LEGACY_WORD = re.compile(r"\w+")
_UNICODE_WORDS = ("naïve", "café", "Straße", "Σίσυφος", "ΟΔΟΣ", "日本語", "zürich", "İstanbul", "—", "“quoted”")


def legacy_words(text: str) -> list[str]:
    return _LEGACY_WORD.findall(text.lower())


def previous_fingerprinter(args) -> type | None:
    try:
        src = subprocess.run(
            ["git", "-C", str(c.ROOT), "show", f"{PREVIOUS_REV}:detectors/fingerprint.py"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        c.log(args, "previous fingerprinter not available from git; skipping that reference")
        return None
    mod = types.ModuleType("fingerprint_previous")
    exec(compile(src, "fingerprint_previous.py", "exec"), mod.__dict__)
    return mod.Fingerprinter


def collect_texts(args, target_bytes: int) -> list[str]:
    texts: list[str] = []
    total = 0
    prog = c.Progress("collecting texts", target_bytes / c.MB, not args.no_progress, " MB")
    for ev in c.sim_events(args.seed, 1e7, 4.0):
        for f in c.TEXT_FIELDS:
            t = ev.get(f)
            if t:
                texts.append(t)
                total += len(t.encode())
        prog.update(total / c.MB)
        if total >= target_bytes:
            break
    prog.done()
    return texts


def unicode_variant(texts: list[str]) -> list[str]:
    """The same texts with a non-ASCII word about every 60 characters (e.g. comments in other languages)."""
    out = []
    for i, t in enumerate(texts):
        parts = t.split(" ")
        for j in range(0, len(parts), 10):
            parts[j] = parts[j] + " " + _UNICODE_WORDS[(i + j) % len(_UNICODE_WORDS)]
        out.append(" ".join(parts))
    return out


def main(argv: list[str] | None = None) -> int:
    args = c.parser(__doc__.splitlines()[0]).parse_args(argv)
    target_mb = c.pick(args, full=100, quick=20, tiny=0.5)
    repeat = c.pick(args, full=3, quick=2, tiny=1)
    texts = collect_texts(args, int(target_mb * c.MB))
    nbytes = sum(len(t.encode()) for t in texts)
    nwords = sum(len(words_of(t)) for t in texts)
    c.log(args, f"{len(texts):,} texts, {nbytes / c.MB:.1f} MB, {nwords:,} words; best of {repeat}")
    key, k, w = "bench-key", 5, 12

    def over(fn) -> None:
        for t in texts:
            fn(t)

    def mbps(seconds: float, size: int = nbytes) -> float:
        return size / seconds / c.MB

    t_tok, _ = c.best_of(lambda: over(words_of), repeat)
    t_legacy, _ = c.best_of(lambda: over(legacy_words), repeat)

    # Cold: a new Fingerprinter each run, so every distinct word is hashed (blake2b) once.
    t_cold, _ = c.best_of(lambda: over(Fingerprinter(key, k, w).fingerprint_text), repeat)
    warm = Fingerprinter(key, k, w)
    over(warm.fingerprint_text)
    t_warm, _ = c.best_of(lambda: over(warm.fingerprint_text), repeat)
    vocab = warm.cached_units

    # Stages of the warm path (cumulative), to show where the time goes.
    def upto_hashes(t: str) -> None:
        warm.text_hashes(t)

    def upto_kgrams(t: str) -> None:
        warm.kgram_hashes(warm.text_hashes(t))

    def words_then_hashes(t: str) -> None:
        warm.word_hashes(words_of(t))

    t_wh, _ = c.best_of(lambda: over(upto_hashes), repeat)
    t_kg, _ = c.best_of(lambda: over(upto_kgrams), repeat)
    # print_words' path (callers that need the words too): words_of, then the hashes of the word list.
    t_wlist, _ = c.best_of(lambda: over(words_then_hashes), repeat)

    prev_cls = previous_fingerprinter(args)
    t_prev = None
    if prev_cls is not None:
        prev = prev_cls(key, k, w)
        over(prev.print_text)
        t_prev, _ = c.best_of(lambda: over(prev.print_text), repeat)
        sample = texts[:: max(1, len(texts) // 200)]
        assert all(prev.print_text(t) == warm.fingerprint_text(t) for t in sample), "fingerprints changed!"

    utexts = unicode_variant(texts)
    ubytes = sum(len(t.encode()) for t in utexts)
    t_utok, _ = c.best_of(lambda: [words_of(t) for t in utexts] and None, repeat)
    over(warm.fingerprint_text)
    t_uwarm, _ = c.best_of(lambda: [warm.fingerprint_text(t) for t in utexts] and None, repeat)

    rows = [
        {
            "what": "baseline: words_of (tokenise)",
            "seconds": t_tok,
            "MB/s": mbps(t_tok),
            "ns/word": 1e9 * t_tok / nwords,
        },
        {
            "what": "ref: re.findall(\\w+, lower)",
            "seconds": t_legacy,
            "MB/s": mbps(t_legacy),
            "ns/word": 1e9 * t_legacy / nwords,
        },
        {"what": "print_text, cold cache", "seconds": t_cold, "MB/s": mbps(t_cold), "ns/word": 1e9 * t_cold / nwords},
        {"what": "print_text, warm cache", "seconds": t_warm, "MB/s": mbps(t_warm), "ns/word": 1e9 * t_warm / nwords},
        {
            "what": "  stage: tokenise + word hashes",
            "seconds": t_wh,
            "MB/s": mbps(t_wh),
            "ns/word": 1e9 * t_wh / nwords,
        },
        {"what": "  stage: + k-gram hashes", "seconds": t_kg, "MB/s": mbps(t_kg), "ns/word": 1e9 * t_kg / nwords},
        {
            "what": "ref: words_of + word_hashes(words)",
            "seconds": t_wlist,
            "MB/s": mbps(t_wlist),
            "ns/word": 1e9 * t_wlist / nwords,
        },
    ]
    if t_prev is not None:
        rows.append(
            {
                "what": f"ref: previous print_text ({PREVIOUS_REV}), warm",
                "seconds": t_prev,
                "MB/s": mbps(t_prev),
                "ns/word": 1e9 * t_prev / nwords,
            }
        )
    urows = [
        {"what": "unicode texts: words_of", "seconds": t_utok, "MB/s": mbps(t_utok, ubytes)},
        {"what": "unicode texts: print_text, warm", "seconds": t_uwarm, "MB/s": mbps(t_uwarm, ubytes)},
    ]
    ratio_warm = t_tok / t_warm
    ratio_cold = t_tok / t_cold
    summary = (
        f"print_text / words_of: warm {ratio_warm:.1%}, cold {ratio_cold:.1%}\n"
        f"print_text (warm) / previous tokeniser re.findall: {t_legacy / t_warm:.1%}"
        + (f"\nprint_text now / before: {t_prev / t_warm:.2f}x" if t_prev else "")
    )
    tables = {
        "one core, simulator texts": c.table(rows) + "\n\n" + summary,
        "unicode-heavy variant (a non-ASCII word every ~10 words)": c.table(urows) + f"\nratio {t_utok / t_uwarm:.1%}",
    }
    targets = {
        "print_text (warm) >= 60% of words_of": c.target(ratio_warm, 0.6),
        "print_text (warm) >= 30 MB/s": c.target(mbps(t_warm), 30, unit=" MB/s"),
        "print_text (cold) >= 30 MB/s": c.target(mbps(t_cold), 30, unit=" MB/s"),
    }
    path = c.write(
        NAME,
        args,
        params={
            "texts": len(texts),
            "bytes": nbytes,
            "words": nwords,
            "k": k,
            "w": w,
            "repeat": repeat,
            "distinct_words": vocab,
            "unicode_bytes": ubytes,
        },
        figures={
            "print_text_warm_mb_s": mbps(t_warm),
            "print_text_cold_mb_s": mbps(t_cold),
            "tokenise_plus_hash_lookup_mb_s": mbps(t_wh),
            "tokenise_plus_kgrams_mb_s": mbps(t_kg),
            "words_of_plus_word_hashes_mb_s": mbps(t_wlist),
            "unicode_print_text_warm_mb_s": mbps(t_uwarm, ubytes),
            "previous_print_text_warm_mb_s": mbps(t_prev) if t_prev else None,
        },
        baseline={
            "words_of_mb_s": mbps(t_tok),
            "legacy_regex_tokeniser_mb_s": mbps(t_legacy),
            "unicode_words_of_mb_s": mbps(t_utok, ubytes),
        },
        ratio={
            "warm_over_words_of": ratio_warm,
            "cold_over_words_of": ratio_cold,
            "warm_over_legacy_regex_tokeniser": t_legacy / t_warm,
            "speedup_over_previous_print_text": (t_prev / t_warm) if t_prev else None,
            "unicode_warm_over_unicode_words_of": t_utok / t_uwarm,
        },
        targets=targets,
        tables=tables,
    )
    c.report("keyed winnowing throughput", tables, targets, path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What a run of matches must be to count as a page of another tenant's text, and when it is an echo instead.

The content detector (detectors/signals/overlap.py) asks these of each source's runs: how long a run the output's
chance background asks for (`required_run`), how many units such a run must be seen to cover (`min_cover`), which
run is the page (`page_run`), and whether every such run is whole sentences of the source, what a model writes when
it reproduces a text it knows (`whole_sentences`, ADR 0008 decision 8). Pure functions of the settings and the
index's answer (`Overlap`): the reasoning is docs/adr/0004 ("information", "coverage") and docs/adr/0008.
"""

from __future__ import annotations

from collections.abc import Callable

from detectors.index import Overlap
from detectors.sentences import SentencePrint, whole
from detectors.settings import DetectionSettings

__all__ = ["min_cover", "page_run", "required_run", "whole_sentences"]


def required_run(s: DetectionSettings, ov: Overlap, tenant: str) -> int:
    """The shortest free run of `tenant` that counts as a page for a high alert in this output (docs/adr/0004,
    "information"). A match carries as much information as it is unlikely by chance, and that is measured on the
    output itself: p, the share of the output's fingerprints outside the source's long runs that the source's
    text holds anyway. Taking matches as independent, n * p^r is the expected number of chance runs of r
    consecutive matches in the n positions, i.e. a run must carry r * log2(1/p) >= log2(n / alpha) bits
    (`overlap_chance_alpha`). A page of words, of Han characters, or of another script than the output's shares
    (almost) nothing else with it: p ~ 0 and `overlap_high_run` suffices, the one-page guarantee of 16 units.
    Kana-heavy text in a Japanese answer from a source writing Japanese too shares many short k-grams (measured
    p = 0.1-0.5): the run needed grows, past the strong run where chance explains one (at p = 0.5 in 180 positions,
    a run of 9 is expected a third of the time), up to `overlap_chance_max_run`."""
    need = s.overlap_high_run
    held, n = ov.chance.get(tenant, (0, 0))
    if s.overlap_chance_alpha <= 0 or not held:
        return need
    p = held / (n + 1)
    while need < s.overlap_chance_max_run and n * p**need > s.overlap_chance_alpha:
        need += 1
    return need


def strong_run(s: DetectionSettings, need: int) -> int:
    """The run that is a page however it lies in the output (its seams, its order): the strong run, or the run the
    output's chance background requires (`required_run`) when that is longer."""
    return max(need, s.overlap_strong_matches)


def min_cover(s: DetectionSettings, need: int) -> int:
    """Units a free run of `need` matches must be seen to cover to count as a page (docs/adr/0004, "coverage").
    A page of P = need * w + k - 1 units holds P - k + 1 whole k-grams; every window of w of them lies inside
    it, so its selection is in both texts and a match: the first match is among the page's first w k-grams,
    the last among its last w, and the run covers at least P - 2 (w - 1) units. A shorter cover is a shorter
    shared passage than the guarantee is about (one katakana word, an 8-word stock phrase) with its k-grams
    counted as independent matches; such a run is no page, while every page of P units still is."""
    return need * s.w + s.k - 1 - 2 * (s.w - 1)


def page_run(s: DetectionSettings, ov: Overlap, tenant: str, need: int) -> tuple[int, int]:
    """The longest free run of `tenant` of at least `need` matches that covers `min_cover(need)` units (all of
    them when the output's positions are unknown), and the units it covers (0 unknown); (0, 0) if none."""
    best = (0, 0)
    floor = min_cover(s, need)
    for length, cover in ov.free_runs.get(tenant, ()):
        units = cover + s.k - 1 if cover else 0
        if length >= need and (not cover or units >= floor) and length > best[0]:
            best = (length, units)
    return best


def whole_sentences(
    s: DetectionSettings,
    sp: SentencePrint | None,
    ov: Overlap,
    tenant: str,
    need: int,
    source_sentences: Callable[[set[int]], set[int] | None],
) -> bool:
    """Whether every free run of `tenant` of at least `need` matches (at least one) touches only sentences of the
    output (`sp`, its whole-sentence print) that are whole sentences of the texts of `tenant` the output matched
    (`source_sentences` of their ids: the index's, detectors/sentences.py). False where either side's sentences or
    the output's positions are unknown: then nothing is claimed."""
    spans = ov.free_spans.get(tenant)
    if sp is None or not spans or not sp[1]:
        return False
    k = s.k
    runs = [(first, last + k - 1) for length, first, last in spans if length >= need]
    if not runs:
        return False
    # A delivery mix-up hands over a whole response: the source's runs then span most of the output, whatever
    # share of its fingerprints stock phrases and public text explain away. That is no echo.
    covered, end = 0, -1
    for first, last in sorted((first, last + k - 1) for _, first, last in spans):
        covered += max(0, last - max(first, end + 1) + 1)
        end = max(end, last)
    if covered >= s.overlap_beyond_pool_share * sp[1][-1]:
        return False
    source = source_sentences(ov.docs.get(tenant, set()))
    if source is None:
        return False
    return all(whole(sp, first, last, source) for first, last in runs)

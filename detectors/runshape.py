"""How the content index judges a run of matches against the texts it holds (the run's shape, not its length):
whether it continues the receiver's own text (`_attached`), is the junction of two innocent texts (`_junction`),
lies in one text of the source in order (`_in_order`), and how often the source's text meets the output by chance
(`_chance`). A mixin of `ContentIndex` (detectors/index.py), whose postings it reads.
"""

from __future__ import annotations

from detectors.matches import Run, Runs
from detectors.postings import Doc, first_native, first_positions


class RunShapes:
    """The run tests of `ContentIndex.query`, over the index's postings (declared here, set by ContentIndex)."""

    _single: dict[int, int]
    _multi: dict[int, dict[str, int]]
    _docs: dict[int, Doc]
    common_min_tenants: int

    def _chance(
        self,
        src: str,
        hashes: list[int],
        own_prompt: set[int],
        explained: list[int] | None,
        spans: list[tuple[int, int]],
    ) -> tuple[int, int]:
        """(held, n): of the output's n fingerprints outside the source's long runs that could be chance matches
        (not the receiver's prompt, not public, not common over the long horizon or in the window), how many the
        source's window text holds, whoever else holds them too (the receiver included). Text of little information
        per unit (kana, a small vocabulary, tables) shares many short k-grams with text in the same language; a page
        of another script or of private content shares none besides itself."""
        inside = [False] * len(hashes)
        for first, last in spans:
            inside[first : last + 1] = [True] * (last + 1 - first)
        held = n = 0
        single, multi, docs = self._single, self._multi, self._docs
        common_min = self.common_min_tenants
        for i, h in enumerate(hashes):
            if inside[i] or h in own_prompt or (explained is not None and explained[i] >= 2):
                continue
            only = single.get(h)
            if only is not None:
                held += docs[only].tenant_id == src
            else:
                owners = multi.get(h)
                if owners is not None:
                    if len(owners) >= common_min:  # boilerplate of the window: everybody's, not this source's
                        continue
                    held += src in owners
            n += 1
        return held, n

    def _bridge(self, h: int, prev: Runs, runs: Runs, bridge: int, owners: dict[str, int] | None = None) -> None:
        """Carry the open tenant runs whose source holds the explained fingerprint `h` over it (see `query`)."""
        for src, r in prev.items():
            if r.tokens < 0 or r.bridged >= bridge:  # a cross-session run, or the gap is too wide
                continue
            if src in owners if owners is not None else self._holds(src, h):
                runs[src] = r._replace(bridged=r.bridged + 1)

    def _holds(self, tenant_id: str, h: int) -> bool:
        only = self._single.get(h)
        if only is not None:
            return self._docs[only].tenant_id == tenant_id
        owners = self._multi.get(h)
        return owners is not None and tenant_id in owners

    def _attached(self, src: str, r: Run, own: list[int | None], n: int) -> bool:
        """Whether the run continues the receiver's own text: on one side, the `n` fingerprints next to it
        are the receiver's own text AND the source's (the source's text goes on into what the receiver holds:
        a file or document both tenants hold, not a page inserted into the output). A page has a seam on each
        side: the k - 1 k-grams straddling it are a whole window when k - 1 >= w, so winnowing selects one of
        them, and it holds units of both texts, so neither had it; two in a row held by both is no accident.
        """
        holds = self._holds
        before = own[max(0, r.start - n) : r.start]
        after = own[r.last + 1 : r.last + 1 + n]
        return any(len(side) == n and all(h is not None and holds(src, h) for h in side) for side in (before, after))

    def _junction(
        self,
        src: str,
        r: Run,
        hashes: list[int],
        own: list[int | None],
        explained: list[int] | None,
        limits: tuple[int, int],
    ) -> bool:
        """Whether a short run is the junction of two innocent texts rather than a page (docs/adr/0004, 2026-11-30
        "junctions"): its neighbour on one side (`limits[0]`: longest such run) or on both sides (`limits[1]`) is
        innocent (the receiver's own text, the public corpus, common) AND held by the source.

        A page of P private units inserted into other text has a seam on each side whose k - 1 straddling k-grams
        are a whole window (k - 1 >= w): one is selected and, mixing both texts, held by nobody, so it is the
        run's neighbour. A neighbour the source holds therefore means the source's text goes on there as the
        output's does, and then every k-gram holding a page unit, straddling ones included, is the source's:
        P consecutive k-grams (one side) or P + k - 1 (both), so the run has at least P // w or (P + k - 1) // w
        matches. A shorter run with such neighbours is the k - 1 k-grams where two innocent texts meet (a
        disclaimer after a greeting, a closing after a famous quote), which any tenant that wrote the same two
        texts one after the other holds too."""
        one, both = limits
        if r.length > both:
            return False
        sides = 0
        for i in (r.start - 1, r.last + 1):
            if 0 <= i < len(hashes) and self._innocent(i, hashes[i], own, explained) and self._holds(src, hashes[i]):
                sides += 1
        return r.length <= (both if sides == 2 else one if sides == 1 else 0)

    def _in_order(
        self, src: str, r: Run, hashes: list[int], own: list[int | None], explained: list[int] | None
    ) -> bool:
        """Whether the run's fingerprints lie in one text of the source with the same spacing as in the output.

        A stale page is a contiguous piece of one text: inside a shared passage winnowing selects the very same
        k-grams in both texts, so the source's fingerprints of the passage follow each other exactly as the
        output's do. A run whose matches are scattered over the source's text (or over several of its texts) is
        short k-grams the two texts share by chance, which a long text of a small vocabulary (word salad, tables,
        CJK stock phrases) offers many of. (Fingerprints are stored once per text, at their first occurrence: a
        passage that repeats k-grams met earlier in its text can fail this; see docs/adr/0004. Fingerprints bridged
        as common are left out: a stock phrase is the likeliest to have occurred earlier in the text.)"""
        single, multi, docs = self._single, self._multi, self._docs
        matched: list[tuple[int, int]] = []  # (output position, the source's doc holding it)
        for i in range(r.start, r.last + 1):
            h = hashes[i]
            if self._innocent(i, h, own, explained):
                continue
            d = single.get(h)
            if d is None:
                d = multi.get(h, {}).get(src)
            elif docs[d].tenant_id != src:
                d = None
            if d is not None:
                matched.append((i, d))
        needed = [hashes[i] for i, _ in matched]
        first = first_native if type(single) is not dict else first_positions
        for doc_id in dict.fromkeys(d for _, d in matched):
            # The text's offset each match implies (where the text holds it first).
            at = [p - i for p, (i, _) in zip(first(docs[doc_id].hashes, needed), matched, strict=True)]
            if min(at) + len(hashes) < 0:  # a match the text does not hold
                continue
            # A fingerprint met earlier in the text implies an earlier offset (stored once, at its first occurrence),
            # never a later one: the page's offset is the latest implied, and two matches must agree on it.
            if at.count(max(at)) >= min(2, len(at)):
                return True
        return False

    def _innocent(self, i: int, h: int, own: list[int | None], explained: list[int] | None) -> bool:
        """Whether output fingerprint `i` is explained without any other tenant: the receiver's own text (prompt,
        recent context, older history), the public corpus, or common (long horizon or window)."""
        if own[i] is not None or (explained is not None and explained[i] >= 1):
            return True
        if self.common_min_tenants <= 1:
            return h in self._single or h in self._multi
        owners = self._multi.get(h)
        return owners is not None and len(owners) >= self.common_min_tenants

"""The model: answers that quote and paraphrase their own prompt, say what the model knows, and wrap it all
in the same few stock sentences for everyone.

Text is kept as segments with an owner (the tenant whose data it is, None for shared text), so that a
leak's label can say how much of what leaked was the source tenant's own.
"""

from __future__ import annotations

import keyword
import random
import re
from dataclasses import dataclass

from streams.sim.blind.data import UNIT, sentences, units
from streams.sim.blind.phrasing import CLOSERS, INTROS, OPENERS


@dataclass
class Seg:
    text: str
    owner: str | None = None  # tenant whose data this is; None: shared (templates, stock, public text)
    kind: str = "text"  # template, stock, private, public, history, tool, code, ...


@dataclass
class Message:
    role: str
    segs: list[Seg]

    @property
    def text(self) -> str:
        return "".join(s.text for s in self.segs)


def joiner(lang: str) -> str:
    return "" if lang in ("zh", "ja") else " "


def plain(segs: list[Seg]) -> str:
    return "".join(s.text for s in segs)


def unit_slice(text: str, start: int, n: int) -> str:
    """The text of units [start, start+n), with the original spacing between them."""
    spans = [m.span() for m in UNIT.finditer(text)]
    if not spans:
        return ""
    start = max(0, min(start, len(spans) - 1))
    end = min(len(spans), start + n) - 1
    return text[spans[start][0] : spans[end][1]]


def paraphrase(sentence: str, lang: str, rnd: random.Random) -> str:
    """What a model does to a sentence it restates: drops a clause or some words, keeps the order."""
    if lang in ("zh", "ja"):
        parts = [p for p in re.split(r"(?<=[，、,])", sentence) if p]
        if len(parts) > 2:
            parts.pop(rnd.randrange(1, len(parts)))
        return "".join(parts)
    words = sentence.split()
    if len(words) < 6:
        return sentence
    keep = [w for i, w in enumerate(words) if i == 0 or rnd.random() > 0.22]
    return " ".join(keep)


class Model:
    def __init__(self, knowledge: dict[str, list[str]]) -> None:
        self.knowledge = knowledge

    def stock(self, lang: str, rnd: random.Random, kind: str) -> Seg:
        table = OPENERS if kind == "opener" else CLOSERS
        return Seg(rnd.choice(table.get(lang, table["en"])), None, "stock")

    def intro(self, lang: str, rnd: random.Random, kind: str) -> Seg:
        return Seg(rnd.choice(INTROS.get(lang, INTROS["en"])[kind]), None, "stock")

    def quotes(self, source: Seg, lang: str, rnd: random.Random, n: int) -> list[Seg]:
        """n passages of the source, each a sentence or two, quoted as they are or paraphrased."""
        sents = sentences(source.text, lang) or [source.text]
        out = []
        for _ in range(n):
            i = rnd.randrange(len(sents))
            span = joiner(lang).join(sents[i : i + rnd.choice((1, 1, 2))])
            if rnd.random() < 0.35:
                span = paraphrase(span, lang, rnd)
            out.append(Seg(span, source.owner, source.kind))
        return out

    def knows(self, lang: str, rnd: random.Random, n: int) -> list[Seg]:
        """What the model says from its training: public documentation, the same for every tenant."""
        pool = self.knowledge.get(lang) or self.knowledge["en"]
        # popular facts come up far more often than the long tail (the top 1 % in a fifth of the draws)
        return [Seg(pool[int(len(pool) * rnd.random() ** 3)], None, "public") for _ in range(n)]

    def wrap(
        self, body: list[Seg], lang: str, rnd: random.Random, opener: float = 0.75, closer: float = 0.5
    ) -> list[Seg]:
        out: list[Seg] = []
        if rnd.random() < opener:
            out.append(self.stock(lang, rnd, "opener"))
        out += body
        if rnd.random() < closer:
            out.append(self.stock(lang, rnd, "closer"))
        return self.layout(out, lang, rnd)

    @staticmethod
    def layout(segs: list[Seg], lang: str, rnd: random.Random) -> list[Seg]:
        """Separators between segments: paragraphs, or sentences run on."""
        out: list[Seg] = []
        for i, s in enumerate(segs):
            if i:
                out.append(Seg("\n\n" if rnd.random() < 0.45 else joiner(lang) or "", None, "sep"))
            out.append(s)
        return out

    def answer_about(self, material: list[Seg], question: list[Seg], lang: str, rnd: random.Random) -> list[Seg]:
        """A chat or RAG answer: restates the question, quotes the material, adds what it knows."""
        body: list[Seg] = []
        if question and rnd.random() < 0.4:
            body.append(self.intro(lang, rnd, "restate"))
            body += self.quotes(rnd.choice(question), lang, rnd, 1)
        if material and rnd.random() < 0.5:
            body.append(self.intro(lang, rnd, "context"))
        for m in material[:3]:
            body += self.quotes(m, lang, rnd, rnd.choice((1, 1, 2, 3)))
        body += self.knows(lang, rnd, rnd.choice((0, 1, 1, 2, 3)))
        return self.wrap(body, lang, rnd)

    def summary(self, material: list[Seg], lang: str, rnd: random.Random) -> list[Seg]:
        body = [self.intro(lang, rnd, "summary")]
        for m in material:
            body += self.quotes(m, lang, rnd, rnd.choice((2, 3, 4)))
        return self.wrap(body, lang, rnd, opener=0.4, closer=0.3)

    def translation(self, pairs: list[tuple[Seg, str]], lang: str, rnd: random.Random) -> list[Seg]:
        """The real translation of each string, the source owner's data in the target language."""
        numbered = rnd.random() < 0.5
        lines = [f"{i + 1}. {t}" if numbered else t for i, (_, t) in enumerate(pairs)]
        owner = pairs[0][0].owner if pairs else None
        body = [self.intro(lang, rnd, "translation"), Seg("\n" + "\n".join(lines), owner, "translation")]
        return self.wrap(body, lang, rnd, opener=0.3, closer=0.2)

    def code(self, source: Seg, lang: str, rnd: random.Random) -> list[Seg]:
        """Returns a function of the pasted code, edited (a renamed local, a hint), and a line about it."""
        block = pick_function(source.text, rnd)
        edited = edit_code(block, rnd)
        doc = re.search(r'"""(.+?)(?:\n|""")', block)
        body = [self.intro(lang, rnd, "code"), Seg(f"\n```python\n{edited}\n```\n", source.owner, "code")]
        if doc and rnd.random() < 0.6:
            body.append(Seg(paraphrase(doc.group(1).strip(), "en", rnd), source.owner, "code"))
        body += self.knows(lang, rnd, rnd.choice((0, 1)))
        return self.wrap(body, lang, rnd, opener=0.6, closer=0.4)


_DEF = re.compile(r"^( *)(?:async )?def \w+", re.M)
_IDENT = re.compile(r"\b[a-z_][a-z0-9_]{2,}\b")


def pick_function(code: str, rnd: random.Random, max_lines: int = 60) -> str:
    starts = [m for m in _DEF.finditer(code)]
    if not starts:
        lines = code.splitlines()
        i = rnd.randrange(max(1, len(lines) - 20))
        return "\n".join(lines[i : i + 30])
    m = rnd.choice(starts)
    indent = len(m.group(1))
    lines = code[m.start() :].splitlines()
    out = [lines[0]]
    for ln in lines[1:max_lines]:
        if ln.strip() and len(ln) - len(ln.lstrip()) <= indent:
            break
        out.append(ln)
    return "\n".join(out).rstrip()


def edit_code(block: str, rnd: random.Random) -> str:
    names = [n for n in _IDENT.findall(block) if n not in _KEYWORDS]
    counts = {n: names.count(n) for n in set(names)}
    cands = sorted(n for n, c in counts.items() if c >= 2)
    if cands and rnd.random() < 0.7:
        old = rnd.choice(cands)
        block = re.sub(rf"\b{old}\b", old + rnd.choice(("_value", "_", "_item", "_result")), block)
    if rnd.random() < 0.4:
        lines = block.splitlines()
        lines.insert(1, " " * (len(lines[0]) - len(lines[0].lstrip()) + 4) + "# TODO: handle the edge case")
        block = "\n".join(lines)
    return block


_KEYWORDS = frozenset(keyword.kwlist) | {"self", "cls", "the"}


def tokens_of(segs: list[Seg]) -> int:
    return sum(len(units(s.text)) for s in segs)

"""Texts of the stdlib-code profile: real Python source from the interpreter's standard library, fresh prose
from an order-1 word chain over its comments, and the coding assistant's shared phrases.

Files that share any 16-word passage with an earlier file are dropped, so that tenants' private repositories
are truly private and every cross-tenant overlap in clean traffic is a deliberate decoy (shared system
prompts, popular files, stock phrases), never an accident of the corpus.
"""

from __future__ import annotations

import collections
import functools
import itertools
import math
import random
import re
import sysconfig
from dataclasses import dataclass
from pathlib import Path

# --------------------------------------------------------------------------------------------------
# Shared texts. Stock phrases are said by the assistant to every tenant; the long ones are ≥ 16 words on
# purpose, so a detector that does not discount text common to many tenants raises false alarms on them.

SYSTEM_HEADERS = (
    "You are an autonomous coding agent working inside the user's repository. Read files before you edit "
    "them, keep changes minimal and focused on the task, never invent APIs that do not exist in the code "
    "base, and explain every change in one or two sentences. When a command fails, show the error and "
    "propose a fix instead of retrying blindly. The following project conventions apply to all answers.",
    "You are a senior Python engineer pair-programming with the user. Prefer the standard library over new "
    "dependencies, write type hints for every public function, keep functions short, and add a regression "
    "test for every bug you fix. Answer with a unified diff when you change code and with prose otherwise. "
    "Use the style of the reference module below for naming, docstrings and error handling.",
    "You are a code review assistant. For each change, list correctness problems first, then security "
    "issues, then performance, then style. Quote the exact lines you comment on, give a concrete "
    "suggestion for each finding, and say clearly when you found nothing. Do not rewrite working code for "
    "taste. The reference material below describes the idioms this team expects to see.",
    "You are a terminal assistant for a developer. You can run shell commands, read and write files, and "
    "search the code base. Think step by step, run the tests after each edit, and stop when the tests pass. "
    "Never delete files outside the working tree and never push to remote branches without asking first. "
    "Background documentation for the project follows.",
)

OPENINGS = (
    "Here is the updated function:",
    "Sure! Let me take a look at the code first.",
    "I'll start by reading the relevant files.",
    "Good catch, the problem is in the code below.",
    "I looked through the module and found the cause.",
    "Let me walk you through the change step by step.",
)
BEFORE_CODE = (
    "Here is the updated function:",
    "The relevant part is this block:",
    "This is the code in question:",
    "Here is the fixed version:",
)
CLOSINGS = (
    "Let me know if you want me to add tests for this.",
    "I have made the requested changes. Please review the diff below carefully and run the full test suite "
    "before merging it into the main branch.",
    "This keeps the public interface unchanged, so existing callers do not need to be modified and the "
    "behaviour stays backwards compatible with older releases of the library.",
    "Run the tests again and tell me if anything still fails.",
    "If you want, I can also update the documentation to describe the new behaviour in more detail.",
)
USER_TEMPLATES = (
    "Refactor `{func}` in {file} so that it is easier to test.",
    "Why does `{func}` in {file} fail when the input is empty? Please fix it.",
    "Add type hints to `{func}` in {file} and keep the behaviour identical.",
    "Write a unit test for `{func}` from {file}.",
    "Explain what `{func}` in {file} does and where it is called from.",
    "The CI job fails in {file} near `{func}`. Find the bug and propose a patch.",
    "Can you make `{func}` in {file} faster? It shows up in the profile.",
    "Rename `{func}` in {file} to something clearer and update all callers.",
)

_WORD = re.compile(r"\w+")
_DEF = re.compile(r"^[ \t]*(?:async[ \t]+)?def[ \t]+(\w+)", re.MULTILINE)
_COMMENT = re.compile(r"^[ \t]*#[ \t]?(.+)$", re.MULTILINE)
_EXCLUDED = re.compile(
    r"/(?:site-packages|dist-packages|test|tests|idle_test|__pycache__|encodings|lib2to3|pydoc_data|turtledemo|"
    r"ensurepip|config-[^/]*)/|/_sysconfigdata"
)


def words_of(text: str) -> list[str]:
    """Normalised words, as the detector counts them."""
    return _WORD.findall(text.lower())


# --------------------------------------------------------------------------------------------------
# Corpus


@dataclass(frozen=True)
class File:
    path: str  # relative to the stdlib directory
    text: str
    funcs: tuple[str, ...]


@dataclass(frozen=True)
class Corpus:
    files: tuple[File, ...]
    chain: dict[str, tuple[str, ...]]  # order-1 word chain for fresh prose
    starters: tuple[str, ...]
    # Every VERBATIM-word window of the comments the chain learns from (hashes): prose writes none.
    verbatim: frozenset[int] = frozenset()

    @functools.cached_property
    def counts(self) -> dict[str, dict[str, int]]:
        """chain[w] counted by successor: the chain's probabilities without scanning its tuples."""
        return {k: dict(collections.Counter(v)) for k, v in self.chain.items()}


# Fresh prose shares at most VERBATIM - 1 consecutive words with any comment the chain learned from.
# Those comments are also the tenants' private code, and where a rare word has a single successor an
# order-1 chain copies a whole comment line: a model writing out private text it could never have seen,
# an accident of the corpus rather than a decoy. Five words are far below a page (16 tokens) and give
# the detector at most one shared k-gram per run.
VERBATIM = 6
# Nor is any run of VERBATIM words one the chain writes with a probability above this, given its first word:
# 5,000 answers of a few dozen words each then share such a run by chance a handful of times, never a page.
LIKELY = 1 / 4096


@functools.lru_cache(maxsize=1)
def corpus() -> Corpus:
    root = Path(sysconfig.get_paths()["stdlib"])
    paths = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py"))
    seen: set[int] = set()
    verbatim: set[int] = set()
    files: list[File] = []
    comments: list[str] = []
    for rel in paths:
        if _EXCLUDED.search("/" + rel):
            continue
        try:
            text = (root / rel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        own = [m.group(1) for m in _COMMENT.finditer(text)]
        comments.extend(own)
        # Every comment the chain learns from, not only the files tenants get: the same licence header or
        # grammar comment stands in many files, and two answers copying it would share it verbatim.
        said = words_of(" ".join(own))  # a file's comment lines read on as one text, as the detector reads them
        verbatim.update(hash(tuple(said[i : i + VERBATIM])) for i in range(len(said) - VERBATIM + 1))
        if not 3_000 <= len(text) <= 400_000:
            continue
        words = words_of(text)
        # Python's tuple hash is salted per process, but a 64-bit collision among a few million
        # shingles is so unlikely that the selection is the same in every run.
        shingles = {hash(tuple(words[i : i + 16])) for i in range(len(words) - 15)}
        if shingles & seen:
            continue
        seen |= shingles
        funcs = tuple(dict.fromkeys(f for f in _DEF.findall(text) if not f.startswith("__")))
        files.append(File(rel, text, funcs or ("main",)))
    nexts: dict[str, list[str]] = {}
    starters: list[str] = []
    for line in comments:
        toks = [t for t in line.split() if t.isascii() and any(c.isalpha() for c in t) and len(t) < 24]
        for a, b in itertools.pairwise(toks):
            nexts.setdefault(a, []).append(b)
        if toks and toks[0][0].isupper() and len(toks) >= 5:
            starters.append(toks[0])
    chain = {k: tuple(v) for k, v in nexts.items()}
    return Corpus(tuple(files), chain, tuple(dict.fromkeys(starters)) or ("The",), frozenset(verbatim))


def prose(rng: random.Random, corpus: Corpus, sentences: int) -> str:
    """Fresh text: sentences from an order-1 word chain over stdlib comments.

    No VERBATIM consecutive words of it are a comment the chain learned from, and none are a path the chain
    takes with a probability above LIKELY (see both), so fresh text overlaps neither a tenant's code nor
    another answer's fresh text in a way a detector could mistake for a leak.
    """
    out = []
    said: list[str] = []  # read on across sentences, as the detector reads them
    odds: list[float] = []  # per word of `said`: the probability the chain gave it, 1 for a token's later words
    for _ in range(sentences):
        word = rng.choice(corpus.starters)
        for _retry in range(8):
            if not _copies(corpus, said, word):
                break
            word = rng.choice(corpus.starters)
        toks = [word]
        _say(said, odds, word, 1 / len(corpus.starters))
        target = rng.randint(8, 22)
        while len(toks) < target:
            picked = _next(rng, corpus, word, said, odds)
            if picked is None:  # every successor would copy or repeat: a new clause
                word = rng.choice(corpus.starters).lower()
                if _copies(corpus, said, word):
                    break
                _say(said, odds, word, 1 / len(corpus.starters))
            else:
                _say(said, odds, picked, _odds(corpus, word, picked))
                word = picked
            toks.append(word)
            if word.endswith(".") and len(toks) >= 6:
                break
        sentence = " ".join(toks).rstrip(".,;:")
        out.append(sentence[0].upper() + sentence[1:] + ".")
    return " ".join(out)


@functools.lru_cache(maxsize=65_536)
def _words(token: str) -> tuple[str, ...]:
    return tuple(words_of(token))


def _say(said: list[str], odds: list[float], token: str, p: float) -> None:
    ws = _words(token)
    said += ws
    odds += [p] + [1.0] * (len(ws) - 1)


def _likely(odds: list[float], token: str, p: float) -> bool:
    """Whether the last VERBATIM words, with `token` said at probability p, are a likely path of the chain."""
    n = len(_words(token))
    before = VERBATIM - n - 1  # words before the token's inside the window, not counting the window's first
    return p * (math.prod(odds[-before:]) if before > 0 else 1.0) > LIKELY


def _odds(corpus: Corpus, word: str, nxt: str) -> float:
    """The probability the chain gives `nxt` after `word`."""
    return corpus.counts[word][nxt] / len(corpus.chain[word])


def _next(rng: random.Random, corpus: Corpus, word: str, said: list[str], odds: list[float]) -> str | None:
    """A successor drawn from the chain among those that neither copy a comment nor repeat a likely path."""
    follow = corpus.chain.get(word) or ()
    if not follow:
        return None

    def ok(w: str) -> bool:
        return not _likely(odds, w, _odds(corpus, word, w)) and not _copies(corpus, said, w)

    for _try in range(8):  # rejection sampling: most words have many successors and the first draw is fine
        w = rng.choice(follow)
        if ok(w):
            return w
    allowed = {w: n for w, n in collections.Counter(follow).items() if ok(w)}
    return rng.choices(list(allowed), list(allowed.values()))[0] if allowed else None


def _copies(corpus: Corpus, said: list[str], word: str) -> bool:
    """Whether appending `word` makes the last VERBATIM words a window of a comment the chain learned from."""
    if not corpus.verbatim:
        return False
    tail = said[-(VERBATIM - 1) :] + list(_words(word))
    return any(hash(tuple(tail[i : i + VERBATIM])) in corpus.verbatim for i in range(max(0, len(tail) - VERBATIM + 1)))


def length_class(words: int) -> str:
    """Passage length relative to the detector's guarantee of 16 words."""
    return "short" if words < 16 else "threshold" if words <= 24 else "medium" if words < 50 else "long"


def window(rng: random.Random, text: str, chars: int) -> str:
    """A slice of about `chars` characters starting and ending at line boundaries."""
    if len(text) <= chars:
        return text
    start = rng.randrange(0, len(text) - chars)
    nl = text.rfind("\n", 0, start)
    start = nl + 1 if nl >= 0 else 0
    end = text.find("\n", start + chars)
    return text[start : end if end >= 0 else len(text)]


def head(text: str, chars: int) -> str:
    """The first `chars` characters, cut back to a line end when there is one."""
    if len(text) <= chars:
        return text
    cut = text.rfind("\n", 0, chars)
    return text[: cut if cut > chars // 2 else chars]

"""The text of one turn: what a tenant's user sends and what the model answers, per kind of application."""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from functools import cache

from streams.sim.blind2 import corpus, phrases
from streams.sim.blind2.corpus import Slice
from streams.sim.blind2.world import Tenant

TARGETS = ("en", "ko", "ru", "fr", "es", "ja", "zh", "pt", "ar", "th", "vi")


@dataclass
class Turn:
    user: str  # the new user message
    private: str  # the tenant's own text in it (a substring of `user`)
    answer: str  # the model's clean answer
    answer_private: str  # the tenant-specific part of the answer (a substring of `answer`)
    out_lang: str
    decoys: set[str] = field(default_factory=set)
    context: str | None = None  # retrieved passages (RAG)
    tool_result: str | None = None  # agents: the tool output the client sends before this turn


def join(lang: str, parts: list[str]) -> str:
    return ("" if lang in ("ja", "zh") else " ").join(parts)


def fragment(rng: random.Random, text: str, lo: int, hi: int) -> str:
    """A contiguous run of lo..hi stream units of `text` (all of it when shorter), stripped."""
    u = corpus.units(text)
    n = rng.randint(lo, hi)
    if len(u) <= n:
        return text.strip()
    i = rng.randrange(0, len(u) - n)
    return "".join(u[i : i + n]).strip()


@cache
def _to_english(lang: str) -> dict[str, str]:
    return {a: b for a, b in corpus.parallel(lang)}


@cache
def _from_english(lang: str) -> dict[str, str]:
    return {b: a for a, b in corpus.parallel(lang)}


def _public_passage(rng: random.Random, lang: str) -> str:
    if lang == "en" and rng.random() < 0.5:
        docs = [d["doc"] for d in corpus.stdlib() if len(d["doc"]) > 120]
        return " ".join(rng.choice(docs).split())
    arts = corpus.udhr(lang if lang in corpus.TENANT_LANGS else "en")
    return join(lang, rng.choice(arts[1:]))


def _public_paste(rng: random.Random, lang: str) -> str:
    if lang == "en" and rng.random() < 0.6:
        text = rng.choice(list(corpus.licences().values()))
        paras = [p.strip() for p in text.split("\n\n") if len(p.strip()) > 200]
        return " ".join(rng.choice(paras).split())
    return _public_passage(rng, lang)


class Writer:
    """Writes the turns of one tenant from its slice of the corpus."""

    def __init__(self, tenant: Tenant, sl: Slice, rng: random.Random) -> None:
        self.t, self.sl, self.rng = tenant, sl, rng
        self.lang = tenant.explain_lang

    def _body(self, lo: int, hi: int) -> str:
        return join(self.lang, self.sl.draw(self.rng, self.rng.randint(lo, hi)))

    def _answer(self, body: str, quote_from: str | None) -> tuple[str, str]:
        rng, lang = self.rng, self.lang
        head = rng.choice(phrases.OPENERS[lang])
        if quote_from and rng.random() < 0.5:
            head += phrases.RESTATE[lang].format(q=fragment(rng, quote_from, 6, 16))
        tail = rng.choice(phrases.CLOSERS[lang]) if rng.random() < 0.7 else ""
        return head + body + ("\n\n" + tail if tail else ""), body

    def chat(self, earlier: list[str]) -> Turn:
        rng, lang = self.rng, self.lang
        private = self._body(1, 3)
        decoys: set[str] = set()
        ask = rng.choice(phrases.ASK[lang])
        r = rng.random()
        if r < 0.12 and earlier:
            user = phrases.SELF_QUOTE[lang].format(q=fragment(rng, rng.choice(earlier), 8, 20)) + private
            decoys.add("self_quote")
        elif r < 0.22:
            doc = _public_paste(rng, lang)
            user = f"{doc}\n\n{phrases.ABOUT_PUBLIC[lang]} {private}"
            body = self._body(2, 4)
            answer = rng.choice(phrases.OPENERS[lang]) + fragment(rng, doc, 12, 30) + "\n\n" + body
            return Turn(user, private, answer, body, lang, {"public_doc", "public_echo"})
        else:
            user = f"{ask}\n{private}" if rng.random() < 0.5 else f"{private}\n\n{ask}"
        answer, body = self._answer(self._body(2, 6), private)
        return Turn(user, private, answer, body, lang, decoys)

    def rag(self) -> Turn:
        rng, lang = self.rng, self.lang
        passages = [_public_passage(rng, lang) for _ in range(rng.randint(2, 4))]
        context = "\n\n".join(f"[{i + 1}] {p}" for i, p in enumerate(passages))
        private = self._body(1, 2)
        user = f"{private}\n{rng.choice(phrases.ASK[lang])}"
        cited = rng.randrange(len(passages))
        body = self._body(1, 4)
        answer = f"{rng.choice(phrases.OPENERS[lang])}[{cited + 1}] {fragment(rng, passages[cited], 10, 28)}\n\n{body}"
        return Turn(user, private, answer, body, lang, {"rag"}, context=context)

    def agent(self, step: int, task: str) -> Turn:
        rng, lang = self.rng, self.lang
        tool = rng.choice(self.t.tools)["name"] if self.t.tools else "search"
        if step == 0:
            private = self._body(1, 3)
            call = {"tool": tool, "arguments": {"query": fragment(rng, private, 4, 12), "limit": rng.choice((5, 10))}}
            answer = json.dumps(call, ensure_ascii=False)
            return Turn(private, private, answer, answer, lang, set())
        notes = self.sl.draw(rng, rng.randint(1, 3))
        result = {"results": [{"id": rng.choice(self.sl.names), "status": "ok", "note": n} for n in notes]}
        tool_result = json.dumps(result, ensure_ascii=False)
        if rng.random() < 0.45:
            body = self._body(1, 3)
            answer = json.dumps({"final_answer": body}, ensure_ascii=False)
        else:
            body = fragment(rng, task, 4, 12)
            answer = json.dumps({"tool": tool, "arguments": {"query": body, "limit": 10}}, ensure_ascii=False)
        return Turn("", "", answer, body, lang, {"session_resend"}, tool_result=tool_result)

    def translate(self) -> Turn:
        rng, lang = self.rng, self.lang
        if rng.random() < 0.45:
            src = lang
            dst = rng.choice([x for x in TARGETS if x != src])
            i = rng.randrange(1, len(corpus.udhr(src)))
            text, out = join(src, corpus.udhr(src)[i]), join(dst, corpus.udhr(dst)[i])
            user = phrases.TRANSLATE.format(target=corpus.LANG_NAMES[dst], text=text)
            return Turn(user, "", out, "", dst, {"translation", "public_doc"})
        if lang == "en":
            dst = rng.choice([x for x in corpus.TENANT_LANGS if x != "en"])
            table = _from_english(dst)
        else:
            dst, table = "en", _to_english(lang)
        mine = [s for s in self.sl.sentences if s in table] or list(table)
        picks = [rng.choice(mine) for _ in range(rng.randint(2, 5))]
        names = [rng.choice(self.sl.names) for _ in range(4)]
        fill = lambda s: re.sub(r"\{(\d)\}", lambda m: names[int(m.group(1)) % 4], s)  # noqa: E731
        text = join(lang, [fill(p) for p in picks])
        out = join(dst, [fill(table[p]) for p in picks])
        user = phrases.TRANSLATE.format(target=corpus.LANG_NAMES[dst], text=text)
        return Turn(user, text, out, out, dst, {"translation"})

    def code(self, earlier_code: str | None) -> Turn:
        rng, lang = self.rng, self.lang
        decoys: set[str] = set()
        if earlier_code is None:
            if rng.random() < 0.12:
                code, fence = rng.choice(corpus.ts_lib()), "ts"
                decoys.add("vendored")
            else:
                fn = rng.choice(corpus.stdlib())
                code, fence = fn["code"], "python"
                if rng.random() < 0.3:
                    decoys.add("vendored")
                else:
                    code = self._rename(code)
            user = f"{rng.choice(phrases.CODE_ASK[lang])}\n\n```{fence}\n{code}\n```"
            private = "" if decoys else code
        else:
            code, fence = earlier_code, "python"
            private = self._body(1, 2)
            user = f"{private}\n{rng.choice(phrases.CODE_ASK[lang])}"
            decoys.add("session_resend")
        revised = self._revise(code)
        body = self._body(1, 3)
        answer = f"{rng.choice(phrases.OPENERS[lang])}{phrases.CODE_LEAD[lang]}\n\n```{fence}\n{revised}\n```\n\n{body}"
        return Turn(user, private, answer, revised + "\n```\n\n" + body, "code", decoys)

    def _rename(self, code: str) -> str:
        m = re.search(r"def (\w+)\(([^)]*)\)", code)
        if not m:
            return code
        names = [m.group(1)] + [a.strip().split("=")[0].split(":")[0].strip("* ") for a in m.group(2).split(",")]
        names = [n for n in names if n and n not in ("self", "cls") and len(n) > 2][:3]
        stem = self.t.id.split("-")[0]
        for n in names:
            new = f"{stem}_{n}" if self.rng.random() < 0.5 else f"{n}_{self.rng.choice(self.sl.names).lower()}"
            new = re.sub(r"\W", "_", new)
            code = re.sub(rf"\b{re.escape(n)}\b", new, code)
        return code

    def _revise(self, code: str) -> str:
        lines = code.splitlines()
        note = fragment(self.rng, self._body(1, 1), 3, 8).replace("\n", " ")
        at = min(len(lines), 1 + self.rng.randrange(max(1, len(lines) - 1)))
        indent = re.match(r"\s*", lines[min(at, len(lines) - 1)]).group(0)  # type: ignore[union-attr]
        return "\n".join([*lines[:at], f"{indent}# {note}", *lines[at:]])

    def summarise(self) -> Turn:
        rng, lang = self.rng, self.lang
        if rng.random() < 0.25:
            doc = join(lang, [_public_paste(rng, lang) for _ in range(rng.randint(2, 4))])
            decoys, private = {"public_doc", "public_echo"}, ""
        else:
            doc = self._body(10, 28)
            decoys, private = set(), doc
        user = f"{phrases.SUMMARISE[lang]}\n\n{doc}"
        body = join(lang, [fragment(rng, doc, 8, 22) for _ in range(rng.randint(2, 4))])
        return Turn(user, private, phrases.SUMMARY_LEAD[lang] + body, body, lang, decoys)

    def huge_document(self) -> str:
        """What a user pastes when the prompt runs over the window: a long export of the tenant's own text."""
        return join(self.lang, self.sl.draw(self.rng, 400))

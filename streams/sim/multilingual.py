"""The multilingual profile: Chinese, Japanese, German, English and code tenants, multi-turn sessions that
re-send their history, public-text decoys, and two bug classes.

- `mechanism` (the GLM-5.3 placeholder fault, fault-prone pools glm53-pd-*): an over-long prompt within the
  window is answered from stale pages with input_tokens=1 and a collapsed TTFT.
- `content_only` (a prefix-cache / page-table mix-up, pool glm53-pc-1): prompts within capacity, right token
  accounting, normal TTFT, and an answer that holds 1–3 stale page fragments of 16–64 tokens of other
  tenants' recent private text, cut at arbitrary token boundaries between the model's own text. The client
  cannot tell, so the answer joins the session's history and is re-sent in later turns.

Decoys (all labelled clean): public documents and quotes pasted by several tenants over time and echoed
unprompted by the model, the same translation source, shared RAG passages, greetings and stock phrases in
every language, shared system prompts, vendored files, and sessions re-sending their own history.
Token counts follow tokens.py (1 CJK character ≈ 1 token, 1 word ≈ 1.3 tokens).
"""

from __future__ import annotations

import math
import random
from collections import deque
from typing import Any

from streams.sim import lexicon, public
from streams.sim.corpus import corpus, window, words_of
from streams.sim.engine import Engine
from streams.sim.lexicon import CJK_LANGS
from streams.sim.tokens import approx_tokens, cut, unit_spans
from streams.sim.world import Block, CacheDomain, Page, Session, Tenant

LANG_WEIGHTS = {"zh": 0.30, "en": 0.25, "ja": 0.15, "de": 0.15, "code": 0.15}


def _length_class(tokens: float) -> str:
    return "short" if tokens < 16 else "page" if tokens <= 64 else "long"


class MultilingualSimulator(Engine):
    profile = "multilingual"

    # -- world ------------------------------------------------------------------------------------

    def _build_world(self, rng: random.Random) -> None:
        self.code = corpus()
        order = list(range(len(self.code.files)))
        rng.shuffle(order)
        self.popular = [i for i in order if 4_000 <= len(self.code.files[i].text) <= 12_000][:3]
        order = [i for i in order if i not in self.popular]
        self.library = public.PublicLibrary(rng, [self.code.files[i].text for i in self.popular])
        langs = list(LANG_WEIGHTS)
        for i in range(self.cfg.tenants):
            lang = langs[i] if i < len(langs) else rng.choices(langs, list(LANG_WEIGHTS.values()))[0]
            tid = f"tenant-{i + 1:03d}"
            t = Tenant(tid, rng.choice(public.SYSTEM_PROMPTS[lang]), [], rng.lognormvariate(0.0, 0.8), lang=lang)
            if lang == "code":
                t.repo = [order.pop() for _ in range(8) if order]
                t.entities = {"func": [f for i in t.repo for f in self.code.files[i].funcs[:6]] or ["main"]}
            else:
                t.entities = lexicon.entities(lang, f"{self.cfg.seed}:{tid}")
            self.tenants.append(t)

    def public_documents(self) -> list[str]:
        return self.library.documents()

    def _new_session(self, tenant: Tenant, domain: CacheDomain, rng: random.Random) -> Session:
        s = Session(
            session_id=f"sess-{rng.getrandbits(48):012x}",
            tenant=tenant,
            domain=domain,
            files=rng.sample(tenant.repo, min(len(tenant.repo), rng.randint(1, 3))),
            turns_left=1 + int(rng.expovariate(1 / 5)),
            history=deque(maxlen=8),
        )
        if tenant.lang != "code":
            # Chat-sized: a short note or message most of the time, sometimes a long document.
            n_docs = rng.choices((0, 1, 2), (0.25, 0.55, 0.2))[0]
            for _ in range(n_docs):
                size = rng.randint(40, 300) if rng.random() < 0.6 else int(rng.lognormvariate(math.log(1500), 0.8))
                s.docs.append(lexicon.document(rng, tenant.lang, min(size, 12_000), tenant.entities))
        tenant.sessions.append(s)
        return s

    def _new_probe_session(self, probe: Tenant, domain: CacheDomain, rng: random.Random, marker: str) -> Session:
        doc = " ".join(
            f"{lexicon.sentence(rng, 'en')} Reference {marker}." if j % 2 == 0 else lexicon.sentence(rng, "en")
            for j in range(60)
        )
        return Session(f"sess-{rng.getrandbits(48):012x}", probe, domain, [], 6, marker=marker, docs=[doc])

    # -- prompt -----------------------------------------------------------------------------------

    def _entity(self, rng: random.Random, tenant: Tenant) -> str:
        kind = rng.choice(tuple(tenant.entities)) if tenant.entities else None
        return rng.choice(tenant.entities[kind]) if kind else "it"

    def _user_turn(self, rng: random.Random, session: Session, decoys: set[str]) -> tuple[list[Block], list[str]]:
        """The new user message as blocks, and the shared (public) texts it carries."""
        tenant, lang = session.tenant, session.tenant.lang
        x = self._entity(rng, tenant)
        blocks: list[Block] = []
        shared: list[str] = []
        if session.marker is not None:
            msg = f"Canary check {session.marker}. Please summarise the notes below."
            return [Block(msg + "\n", True), Block(session.docs[0] + "\n", True)], shared
        first = session.turn == 1
        pool = lexicon.QUESTIONS[lang] if first or rng.random() < 0.3 else lexicon.FOLLOW_UPS[lang]
        msg = rng.choice(pool).format(x=x)
        blocks.append(Block(msg + "\n", False))  # templates are shared; the tenant's entity is short
        if first:
            if lang == "code":
                for i in session.files:
                    f = self.code.files[i]
                    blocks.append(Block(f"### File: {f.path}\n```python\n{window(rng, f.text, 6_000)}\n```\n", True))
            blocks += [Block(d + "\n", True) for d in session.docs]
        r = rng.random
        if r() < 0.10:
            doc = self.library.pick(rng, rng.choice(("licence", "quote", "quote", "news")))
            shared.append(doc.text)
            decoys.add("public_doc")
            blocks.append(Block(f"{lexicon.SUMMARISE_PUBLIC[lang]}\n{doc.text}\n", False))
        if lang != "code" and r() < 0.07:
            src = self.library.pick(
                rng, "translation_source", rng.choice([g for g in ("zh", "ja", "de", "en") if g != lang])
            )
            shared.append(src.text)
            decoys.add("translation")
            blocks.append(Block(f"{lexicon.TRANSLATE[lang]}\n{src.text}\n", False))
        if r() < 0.15:
            passages = [
                self.library.pick(rng, "rag", lang if lang != "code" else "en") for _ in range(rng.randint(1, 3))
            ]
            shared += [p.text for p in passages]
            decoys.add("rag")
            blocks.append(Block(lexicon.RAG_HEADER[lang] + "\n" + "\n\n".join(p.text for p in passages) + "\n", False))
        if lang == "code" and r() < 0.3:
            doc = self.library.pick(rng, "vendored")
            shared.append(doc.text)
            decoys.add("vendored")
            blocks.append(Block(f"### File: vendor/{len(doc.text)}.py\n```python\n{doc.text}\n```\n", False))
        return blocks, shared

    # -- output -----------------------------------------------------------------------------------

    def _own_text(self, rng: random.Random, tenant: Tenant, paragraphs: int) -> str:
        lang = "en" if tenant.lang == "code" else tenant.lang
        return "\n\n".join(lexicon.paragraph(rng, lang, tenant.entities, rng.randint(2, 5)) for _ in range(paragraphs))

    def _excerpt(self, rng: random.Random, text: str, lo: int, hi: int) -> str:
        """A run of lo..hi tokens from a random place in text (a char window first: texts can be long)."""
        span = 8 * hi  # chars: enough for hi tokens of any script
        skip = 0
        if len(text) > 2 * span:
            at = rng.randrange(0, len(text) - span)
            text, skip = text[at : at + span], 1 if at else 0  # the first unit may be cut: skip it
        spans = unit_spans(text)
        want = rng.randint(lo, hi)
        if len(spans) <= skip:
            return ""
        start = rng.randrange(skip, max(skip + 1, len(spans) - int(want / 1.3)))
        return cut(text, start, want, spans)[0]

    def _clean_output(
        self,
        rng: random.Random,
        session: Session,
        private_docs: list[str],
        shared: list[str],
        decoys: set[str],
        resent: list[str],
    ) -> tuple[list[str], list[str]]:
        """The model's answer as parts, and its private parts (what a freed page of it may hold). It recalls only
        the history this prompt re-sent (`resent`): a clean answer cannot quote what its context did not hold."""
        tenant, lang = session.tenant, session.tenant.lang
        parts: list[str] = []
        private: list[str] = []
        if rng.random() < 0.6:
            parts.append(rng.choice(public.GREETINGS[lang]))
            decoys.add("boilerplate")
        own = self._own_text(rng, tenant, rng.randint(1, 4))
        parts.append(own)
        private.append(own)
        if private_docs and rng.random() < 0.5:
            parts.append(lexicon.QUOTING[lang] + "\n" + self._excerpt(rng, rng.choice(private_docs), 20, 200))
        if shared and rng.random() < 0.6:
            # Quoting the public text the user pasted: shared with other tenants, explained by the prompt.
            parts.append(lexicon.QUOTING[lang] + "\n" + self._excerpt(rng, rng.choice(shared), 20, 120))
        if resent and rng.random() < 0.3:
            parts.append(lexicon.RECALL[lang] + "\n" + self._excerpt(rng, rng.choice(resent), 20, 120))
        if rng.random() < 0.04:
            # Echoed unprompted: famous text the model knows, in nobody's prompt here.
            doc = self.library.pick(rng, rng.choice(("quote", "quote", "licence")))
            parts.append(doc.text)
            decoys.add("public_echo")
        if rng.random() < 0.5:
            parts.append(rng.choice(public.CLOSINGS[lang]))
            decoys.add("boilerplate")
        if rng.random() < 0.1:
            parts.append(public.DISCLAIMERS[lang])
            decoys.add("boilerplate")
        return parts, private

    def _fragments(
        self, rng: random.Random, pool: list[Page], n: int, sizes: tuple[tuple[float, int, int], ...]
    ) -> list[dict[str, Any]]:
        """Up to n stale fragments cut at arbitrary token boundaries from pages of the pool."""
        out = []
        for page in rng.sample(pool, min(n, len(pool))):
            spans = unit_spans(page.text)
            r, want = rng.random(), 0
            for share, lo, hi in sizes:
                if r < share:
                    want = rng.randint(lo, hi)
                    break
                r -= share
            need = 0.0
            start = len(spans)
            while start > 0 and need < want:  # the latest start that still leaves `want` tokens
                start -= 1
                need += spans[start][2]
            text, tokens, units = cut(page.text, rng.randint(0, start), want, spans)
            if tokens < min(lo for _, lo, _ in sizes):
                continue
            out.append(
                {
                    "words": len(words_of(text)),
                    "units": units,
                    "length_class": _length_class(tokens),
                    "variant": "verbatim",
                    "source_tenant_id": page.tenant_id,
                    "source_session_id": page.session_id,
                    "source_request_id": page.request_id,
                    "text": text,
                }
            )
        return out

    def _pages(
        self, rng: random.Random, texts: list[str], owner: tuple[str, str, str], lang: str, n: int
    ) -> list[Page]:
        pages = []
        for _ in range(n):
            text = rng.choice(texts)
            chunk = self._excerpt(rng, text, 64, 600)
            if approx_tokens(chunk) >= 40:
                pages.append(Page(chunk, *owner, lang))
        return pages

    # -- one request ------------------------------------------------------------------------------

    def _prompt(
        self, rng: random.Random, session: Session, decoys: set[str]
    ) -> tuple[list[Block], list[Block], Any, str, int]:
        """The request's prompt: the system prompt, the re-sent history that fits, the user's turn, and for a huge
        paste its truncated head; (blocks, the user's blocks, what it shares, the text, its token count)."""
        cfg, tenant = self.cfg, session.tenant
        blocks = [Block(tenant.system_prompt + "\n\n", False)] if tenant.system_prompt else []
        room = cfg.max_prompt_text_chars // 2
        history: list[str] = []
        for h in reversed(session.history):  # re-sent context, newest kept when it does not all fit
            if len(h) > room:
                break
            history.insert(0, h)
            room -= len(h)
        if history:
            decoys.add("session_resend")
        user, shared = self._user_turn(rng, session, decoys)
        blocks += [Block(h, False) for h in history] + user
        prompt_text = "".join(b.text for b in blocks)
        prompt_tokens = approx_tokens(prompt_text)
        huge = (session.marker is not None and session.turn % cfg.probe_overlong_every == 0) or (
            session.marker is None and rng.random() < cfg.tail_share
        )
        if huge:
            # A whole repository or book pasted: the wire carries the producer's truncated head only.
            cap = min(d.capacity_tokens for d in self.cache_domains)
            lo = 300_000 if session.marker is None else cap + 2_048
            prompt_tokens = int(math.exp(rng.uniform(math.log(lo), math.log(1_200_000))))
            while len(prompt_text) < cfg.max_prompt_text_chars:
                more = self._own_text(rng, tenant, 6) if session.marker is None else session.docs[0]
                blocks.append(Block(more + "\n", True))
                prompt_text += more + "\n"
        prompt_text = prompt_text[: cfg.max_prompt_text_chars]
        return blocks, user, shared, prompt_text, prompt_tokens

    def _faulty(
        self, rng: random.Random, st: Any, session: Session, others: list[Page], label: dict[str, Any], request_id: str
    ) -> tuple[str, str, int, float]:
        """The placeholder fault's answer: stale pages of earlier requests (this tenant's other sessions a quarter of
        the time); (output, finish reason, input tokens, ttft)."""
        tenant = session.tenant
        in_tokens, ttft_ms = 1, rng.uniform(20.0, 80.0)
        same = [p for p in st.pages if p.tenant_id == tenant.tenant_id and p.session_id != session.session_id]
        pool = same if same and (rng.random() < 0.25 or not others) else others
        sizes = ((0.07, 8, 15), (0.15, 16, 24), (0.78, 50, 400))
        leaks = self._fragments(rng, pool, rng.choices((1, 2, 3, 4), (0.3, 0.35, 0.25, 0.1))[0], sizes)
        parts = [rng.choice(public.GREETINGS[tenant.lang])] if rng.random() < 0.6 else []
        parts += [p["text"] for p in leaks] or [self._own_text(rng, tenant, 2)]
        output = "\n\n".join(parts)
        if leaks:
            self._label_leak(label, tenant.tenant_id, leaks, request_id, "mechanism")
        finish = "stop" if rng.random() < 0.85 else "length"
        return output, finish, in_tokens, ttft_ms

    def _request(self, t: float, session: Session) -> None:
        rng, request_id = self._begin_request(t, session)
        answer: str | None = None
        tenant, domain = session.tenant, session.domain
        st = self.domains[domain.name]
        self._take_turn(session)
        decoys: set[str] = set()
        blocks, user, shared, prompt_text, prompt_tokens = self._prompt(rng, session, decoys)
        self._push_request(rng, t, session, request_id, prompt_text, prompt_tokens, (4_096, 8_192, 16_384))

        overlong = prompt_tokens > domain.capacity_tokens
        faulty = overlong and prompt_tokens <= domain.context_window and domain.fault_prone and self._fault_on(t)
        label = self._label(request_id, session, overlong)
        resp: dict[str, Any] = {
            "type": "response",
            "request_id": request_id,
            "tenant_id": tenant.tenant_id,
            "model": domain.model,
            "cache_domain": domain.name,
            "session_id": session.session_id,
        }
        owner = (tenant.tenant_id, session.session_id, request_id)
        pages: list[Page] = []
        if prompt_tokens > domain.context_window or (overlong and not faulty):
            status = 400 if prompt_tokens > domain.context_window or rng.random() < 0.5 else 413
            resp.update(status_code=status, duration_ms=round(rng.uniform(3.0, 40.0), 3))
            label["status_code"] = status
        else:
            others = [p for p in st.pages if p.tenant_id != tenant.tenant_id]
            if faulty:
                output, finish, in_tokens, ttft_ms = self._faulty(rng, st, session, others, label, request_id)
            else:
                in_tokens = max(1, round(prompt_tokens * (1.0 + rng.uniform(-0.03, 0.03))))
                ttft_ms = prompt_tokens / rng.uniform(20_000.0, 60_000.0) * 1000.0 + rng.uniform(20.0, 90.0)
                private_docs = [b.text for b in user if b.private]
                resent = [h for h in session.history if h in prompt_text]
                parts, private = self._clean_output(rng, session, private_docs, shared, decoys, resent)
                stale = domain.stale_page_rate > 0 and self._fault_on(t) and rng.random() < domain.stale_page_rate
                if stale and others:
                    leaks = self._fragments(rng, others, rng.choice((1, 1, 2, 3)), ((1.0, 16, 64),))
                    for leak in leaks:  # between the model's own text, never first
                        parts.insert(rng.randint(1, len(parts)), leak["text"])
                    if leaks:
                        self._label_leak(label, tenant.tenant_id, leaks, request_id, "content_only")
                sep = "" if tenant.lang in CJK_LANGS and rng.random() < 0.5 else "\n\n"
                output = sep.join(parts)
                finish = rng.choices(("stop", "tool_calls", "length"), (0.8, 0.15, 0.05))[0]
                if domain.fault_prone or domain.stale_page_rate > 0:
                    n_pages = 8 if session.marker is None else 24  # canary documents are planted densely
                    texts = private_docs + [b.text for b in blocks if b.private and b not in user]
                    pages = self._pages(rng, texts, owner, tenant.lang, n_pages) if texts else []
                    pages += self._pages(rng, private, owner, tenant.lang, 2)
                # The client cannot see a content-only leak: the answer joins the history and is re-sent.
                user_text = "".join(b.text for b in user)
                answer = f"{user_text}\n{output}\n"
            label["decoys"] = sorted(decoys)
            if not label["contaminated"] and decoys:
                label["scenario"] = "decoy"
            out_tokens = approx_tokens(output)
            duration_ms = ttft_ms + out_tokens / rng.uniform(40.0, 110.0) * 1000.0
            self._answered(
                t, st, resp, label, tenant.tenant_id, output, finish, in_tokens, out_tokens, ttft_ms, duration_ms
            )
        self._respond(t, session, resp, label, pages, answer)

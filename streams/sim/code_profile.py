"""The stdlib-code profile: coding agents on real Python source, and the GLM-5.3 placeholder fault.

Prompts longer than the prefill KV pool (681,280 tokens) but within the advertised window (1,048,576) are
swapped for a one-token placeholder and still decoded on the fault-prone pools; the decoder reads stale KV
pages of earlier requests and returns their content with HTTP 200, input_tokens=1 and a collapsed TTFT.
"""

from __future__ import annotations

import math
import random
from typing import Any

from streams.sim.corpus import (
    _WORD,
    BEFORE_CODE,
    CLOSINGS,
    OPENINGS,
    SYSTEM_HEADERS,
    USER_TEMPLATES,
    corpus,
    head,
    length_class,
    prose,
    window,
)
from streams.sim.engine import Engine
from streams.sim.world import (
    CHARS_PER_TOKEN,
    PROBES,
    Block,
    CacheDomain,
    DomainState,
    Page,
    Session,
    Tenant,
)


class CodeSimulator(Engine):
    profile = "stdlib-code"

    def _build_world(self, rng: random.Random) -> None:
        self.corpus = corpus()
        cfg = self.cfg
        order = list(range(len(self.corpus.files)))
        rng.shuffle(order)
        n_sys = len(SYSTEM_HEADERS)
        sys_files, order = order[:n_sys], order[n_sys:]
        # A few moderately sized "vendored" files that many tenants paste: they become common (seen in
        # several tenants) quickly, as popular open-source code does in real traffic.
        self.popular = [i for i in order if 4_000 <= len(self.corpus.files[i].text) <= 16_000][:6]
        order = [i for i in order if i not in self.popular]
        probe_files, order = order[: 2 * len(PROBES)], order[2 * len(PROBES) :]
        self.system_prompts = [
            f"{header}\n\n# Reference: {self.corpus.files[f].path}\n{window(rng, self.corpus.files[f].text, 2_500)}\n"
            for header, f in zip(SYSTEM_HEADERS, sys_files, strict=True)
        ]
        # Skewed popularity of system prompts, but with a floor, so each is used by several tenants.
        sys_weights = [0.4, 0.3, 0.2, 0.1][:n_sys]
        self.tenants = []
        for i in range(cfg.tenants):
            sp = i % n_sys if i < 2 * n_sys else rng.choices(range(n_sys), sys_weights)[0]
            self.tenants.append(
                Tenant(
                    tenant_id=f"tenant-{i + 1:03d}",
                    system_prompt=self.system_prompts[sp],
                    repo=[],
                    weight=rng.lognormvariate(0.0, 0.8),
                    lang="code",
                )
            )
        # Deal the remaining files round-robin; with more tenants than files repos wrap and overlap.
        per = max(2, min(24, len(order) // cfg.tenants))
        for i, t in enumerate(self.tenants):
            t.repo = [order[(i * per + j) % len(order)] for j in range(per)]
        for i, p in enumerate(self.probes):
            p.probe_files = probe_files[2 * i : 2 * i + 2]
            p.lang = "code"  # probes paste code here, like everybody
        self.fault_prone = [d for d in self.cache_domains if d.fault_prone]

    def public_documents(self) -> list[str]:
        # The vendored files many tenants paste: public open-source code.
        return [self.corpus.files[i].text for i in self.popular]

    def _new_probe_session(self, probe: Tenant, domain: CacheDomain, rng: random.Random, marker: str) -> Session:
        return Session(
            session_id=f"sess-{rng.getrandbits(48):012x}",
            tenant=probe,
            domain=domain,
            files=list(probe.probe_files),
            turns_left=6,
            marker=marker,
        )

    def _new_session(self, tenant: Tenant, domain: CacheDomain, rng: random.Random) -> Session:
        k = min(len(tenant.repo), rng.randint(2, 6))
        files = rng.sample(tenant.repo, k)
        if rng.random() < 0.35:
            files.append(rng.choice(self.popular))
        s = Session(
            session_id=f"sess-{rng.getrandbits(48):012x}",
            tenant=tenant,
            domain=domain,
            files=files,
            turns_left=1 + int(rng.expovariate(1 / 11)),
        )
        tenant.sessions.append(s)
        return s

    def _prompt_tokens(self, rng: random.Random, session: Session) -> int:
        if session.marker is not None:
            if session.turn % self.cfg.probe_overlong_every == self.cfg.probe_overlong_every - 1:
                cap = min(d.capacity_tokens for d in self.cache_domains)
                window = session.domain.context_window
                return rng.randint(cap + 2_048, max(cap + 2_048, window - 2_048))
            return rng.randint(1_500, 20_000)
        if rng.random() < self.cfg.tail_share:
            return int(math.exp(rng.uniform(math.log(300_000), math.log(1_200_000))))
        return max(150, min(280_000, int(rng.lognormvariate(math.log(6_000), 1.25))))

    # -- prompt -----------------------------------------------------------------------------------

    def _file_block(self, idx: int, marker: str | None) -> str:
        f = self.corpus.files[idx]
        text = f.text
        if marker is not None:
            # Marker every ~10 lines, so any stale page of a probe prompt is likely to carry one.
            lines = text.split("\n")
            text = "\n".join(line if j % 10 else f"# probe reference {marker}\n{line}" for j, line in enumerate(lines))
        return f"### File: {f.path}\n```python\n{text}\n```\n"

    def _user_message(self, rng: random.Random, session: Session) -> str:
        f = self.corpus.files[rng.choice(session.files)]
        msg = rng.choice(USER_TEMPLATES).format(func=rng.choice(f.funcs), file=f.path)
        msg += " " + prose(rng, self.corpus, rng.randint(1, 3))
        if session.marker is not None:
            msg = f"Canary check {session.marker}. Keep the reference {session.marker} verbatim in your notes. " + msg
        return f"### User\n{msg}\n"

    def _build_prompt(self, rng: random.Random, session: Session, budget: int) -> list[Block]:
        """Blocks of the prompt text, about `budget` characters in all (less only if the repo runs out)."""
        tenant = session.tenant
        user = self._user_message(rng, session)
        system = tenant.system_prompt if session.marker is None else ""
        if budget < len(system) + len(user) + 400:
            # Small side calls (titles, summaries) go without the agent's system prompt.
            room = max(0, budget - len(user) - 1)
            snippet = window(rng, self.corpus.files[rng.choice(session.files)].text, room) if room > 200 else ""
            blocks = [Block(user, True)]
            if snippet:
                blocks.insert(0, Block(snippet[:room] + "\n", session.files[0] not in self.popular))
            return blocks
        room = budget - len(system) - len(user)
        chosen_hist: list[str] = []
        for h in reversed(session.history):
            if len(h) > room * 0.5:
                break
            chosen_hist.insert(0, h)
            room -= len(h)
        file_blocks: list[Block] = []
        extra = [f for f in tenant.repo if f not in session.files]
        rng.shuffle(extra)
        more_popular = [f for f in self.popular if f not in session.files]
        candidates = session.files + (extra if session.marker is None else []) + rng.sample(more_popular, 2)
        for idx in candidates:
            if room < 300:
                break
            block = self._file_block(idx, session.marker)
            if len(block) > room:
                block = head(block, room - 5) + "\n```\n"
            file_blocks.append(Block(block, idx not in self.popular))
            room -= len(block)
        blocks = [Block(system, False)] if system else []
        # History repeats earlier answers, which may quote shared files and stock phrases; their private
        # parts were already freed as pages when those answers completed, so history is not private here.
        return blocks + file_blocks + [Block(h, False) for h in chosen_hist] + [Block(user, True)]

    # -- output -----------------------------------------------------------------------------------

    def _clean_output(self, rng: random.Random, blocks: list[Block]) -> tuple[str, list[str]]:
        """Assistant answer: stock phrases, quotes of its own (included) prompt, fresh prose.

        Returns the text and its private parts (what a freed page of this output may hold).
        """
        parts = [rng.choice(OPENINGS)]
        private: list[str] = []
        fresh = prose(rng, self.corpus, rng.randint(1, 4))
        parts.append(fresh)
        private.append(fresh)
        quotable = [b for b in blocks if b.text.startswith("### File") or b.private]
        for _ in range(rng.randint(1, 3) if quotable else 0):
            b = rng.choice(quotable)
            body = b.text.split("\n", 2)[-1] if b.text.startswith("### File") else b.text
            quote = window(rng, body, rng.randint(200, 1_800)).strip("\n`")
            if not quote.strip():
                continue
            parts.append(f"{rng.choice(BEFORE_CODE)}\n```python\n{quote}\n```")
            if b.private:
                private.append(quote)
            if rng.random() < 0.5:
                more = prose(rng, self.corpus, rng.randint(1, 3))
                parts.append(more)
                private.append(more)
        parts.append(rng.choice(CLOSINGS))
        return "\n\n".join(parts), private

    def _stale_output(
        self, rng: random.Random, session: Session, st: DomainState
    ) -> tuple[str, list[dict[str, Any]]] | None:
        """What the decoder produces from stale pages; None if the pool holds nothing of anyone else."""
        recent = list(st.pages)
        tenant_id = session.tenant.tenant_id
        same_tenant = [p for p in recent if p.tenant_id == tenant_id and p.session_id != session.session_id]
        others = [p for p in recent if p.tenant_id != tenant_id]
        pool = same_tenant if same_tenant and (rng.random() < 0.25 or not others) else others
        if not pool:
            return None
        n = min(len(pool), rng.choices((1, 2, 3, 4), (0.3, 0.35, 0.25, 0.1))[0])
        parts: list[str] = [rng.choice(OPENINGS)] if rng.random() < 0.6 else []
        passages: list[dict[str, Any]] = []
        for page in rng.sample(pool, n):
            spans = [m.span() for m in _WORD.finditer(page.text)]
            if len(spans) < 8:
                continue
            r = rng.random()
            # Mostly long runs (stale pages hold long runs); some right at the detector's 16-word guarantee,
            # a few below it, so recall can be judged by passage length.
            if r < 0.07:
                want = rng.randint(8, 15)
            elif r < 0.22:
                want = rng.randint(16, 24)
            else:
                want = rng.randint(50, 400)
            want = min(want, len(spans))
            s = rng.randrange(0, len(spans) - want + 1)
            text = page.text[spans[s][0] : spans[s + want - 1][1]]
            v = rng.random()
            variant = "verbatim" if v < 0.5 else "lower" if v < 0.7 else "respaced" if v < 0.9 else "lower+respaced"
            shown = text
            if "lower" in variant:
                shown = shown.lower()
            if "respaced" in variant:
                toks = shown.split()
                seps = [rng.choice((" ", "  ", "\n", " \n  ", "   ")) for _ in toks[1:]]
                shown = toks[0] + "".join(sep + tok for sep, tok in zip(seps, toks[1:], strict=True))
            parts.append(shown)
            if rng.random() < 0.3:
                parts.append(prose(rng, self.corpus, 1))
            passages.append(
                {
                    "words": want,
                    "length_class": length_class(want),
                    "variant": variant,
                    "source_tenant_id": page.tenant_id,
                    "source_session_id": page.session_id,
                    "source_request_id": page.request_id,
                    "text": shown,
                }
            )
        if not passages:
            return None
        if rng.random() < 0.5:
            parts.append(rng.choice(CLOSINGS))
        return "\n\n".join(parts), passages

    def _pages(self, rng: random.Random, texts: list[str], owner: tuple[str, str, str], limit: int) -> list[Page]:
        pages = []
        for _ in range(limit):
            text = rng.choice(texts)
            chunk = window(rng, text, rng.randint(400, 2_800)).strip()
            # A KV page run worth the name; tiny fragments would make "long" leaks that are not.
            if len(_WORD.findall(chunk)) >= 40:
                pages.append(Page(chunk, *owner))
        return pages

    # -- one request ------------------------------------------------------------------------------

    def _placeholder(
        self, rng: random.Random, stale: Any, label: dict[str, Any], request_id: str, tenant: Any
    ) -> tuple[str, int, float, int, str]:
        """The fault's answer: the one-token placeholder has nothing to prefill, so the first token comes at once; the
        output is the stale pages read (labelled) or prose. (output, input tokens, ttft, output tokens, finish)."""
        in_tokens = 1
        ttft_ms = rng.uniform(20.0, 80.0)
        if stale is None:
            output = prose(rng, self.corpus, rng.randint(2, 6))
        else:
            output, passages = stale
            self._label_leak(label, tenant.tenant_id, passages, request_id, "mechanism")
        out_tokens = max(1, math.ceil(len(output) / CHARS_PER_TOKEN))
        finish = "stop" if rng.random() < 0.85 else "length"
        return output, in_tokens, ttft_ms, out_tokens, finish

    def _request(self, t: float, session: Session) -> None:
        rng, request_id = self._begin_request(t, session)
        answer: str | None = None
        cfg = self.cfg
        tenant = session.tenant
        domain = session.domain
        st = self.domains[domain.name]
        prompt_tokens = self._prompt_tokens(rng, session)
        self._take_turn(session)
        budget = min(prompt_tokens * CHARS_PER_TOKEN, cfg.max_prompt_text_chars)
        blocks = self._build_prompt(rng, session, budget)
        prompt_text = "".join(b.text for b in blocks)
        if prompt_tokens * CHARS_PER_TOKEN <= cfg.max_prompt_text_chars:
            # The whole prompt is on the wire, so the gateway's count follows from it.
            prompt_tokens = max(1, math.ceil(len(prompt_text) / CHARS_PER_TOKEN))
        max_out = rng.choice((4_096, 8_192, 16_384, 32_768))
        self._push_request(rng, t, session, request_id, prompt_text, prompt_tokens, max_out)

        overlong = prompt_tokens > domain.capacity_tokens
        faulty = (
            overlong
            and prompt_tokens <= domain.context_window
            and domain.fault_prone
            and self.fault_onset is not None
            and t >= self.fault_onset
        )
        label = self._label(request_id, session, overlong)
        resp: dict[str, Any] = {
            "type": "response",
            "request_id": request_id,
            "tenant_id": tenant.tenant_id,
            "model": domain.model,
            "cache_domain": domain.name,
            "session_id": session.session_id,
        }
        pages: list[Page] = []
        owner = (tenant.tenant_id, session.session_id, request_id)
        if prompt_tokens > domain.context_window or (overlong and not faulty):
            status = 400 if prompt_tokens > domain.context_window or rng.random() < 0.5 else 413
            duration_ms = rng.uniform(3.0, 40.0)
            resp.update(status_code=status, duration_ms=round(duration_ms, 3))
            label["status_code"] = status
        else:
            decode_rate = rng.uniform(40.0, 110.0)
            stale = self._stale_output(rng, session, st) if faulty else None
            if faulty:
                output, in_tokens, ttft_ms, out_tokens, finish = self._placeholder(
                    rng, stale, label, request_id, tenant
                )
            else:
                in_tokens = max(1, round(prompt_tokens * (1.0 + rng.uniform(-0.03, 0.03))))
                ttft_ms = prompt_tokens / rng.uniform(20_000.0, 60_000.0) * 1000.0 + rng.uniform(20.0, 90.0)
                output, private = self._clean_output(rng, blocks)
                out_tokens = max(1, math.ceil(len(output) / CHARS_PER_TOKEN))
                finish = rng.choices(("stop", "tool_calls", "length"), (0.65, 0.3, 0.05))[0]
                if domain.fault_prone:
                    prompt_private = [b.text for b in blocks if b.private]
                    n_pages = 8 if session.marker is None else 24  # canary documents are planted densely
                    pages = self._pages(rng, prompt_private, owner, n_pages) if prompt_private else []
                    pages += self._pages(rng, private, owner, 2)
                # Only answers the client could use become history: failed and garbled ones are retried.
                answer = f"### Assistant\n{output}\n"
            duration_ms = ttft_ms + out_tokens / decode_rate * 1000.0
            self._answered(
                t, st, resp, label, tenant.tenant_id, output, finish, in_tokens, out_tokens, ttft_ms, duration_ms
            )
        self._respond(t, session, resp, label, pages, answer)

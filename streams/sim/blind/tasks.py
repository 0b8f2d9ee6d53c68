"""What tenants do in a session, turn by turn: the prompt they send (history included) and the answer.

Six kinds of session: chat about the tenant's own documents, RAG over the shared public collection, agents
(crewai, llama-index ReAct, autogen tool calls), translation of the tenant's UI strings, code help, and
summaries of pasted text (public news and quotes, or the tenant's own reviews and docs).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from streams.sim.blind.data import Doc, sentences, units
from streams.sim.blind.model import Message, Model, Seg, joiner
from streams.sim.blind.phrasing import ASK, LANG_NAMES
from streams.sim.blind.world import Tenant, World

# One tool pack per agent framework, used by every tenant on that framework.
TOOLS = [
    ("search_knowledge_base", "Search the knowledge base and return the most relevant passages.", "query"),
    ("get_ticket", "Fetch a support ticket by its id.", "ticket_id"),
    ("run_sql_query", "Run a read-only SQL query against the analytics database.", "sql"),
    ("read_file", "Read a file from the project repository.", "path"),
    ("web_search", "Search the web and return titles, links and snippets.", "query"),
]
MAX_HISTORY_UNITS = 5000


@dataclass
class Session:
    key: str
    id: str | None
    tenant: Tenant
    task: str
    domain: int
    turns: int
    lang: str
    docs: list[Doc]
    system: list[Message] = field(default_factory=list)
    history: list[Message] = field(default_factory=list)
    step: int = 0
    target: str | None = None
    template: str = ""
    observations: list[Seg] = field(default_factory=list)
    task_segs: list[Seg] = field(default_factory=list)


@dataclass
class Turn:
    messages: list[Message]
    answer: list[Seg]
    answer_lang: str
    decoys: set[str]
    max_output: int
    regen: Callable[[random.Random], list[Seg]]
    user: list[Message]
    finish: str = "stop"
    after: list[Message] = field(default_factory=list)  # what the client appends after the answer (tool results)


def ask(lang: str, kind: str, rnd: random.Random, **fmt: str) -> Seg:
    return Seg(rnd.choice(ASK.get(lang, ASK["en"])[kind]).format(**fmt), None, "stock")


def excerpt(doc: Doc, rnd: random.Random, lo: int = 80, hi: int = 320) -> Seg:
    """A passage of a document as a user pastes it: whole lines or sentences, lo..hi units."""
    lines = doc.text.splitlines() if doc.kind in ("catalog", "review", "code") else sentences(doc.text, doc.lang)
    if not lines:
        return Seg(doc.text[:2000], doc.owner, "private" if doc.owner else "public")
    i = rnd.randrange(len(lines))
    out, n = [], 0
    target = rnd.randint(lo, hi)
    while i < len(lines) and n < target:
        out.append(lines[i])
        n += len(units(lines[i]))
        i += 1
    sep = "\n" if doc.kind in ("catalog", "review", "code") else joiner(doc.lang)
    return Seg(sep.join(out), doc.owner, "private" if doc.owner else "public")


def fill(template: str, values: dict[str, Seg]) -> list[Seg]:
    """A shared template with the tenant's own text in its slots."""
    out: list[Seg] = []
    rest = template.replace("{{", "\x00").replace("}}", "\x01")
    while True:
        i = rest.find("{")
        if i < 0:
            break
        j = rest.find("}", i)
        name = rest[i + 1 : j]
        out.append(Seg(rest[:i], None, "template"))
        out.append(values.get(name, Seg("", None, "template")))
        rest = rest[j + 1 :]
    out.append(Seg(rest, None, "template"))
    for s in out:
        s.text = s.text.replace("\x00", "{").replace("\x01", "}")
    return [s for s in out if s.text]


def _tools_text(framework: str) -> str:
    if framework == "autogen":
        return json.dumps(
            [
                {
                    "type": "function",
                    "function": {
                        "name": n,
                        "description": d,
                        "parameters": {"type": "object", "properties": {a: {"type": "string"}}, "required": [a]},
                    },
                }
                for n, d, a in TOOLS
            ]
        )
    return "\n".join(
        f"Tool Name: {n}\nTool Arguments: {{'{a}': {{'type': 'str'}}}}\nTool Description: {d}" for n, d, a in TOOLS
    )


def start(world: World, tenant: Tenant, task: str, rnd: random.Random, key: str, sid: str | None) -> Session:
    turns = {"chat": (1, 6), "rag": (1, 2), "agent": (2, 6), "translate": (1, 3), "code": (1, 4), "summarise": (1, 2)}
    lo, hi = turns[task]
    docs = rnd.sample(tenant.docs, min(3, len(tenant.docs))) if tenant.docs else []
    s = Session(key, sid, tenant, task, tenant.home, rnd.randint(lo, hi), tenant.lang, docs)
    t = world.templates
    if task == "chat":
        if tenant.framework == "crewai" and rnd.random() < 0.5:
            p = tenant.persona
            s.system = [
                Message(
                    "system",
                    fill(
                        t["crewai.role_playing"],
                        {k: Seg(p[k], tenant.id, "private") for k in ("role", "backstory", "goal")},
                    ),
                )
            ]
            s.template = "crewai.role_playing"
        elif rnd.random() < 0.7:
            s.system = [Message("system", [Seg(t["crewai.conversational_system_prompt"], None, "template")])]
            s.template = "crewai.conversational_system_prompt"
    elif task == "agent":
        _agent_system(world, s, rnd)
    elif task == "code" and rnd.random() < 0.4:
        s.system = [Message("system", [Seg(t["autogen.assistant_system_message"], None, "template")])]
        s.template = "autogen.assistant_system_message"
    elif task == "translate":
        s.target = _target(world, tenant, rnd)
    return s


def _target(world: World, tenant: Tenant, rnd: random.Random) -> str:
    if tenant.lang != "en":
        return "en"
    # a deployment whose customers seldom write Japanese seldom asks for Japanese
    counts = world.shape.counts()
    langs = ["ja", "zh", "de"]
    return rnd.choices(langs, weights=[counts[x] + 0.2 for x in langs])[0]


def _agent_system(world: World, s: Session, rnd: random.Random) -> None:
    t, tenant = world.templates, s.tenant
    names = ", ".join(n for n, _, _ in TOOLS)
    tools = Seg(_tools_text(tenant.framework), None, "template")
    if tenant.framework == "crewai":
        p = tenant.persona
        vals = {k: Seg(p[k], tenant.id, "private") for k in ("role", "backstory", "goal")}
        vals |= {"tools": tools, "tool_names": Seg(names, None, "template")}
        s.system = [Message("system", fill(t["crewai.lite_agent_system_prompt_with_tools"], vals))]
        s.template = "crewai.lite_agent_system_prompt_with_tools"
    elif tenant.framework == "react":
        vals = {"tool_desc": tools, "tool_names": Seg(names, None, "template"), "context_prompt": Seg("")}
        s.system = [Message("system", fill(t["llama_index.REACT_SYSTEM_HEADER"], vals))]
        s.template = "llama_index.REACT_SYSTEM_HEADER"
    else:
        s.system = [
            Message("system", [Seg(t["autogen.assistant_system_message"], None, "template")]),
            Message("tools", [tools]),
        ]
        s.template = "autogen.assistant_system_message"
    doc = rnd.choice(s.docs) if s.docs else None
    line = excerpt(doc, rnd, 8, 30) if doc else Seg("")
    s.task_segs = [ask(s.lang, "task", rnd), Seg("\n"), line]


def _trim(history: list[Message]) -> list[Message]:
    """Clients drop the oldest turns once the conversation gets long."""
    h = list(history)
    while len(h) > 2 and sum(len(units(m.text)) for m in h) > MAX_HISTORY_UNITS:
        h = h[2:]
    return h


def next_turn(world: World, model: Model, s: Session, rnd: random.Random) -> Turn:
    build = {
        "chat": _chat,
        "rag": _rag,
        "agent": _agent,
        "translate": _translate,
        "code": _code,
        "summarise": _summarise,
    }[s.task]
    turn = build(world, model, s, rnd)
    s.step += 1
    if any(m.role == "assistant" for m in turn.messages):
        turn.decoys.add("session_resend")
    if s.template:
        turn.decoys.add("shared_system_prompt")
    if any(seg.kind == "stock" for seg in turn.answer):
        turn.decoys.add("boilerplate")
    if any(seg.kind == "public" and seg.owner is None for seg in turn.answer):
        turn.decoys.add("public_doc")
    return turn


def _prompt(s: Session, user: list[Message]) -> list[Message]:
    return s.system + _trim(s.history) + user


def _chat(world: World, model: Model, s: Session, rnd: random.Random) -> Turn:
    doc = rnd.choice(s.docs) if s.docs else None
    paste = excerpt(doc, rnd) if doc and (s.step == 0 or rnd.random() < 0.4) else None
    if s.step == 0 or paste:
        typed = [ask(s.lang, "explain" if s.step == 0 else "followup", rnd)]
    else:
        prev = [m for m in s.history if m.role == "user"]
        quoted = model.quotes(rnd.choice(prev).segs[-1], s.lang, rnd, 1) if prev else []
        typed = [ask(s.lang, "followup", rnd), Seg("\n"), *quoted]
    user = [Message("user", typed + ([Seg("\n\n"), paste] if paste else []))]
    material = [paste] if paste else [seg for m in s.history if m.role == "user" for seg in m.segs if seg.owner][-2:]
    regen = lambda r: model.answer_about(material, typed, s.lang, r)  # noqa: E731
    return Turn(_prompt(s, user), regen(rnd), s.lang, set(), 1024, regen, user)


def _rag(world: World, model: Model, s: Session, rnd: random.Random) -> Turn:
    pool = world.rag.get(s.lang) or world.rag["en"]
    chunks = [Seg(pool[int(len(pool) * rnd.random() ** 2)], None, "public") for _ in range(rnd.choice((2, 3, 4)))]
    doc = rnd.choice(s.docs) if s.docs else None
    subject = excerpt(doc, rnd, 6, 20) if doc and rnd.random() < 0.5 else model.quotes(chunks[0], s.lang, rnd, 1)[0]
    query = [ask(s.lang, "question", rnd), Seg(" "), subject]
    ctx = Seg("\n\n".join(c.text for c in chunks), None, "public")
    user = [
        Message(
            "user",
            fill(
                world.templates["llama_index.DEFAULT_TEXT_QA_PROMPT_TMPL"],
                {"context_str": ctx, "query_str": Seg(" ".join(q.text for q in query), subject.owner, "private")},
            ),
        )
    ]
    regen = lambda r: model.answer_about(chunks, [subject], s.lang, r)  # noqa: E731
    return Turn(_prompt(s, user), regen(rnd), s.lang, {"rag"}, 1024, regen, user)


def _observation(world: World, s: Session, tool: str, arg: str, rnd: random.Random) -> Seg:
    doc = rnd.choice(s.docs) if s.docs else None
    if tool == "web_search" or doc is None:
        pool = world.news.get(s.lang) or world.news["en"]
        item = pool[int(len(pool) * rnd.random() ** 3)]
        return Seg(json.dumps([{"title": item[:60], "snippet": item[:600]}], ensure_ascii=False), None, "public")
    if tool == "read_file" and s.tenant.code:
        return excerpt(rnd.choice(s.tenant.code), rnd, 120, 400)
    if tool in ("get_ticket", "run_sql_query"):
        rows = [excerpt(doc, rnd, 5, 30).text for _ in range(rnd.randint(1, 4))]
        record = (
            {"id": arg, "rows": rows}
            if tool == "run_sql_query"
            else {"id": arg, "subject": rows[0], "body": "\n".join(rows[1:]), "status": "open"}
        )
        return Seg(json.dumps(record, ensure_ascii=False), s.tenant.id, "private")
    return excerpt(doc, rnd, 60, 200)


def _agent(world: World, model: Model, s: Session, rnd: random.Random) -> Turn:
    fw = s.tenant.framework
    if s.step == 0:
        task = s.task_segs
        user = [
            Message(
                "user",
                fill(
                    world.templates["crewai.task"],
                    {"input": Seg("".join(x.text for x in task), s.tenant.id, "private")},
                )
                if fw == "crewai"
                else task,
            )
        ]
    else:
        user = []
    final = s.step >= s.turns - 1
    if final:
        regen = lambda r: _final(model, s, r)  # noqa: E731
        finish = "stop"
    else:
        name, _, argname = rnd.choice(TOOLS)
        arg = s.task_segs[-1].text[:80] if argname in ("query", "sql") else f"{rnd.getrandbits(24):06x}"
        regen = lambda r: _tool_call(s, name, argname, arg, r)  # noqa: E731
        finish = "tool_calls" if fw == "autogen" else "stop"
    answer = regen(rnd)
    turn = Turn(_prompt(s, user), answer, s.lang, {"tool_call", "agent"}, 2048, regen, user, finish)
    if not final:
        obs = _observation(world, s, name, arg, rnd)
        s.observations.append(obs)
        role = "tool" if fw == "autogen" else "user"
        pre = [] if fw == "autogen" else [Seg("Observation: ", None, "template")]
        turn.after = [Message(role, [*pre, obs])]
        if obs.owner is None:
            turn.decoys.add("rag")
    return turn


def _tool_call(s: Session, name: str, argname: str, arg: str, rnd: random.Random) -> list[Seg]:
    if s.tenant.framework == "autogen":
        call = {
            "tool_calls": [
                {
                    "id": f"call_{rnd.getrandbits(96):024x}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps({argname: arg}, ensure_ascii=False)},
                }
            ]
        }
        return [Seg(json.dumps(call, ensure_ascii=False), s.tenant.id, "tool")]
    thought = "Thought: I need to use a tool to help me answer the question."
    return [
        Seg(f"{thought}\nAction: {name}\nAction Input: ", None, "stock"),
        Seg(json.dumps({argname: arg}, ensure_ascii=False), s.tenant.id, "tool"),
    ]


def _final(model: Model, s: Session, rnd: random.Random) -> list[Seg]:
    body = [
        Seg("Thought: I can answer without using any more tools.\n", None, "stock"),
        model.intro(s.lang, rnd, "final"),
    ]
    for obs in s.observations[-2:]:
        body += model.quotes(obs, s.lang, rnd, rnd.choice((1, 2)))
    return model.wrap(body, s.lang, rnd, opener=0.2, closer=0.3)


def _translate(world: World, model: Model, s: Session, rnd: random.Random) -> Turn:
    cats = [d for d in s.docs if d.kind == "catalog"] or [d for d in s.tenant.docs if d.kind == "catalog"]
    target = s.target or "en"
    doc = rnd.choice(cats) if cats else None
    entries = [(m, tr) for m, tr in (doc.entries if doc else []) if target == "en" or target in tr]
    if len(entries) < 2:
        s.task = "chat"
        return _chat(world, model, s, rnd)
    i = rnd.randrange(max(1, len(entries) - 4))
    batch = entries[i : i + rnd.randint(3, 10)]
    src = [m if s.lang == "en" else tr[s.lang] for m, tr in batch]
    out = [tr[target] if target != "en" else m for m, tr in batch]
    owner = s.tenant.id
    typed = ask(s.lang, "translate", rnd, target=LANG_NAMES.get(s.lang, LANG_NAMES["en"])[target])
    user = [Message("user", [typed, Seg("\n\n"), Seg("\n".join(src), owner, "private")])]
    pairs = [(Seg(x, owner, "private"), y) for x, y in zip(src, out, strict=True)]
    regen = lambda r: model.translation(pairs, target, r)  # noqa: E731
    hist = s.system + (_trim(s.history) if rnd.random() < 0.5 else [])
    return Turn(hist + user, regen(rnd), target, {"translation"}, 1024, regen, user)


def _code(world: World, model: Model, s: Session, rnd: random.Random) -> Turn:
    vendored = rnd.random() < 0.15 or not s.tenant.code
    doc = rnd.choice(world.vendored) if vendored else rnd.choice(s.tenant.code)
    lines = doc.text.splitlines()
    i = rnd.randrange(max(1, len(lines) - 40))
    body = "\n".join(lines[i : i + rnd.randint(30, 90)])
    code = Seg(body, None if vendored else s.tenant.id, "vendored" if vendored else "private")
    segs = [ask(s.lang, "code", rnd), Seg("\n\n```python\n")]
    decoys = {"code"} | ({"vendored"} if vendored else set())
    if s.tenant.licence_header and s.step == 0:
        segs.append(Seg("# " + s.tenant.licence_header.replace("\n", "\n# ") + "\n\n", None, "licence"))
        decoys.add("boilerplate")
    user = [Message("user", [*segs, code, Seg("\n```")])]
    regen = lambda r: model.code(code, s.lang, r)  # noqa: E731
    return Turn(_prompt(s, user), regen(rnd), "code", decoys, 4096, regen, user)


def _summarise(world: World, model: Model, s: Session, rnd: random.Random) -> Turn:
    public = rnd.random() < 0.55 or not s.docs
    if public:
        pool = world.news.get(s.lang) or world.news["en"]
        # what is in the news today: a few items many tenants paste
        k = 1 if s.lang == "zh" else rnd.randint(2, 5)
        text = "\n\n".join(pool[int(len(pool) * rnd.random() ** 4)] for _ in range(k))
        material = Seg(text[:6000], None, "public")
    else:
        material = excerpt(rnd.choice(s.docs), rnd, 150, 500)
    if rnd.random() < 0.4:
        user = [
            Message("user", fill(world.templates["llama_index.DEFAULT_SUMMARY_PROMPT_TMPL"], {"context_str": material}))
        ]
        s.template = s.template or "llama_index.DEFAULT_SUMMARY_PROMPT_TMPL"
    else:
        user = [Message("user", [ask(s.lang, "summarise", rnd), Seg("\n\n"), material])]
    regen = lambda r: model.summary([material], s.lang, r)  # noqa: E731
    return Turn(_prompt(s, user), regen(rnd), s.lang, {"public_echo"} if public else set(), 1024, regen, user)

"""The tools a response calls and the names its prompt holds: a model calls only a tool its context names.

An agent's answer is often nothing but a tool call (`{"tool_calls": [{"function": {"name": "get_ticket", ...}}]}`):
a few dozen tokens of JSON whose only text of its own is a random call id and an argument. Content cannot trace such
an answer to its source (it has too few uncommon fingerprints, and its source may never have received it), so a
misrouted agent answer, or one decoded from another request's cached prefix, went unseen (docs/evaluation.md, "whole
response"). Yet its name gives it away: a model can only call a function its context declared (the request's `tools`,
or a system prompt that lists them), and every rendering of a declaration writes the name. A response that calls a
function whose name its own prompt does not hold answers another request (docs/adr/0019).

Both sides are read at ingest, where the text is, and kept as keyed hashes only (like fingerprints):
- `called(text)`: the names of the functions an output calls, when the output is a tool call in one of the common
  JSON forms (OpenAI `tool_calls` / `function_call`, a message list, Anthropic `tool_use` blocks) or a ReAct agent's
  step in text (`Action: <tool>` then `Action Input:`, LangChain's and LlamaIndex's format); None otherwise.
- `declared(text)`: every name-like word of a prompt (snake_case, kebab-case, camelCase) as a set of keyed hashes;
  at most `MAX_NAMES` (a prompt with more is "unknown": no check). In C where the extension is built
  (`_winnow.name_words`): it reads every prompt, history included, and a regex cost as much as fingerprinting.
A called name that is not name-like (a plain word such as `search`) is not checked: a prompt holds plain words for
other reasons, and a missing one would prove nothing. So the check can be silent, never wrong by construction of the
hashes: a keyed 64-bit hash collision is the only way a foreign name reads as declared.
"""

from __future__ import annotations

import bisect
import contextlib
import re
from typing import Any

import orjson

from detectors.keyed_words import KeyedWords
from schemas.events import MAX_TOOL_NAMES
from schemas.messages import TOOL_CALLS_LINE

__all__ = ["MAX_NAMES", "MAX_OUTPUT", "ToolNames", "called", "name_like"]

# A prompt with more distinct name-like words (a code base pasted whole) is not checked: the set would grow with it,
# and a wire print holds no more.
MAX_NAMES = MAX_TOOL_NAMES
# An output longer than this is not parsed as a tool call (a tool call is short; a long JSON text is an answer).
MAX_OUTPUT = 65_536
MAX_CALLS = 32
# The names an API accepts for a function (OpenAI: ^[a-zA-Z0-9_-]{1,64}$); the runs of those characters in a prompt.
_VALID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_RUN = re.compile(r"[A-Za-z0-9_-]+")
_HUMP = re.compile(r"[a-z][A-Z]")
# A ReAct agent's call in text (LangChain's and LlamaIndex's ReAct output format): a line `Action: <tool>` followed at
# once by one `Action Input: ...`, with the step numbers LangChain's parser allows (`Action 1:`). Line-anchored, so a
# sentence that mentions an action is none; no nested repeats, so linear in the text.
_REACT = re.compile(
    r"^[ \t]*Action[ \t]*\d*[ \t]*:[ \t]*([A-Za-z0-9_-]{1,64})[ \t]*\r?\n"
    r"[ \t]*Action[ \t]*\d*[ \t]+Input[ \t]*\d*[ \t]*:",
    re.M,
)
# A fence line of Markdown (``` or ~~~ opening or closing a code block): a step shown inside one is an example an answer
# explains ("a ReAct agent writes: Action: get_weather …"), not a call the model made.
_FENCE = re.compile(r"^[ \t]*(?:```|~~~)", re.M)

try:  # the prompt scan runs over most of the text crosstalk reads: in C where the extension is built
    from detectors._winnow import name_words as _name_words
except ImportError:  # pragma: no cover - exercised with the extension missing
    _name_words = None  # type: ignore[assignment]


def name_like(word: str) -> bool:
    """Whether `word` is a word `names` collects, so that its absence from a prompt means something: it starts with a
    letter, is at most 64 of [A-Za-z0-9_-] with no separator at either end, and holds a separator (snake_case,
    kebab-case) or a lower-case letter followed by a capital (camelCase)."""
    return (
        2 <= len(word) <= 64
        and word.isascii()
        and word[0].isalpha()
        and word[-1] not in "_-"
        and _VALID.fullmatch(word) is not None
        and ("_" in word or "-" in word or _HUMP.search(word) is not None)
    )


def name_words_py(text: str, limit: int) -> set[str] | None:
    """The distinct name-like words of `text` (each maximal run of [A-Za-z0-9_-], its end separators taken off), or
    None past `limit` of them: what `_winnow.name_words` computes, in Python."""
    words: set[str] = set()
    for run in _RUN.findall(text):
        word = run.strip("_-")
        if name_like(word):
            words.add(word)
            if len(words) > limit:
                return None
    return words


def _function_names(obj: Any, out: list[str], depth: int = 0) -> None:
    """Names of called functions in a parsed output: OpenAI `tool_calls[].function.name` and `function_call.name`,
    a message list of those, Anthropic `{"type": "tool_use", "name"}` blocks (as a list or a message's content)."""
    if depth > 6 or len(out) >= MAX_CALLS:
        return
    if isinstance(obj, list):
        for item in obj[:MAX_CALLS]:
            _function_names(item, out, depth + 1)
        return
    if not isinstance(obj, dict):
        return
    if obj.get("type") == "tool_use" and isinstance(obj.get("name"), str):
        out.append(obj["name"])
        return
    function = obj.get("function") if obj.get("type", "function") == "function" else None
    if isinstance(function, dict) and isinstance(function.get("name"), str) and depth > 0:
        out.append(function["name"])
        return
    call = obj.get("function_call")
    if isinstance(call, dict) and isinstance(call.get("name"), str):
        out.append(call["name"])
    for field in ("tool_calls", "content", "choices", "message"):
        inner = obj.get(field)
        if isinstance(inner, list | dict):
            _function_names(inner, out, depth + 1)


def _json_calls(head: str, found: list[str]) -> None:
    """Names called in JSON: the whole text, or else each line that is a rendered call beside other text."""
    try:
        _function_names(orjson.loads(head), found)
    except orjson.JSONDecodeError:
        at = head.find(TOOL_CALLS_LINE)
        for _ in range(MAX_CALLS):
            if at < 0:
                break
            end = head.find("\n", at)
            if at == 0 or head[at - 1] == "\n":
                with contextlib.suppress(orjson.JSONDecodeError):
                    _function_names(orjson.loads(head[at : None if end < 0 else end]), found)
            at = -1 if end < 0 else head.find(TOOL_CALLS_LINE, end)


def _react_calls(head: str) -> list[str]:
    """The tools of the ReAct steps outside fenced code blocks, at most `MAX_CALLS`; linear in the text."""
    fences: list[int] | None = None  # found at the first step: most texts that say "Action" hold none
    out: list[str] = []
    for m in _REACT.finditer(head):
        if fences is None:
            fences = [f.start() for f in _FENCE.finditer(head)]
        if bisect.bisect_left(fences, m.start()) % 2 == 0:  # an even number of fences before it: outside a block
            out.append(m.group(1))
            if len(out) >= MAX_CALLS:
                break
    return out


def called(text: str) -> list[str] | None:
    """The valid function names an output calls, in order (duplicates kept once), or None if it is no tool call: the
    whole text as JSON, or else each line that is a rendered call beside other text (`schemas.messages.tool_calls_line`,
    what a message list with tool calls reads as); and each ReAct step's tool (`_REACT`) outside a fenced code block."""
    head = text.lstrip()
    if not head or len(head) > MAX_OUTPUT:
        return None
    found: list[str] = []
    if '"name"' in head:
        _json_calls(head, found)
    if "Action" in head:
        found += _react_calls(head)
    names = [n for n in dict.fromkeys(found) if _VALID.fullmatch(n)]
    return names or None


class ToolNames(KeyedWords):
    """Keyed hashes of names: a prompt's name-like words (`declared`), an output's called functions (`calls`)."""

    LABEL = b"crosstalk-tool-name"
    __slots__ = ()

    def names(self, text: str, prompt: bool) -> frozenset[int] | None:
        """`declared(text)` of a prompt, `calls(text)` of an output."""
        return self.declared(text) if prompt else self.calls(text)

    def declared(self, text: str) -> frozenset[int] | None:
        """The keyed hashes of the prompt's distinct name-like words; None past `MAX_NAMES` (unknown)."""
        words = name_words_py(text, MAX_NAMES) if _name_words is None else _name_words(text, MAX_NAMES)
        return None if words is None else frozenset(self.keyed(w) for w in words)

    def calls(self, text: str) -> frozenset[int] | None:
        """The keyed hashes of the name-like functions the output calls; None when it calls none (or only plain
        words, which are not checked)."""
        names = called(text)
        if names is None:
            return None
        keys = frozenset(self.keyed(n) for n in names if name_like(n))
        return keys or None

"""A text field that arrives as a serialized chat messages array is read as its messages' text.

Gateways and proxies often log a request's `messages` as they received them, and a producer that copies that log into
`prompt_text` sends JSON: `[{"role": "system", "content": "..."}, {"role": "user", "content": "..."}]`. As written,
its text carries the JSON's escapes (`\\n`, `\\"`): a sentence after a line break starts with the letter `n`, and no
sentence of it is whole, so a model answer that quotes a whole sentence of that prompt looks like a page cut out of it
(the whole-sentence rule of docs/detection.md never sees the sentence) — a false high alert on traffic whose prompts
are logged this way. The OTLP bridge already reads `gen_ai.input.messages` as its messages' text
(streams/inputs/otlp.py); this is the same for the contract's own text fields, so both fingerprints and canary scans
see the text the model saw.

Only an array of message objects is read so (every element an object with a string `role` and a `content`, or
OpenTelemetry's `parts`); any other text, JSON or not, is used as it is. The messages' text parts are joined with
line breaks, as the OTLP bridge joins a span's messages. Applied where the contract validates the event, so a
producer that fingerprints at the edge and the monitor that fingerprints at ingest read the same text. What a tool
returned is read too, in every shape producers log (`tool_result_text`): the model read it.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["TOOL_CALLS_LINE", "chat_text", "messages_text", "parts_text", "tool_calls_line", "tool_result_text"]

# How a rendered call line opens: a tool check finds the line by it (detectors/toolcalls.py).
TOOL_CALLS_LINE = '{"tool_calls":'

# Calls rendered per message: an answer calls a few functions; a longer list is read no further.
_MAX_CALLS = 32

_WHITESPACE = " \t\r\n"


def tool_calls_line(calls: Any) -> str | None:
    """The functions a message calls, as one line of JSON (`{"tool_calls": [{"id", "function": {"name",
    "arguments"}}]}`), or None when it calls none. Every shape producers log: OpenAI `tool_calls` (`{"id", "function":
    {"name", "arguments"}}`), Anthropic `tool_use` blocks (`{"id", "name", "input"}`), OpenTelemetry `tool_call`
    parts (`{"id", "name", "arguments"}`). The line is text the model wrote: its arguments are fingerprinted like the
    rest, and the names are what a tool check reads (detectors/toolcalls.py, docs/adr/0019)."""
    out: list[dict[str, Any]] = []
    for c in calls[:_MAX_CALLS] if isinstance(calls, list) else ():
        if not isinstance(c, dict):
            continue
        fn = c["function"] if isinstance(c.get("function"), dict) else c
        name = fn.get("name")
        if not isinstance(name, str):
            continue
        entry: dict[str, Any] = {"name": name}
        args = fn.get("arguments", fn.get("input"))
        if args is not None:
            entry["arguments"] = args if isinstance(args, str) else orjson.dumps(args, default=str).decode()
        out.append({"id": c["id"], "function": entry} if isinstance(c.get("id"), str) else {"function": entry})
    return f"{TOOL_CALLS_LINE}{orjson.dumps(out).decode()}}}" if out else None


def tool_result_text(part: Any) -> str | None:
    """What a tool returned, as the model read it, from a content part that carries it: Anthropic `tool_result`
    (`content`: a string or text blocks) and OpenTelemetry `tool_call_response` (`response`: any JSON value, read as its
    JSON unless it is a string); None for any other part. A tool's output is prompt text like any other: left out, an
    answer quoting its own tool result looked as if it came from nowhere, and another tenant who had that text was
    named its source."""
    if not isinstance(part, dict):
        return None
    kind = part.get("type")
    if kind == "tool_result":
        body = part.get("content")
        if isinstance(body, str):
            return body or None
        blocks = body if isinstance(body, list) else ()
        return "\n".join(b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)) or None
    if kind == "tool_call_response" and part.get("response") is not None:
        body = part["response"]
        if isinstance(body, str):
            return body or None
        try:
            return orjson.dumps(body, default=str).decode()
        except orjson.JSONEncodeError:  # nested past what orjson writes (254 levels): no text a model reads
            return None
    return None


def parts_text(content: Any) -> list[str]:
    """The text parts of one message's content: a string, or a list of parts (OpenAI `{"type": "text", "text"}`,
    OpenTelemetry `{"type": "text", "content"}`), what tools returned (`tool_result_text`), and the tool calls among
    them as one line (`tool_calls_line`); other parts (images) carry no text here."""
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    calls: list[Any] = []
    for p in content if isinstance(content, list) else ():
        if isinstance(p, str):
            out.append(p)
        elif isinstance(p, dict) and p.get("type", "text") == "text":
            text = p.get("text", p.get("content"))
            if isinstance(text, str):
                out.append(text)
        elif isinstance(p, dict) and p.get("type") in ("tool_use", "tool_call"):
            calls.append(p)
        elif (result := tool_result_text(p)) is not None:
            out.append(result)
    line = tool_calls_line(calls)
    return [*out, line] if line else out


def messages_text(value: str) -> str | None:
    """The text of `value` if it is a serialized chat messages array, else None (the module docstring)."""
    head = value.lstrip(_WHITESPACE) if value[:1] in _WHITESPACE else value
    if head[:1] != "[" or '"role"' not in head:
        return None
    try:
        messages = orjson.loads(head)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(messages, list) or not messages:
        return None
    parts: list[str] = []
    for m in messages:
        if not (isinstance(m, dict) and isinstance(m.get("role"), str) and ("content" in m or "parts" in m)):
            return None
        parts += parts_text(m["content"] if "content" in m else m["parts"])  # OpenTelemetry semconv messages: `parts`
        line = tool_calls_line(m.get("tool_calls"))
        if line:
            parts.append(line)
    return "\n".join(parts)


def chat_text(value: str) -> str:
    """A text field as the monitor reads it: a serialized messages array's text, any other text as it is."""
    text = messages_text(value)
    return value if text is None else text

"""What a LiteLLM call sends as its prompt, in every request shape the guard must see: chat `messages`,
completions `prompt` (a string, strings, token ids) and Responses API `input` (a string or input items).

Issue 25: the guard looked at `messages` only, so an 8k-token `prompt` or `input` passed it. Issue 42: nor
did it count `instructions`, `system`, tool definitions or tool outputs in Responses input items.
"""

from __future__ import annotations

from typing import Any

import litellm
import orjson

from schemas.messages import tool_calls_line, tool_result_text


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts (chat "text", Responses "input_text"/"output_text")
        texts = [p.get("text") if isinstance(p, dict) and "text" in p else tool_result_text(p) for p in content]
        return "\n".join(t for t in texts if isinstance(t, str) and t)  # and Anthropic tool_result blocks
    return ""


def prompt_text(messages: Any) -> str | None:
    """The text of chat messages (None if there is none), an assistant message's tool calls as their line."""
    parts: list[str] = []
    for m in messages or ():
        if isinstance(m, dict):
            parts += [p for p in (_text(m.get("content")), tool_calls_line(m.get("tool_calls"))) if p]
    return "\n".join(parts) if parts else None


def _item_text(item: dict[str, Any]) -> str:
    """One Responses input item: a message's content, a tool call's arguments or a tool's output
    (`function_call_output`, `custom_tool_call_output`: a string or content parts)."""
    parts = [_text(item.get("content")), _text(item.get("output"))]
    args = item.get("arguments", item.get("input"))
    parts.append(args if isinstance(args, str) else "")
    return "\n".join(p for p in parts if p)


def _input_text(value: Any) -> str | None:
    """Responses API `input`: a string, or items (messages, tool calls and their outputs, bare strings)."""
    if isinstance(value, str):
        return value or None
    if isinstance(value, list):
        parts = [v if isinstance(v, str) else _item_text(v) for v in value if isinstance(v, str | dict)]
        parts = [p for p in parts if p]
        return "\n".join(parts) if parts else None
    return None


def _beside_text(data: dict[str, Any]) -> str | None:
    """What becomes prompt tokens beside the messages, prompt and input (issue 42: each passed the guard
    at 8k tokens against a 4,096 limit): Responses `instructions`, Anthropic `system` (a string or text
    blocks), and the tool definitions (`tools`, the older `functions`) whose names, descriptions and
    parameter schemas the server renders into the prompt -- counted as their JSON, in whatever format."""
    parts = [_text(data.get("instructions")), _text(data.get("system"))]
    for key in ("tools", "functions"):
        defs = data.get(key)
        if isinstance(defs, list | dict) and defs:
            parts.append(orjson.dumps(defs, default=str).decode())
    parts = [p for p in parts if p]
    return "\n".join(parts) if parts else None


def _prompt_field(value: Any) -> tuple[str | None, int]:
    """Completions `prompt`: (text, tokens given as ids)."""
    if isinstance(value, str):
        return value or None, 0
    if isinstance(value, list) and value and all(isinstance(x, int) for x in value):
        return None, len(value)  # one prompt as token ids
    if isinstance(value, list):
        texts = [x for x in value if isinstance(x, str) and x]
        ids = sum(len(x) for x in value if isinstance(x, list))  # several prompts as token ids
        return ("\n".join(texts) if texts else None), ids
    return None, 0


def request_text(data: dict[str, Any]) -> str | None:
    """The prompt's text, whatever the request shape (for fingerprints), with the declared functions' JSON: the names a
    tool check reads (docs/adr/0019); the messages' own tool calls are in their text (schemas/messages.py)."""
    defs = data.get("tools") or data.get("functions")
    found = [prompt_text(data.get("messages")), _prompt_field(data.get("prompt"))[0], _input_text(data.get("input"))]
    found.append(orjson.dumps(defs, default=str).decode() if isinstance(defs, list | dict) and defs else None)
    parts = [p for p in found if p]
    return "\n".join(parts) if parts else None


def prompt_tokens(model: str | None, data: dict[str, Any]) -> int | None:
    """The gateway's count of the prompt's tokens (litellm.token_counter), or None if the call has no prompt."""
    name = model or ""
    total, found = 0, False
    messages = data.get("messages")
    if isinstance(messages, list) and messages:
        total += litellm.token_counter(model=name, messages=messages)
        found = True
    text, ids = _prompt_field(data.get("prompt"))
    if text is not None or ids:
        total += ids + (litellm.token_counter(model=name, text=text) if text else 0)
        found = True
    itext = _input_text(data.get("input"))
    if itext is not None:
        total += litellm.token_counter(model=name, text=itext)
        found = True
    beside = _beside_text(data)
    if beside is not None:  # a call of instructions alone (an empty `input`) is still prefilled
        total += litellm.token_counter(model=name, text=beside)
        found = True
    return total if found else None


# Calls whose `input` is no prompt for a KV pool the guard knows (embeddings, images, audio, moderation).
_NOT_GENERATION = ("embed", "image", "transcription", "speech", "moderation", "rerank", "file", "batch")


def is_generation(call_type: Any) -> bool:
    name = str(getattr(call_type, "value", call_type) or "").lower()
    return not any(word in name for word in _NOT_GENERATION)

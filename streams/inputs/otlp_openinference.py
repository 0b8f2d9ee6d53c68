"""OpenInference LLM spans -> the GenAI attributes streams.inputs.otlp maps (pure: no I/O, no clock).

Envoy AI Gateway traces in OpenInference by default (`AI_GATEWAY_TRACING_SEMCONV` unset), as do Arize's
instrumentations: such a span has no `gen_ai.operation.name`, so the GenAI mapping skipped every one. Here an
LLM span (`openinference.span.kind` = LLM) is given the GenAI names of what it carries, and then maps like
any GenAI span: tenant (`user.id` is already among `otlp.tenant_attributes`), session (`session.id`), cache
domain and request id from the same configurable lists.

Names read (Arize-ai/openinference spec/semantic_conventions.md and spec/llm_spans.md at 1fe497f,
openinference-semantic-conventions 0.1.32; Envoy AI Gateway v1.1 internal/tracing/openinference):

* ``llm.model_name`` (``llm.request.model_name``/``llm.response.model_name`` where they differ),
  ``llm.provider``/``llm.system`` -> ``gen_ai.provider.name``, ``llm.finish_reason``;
* ``llm.token_count.prompt``/``completion`` -> ``gen_ai.usage.input_tokens``/``output_tokens``;
* ``llm.token_count.prompt_details.cache_read`` -> ``gen_ai.usage.cache_read.input_tokens``;
* ``llm.invocation_parameters`` (JSON) ``max_tokens``/``max_completion_tokens``;
* content: ``llm.input_messages.N.message.content`` (or ``message.contents.M.message_content.text``),
  ``llm.output_messages.N...``, ``llm.prompts.N.prompt.text``, ``llm.choices.N.completion.text``; without
  them, ``input.value``/``output.value`` (a JSON request or response body, or plain text).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import orjson

from streams.inputs.otlp_decode import Span

SPAN_KIND = "openinference.span.kind"
# llm.input_messages.0.message.content | llm.input_messages.0.message.contents.1.message_content.text
_MESSAGE = re.compile(
    r"^llm\.(input|output)_messages\.(\d{1,6})\.message\."
    r"(?:(role|content)|contents\.(\d{1,6})\.message_content\.(type|text))$"
)
_FLAT = re.compile(r"^llm\.(prompts|choices)\.(\d{1,6})\.(?:prompt|completion)\.text$")
_ROLE = {"input": "user", "output": "assistant"}


def is_llm_span(span: Span) -> bool:
    return str(span.attributes.get(SPAN_KIND, "")).upper() == "LLM"


def _message(side: str, parts: dict[int, dict[str, str]], role: str | None, content: str | None) -> dict[str, Any]:
    texts = [content] if isinstance(content, str) and content else []
    for _, part in sorted(parts.items()):
        if part.get("type", "text") == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
    return {"role": role or _ROLE[side], "parts": [{"type": "text", "content": t} for t in texts]}


def _flattened(attrs: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The indexed llm.*_messages / llm.prompts / llm.choices attributes as GenAI messages, in index order."""
    found: dict[tuple[str, int], dict[str, Any]] = {}
    for key, value in attrs.items():
        if not key.startswith("llm."):
            continue
        m = _MESSAGE.match(key)
        if m:
            side, i, field, j, part_field = m.groups()
            slot = found.setdefault((side, int(i)), {"parts": {}})
            if field is not None:
                slot[field] = value if isinstance(value, str) else None
            else:
                slot["parts"].setdefault(int(j), {})[part_field] = value
            continue
        f = _FLAT.match(key)
        if f and isinstance(value, str):
            side = "input" if f.group(1) == "prompts" else "output"
            found.setdefault((side, int(f.group(2))), {"parts": {}})["content"] = value
    out: dict[str, list[dict[str, Any]]] = {"input": [], "output": []}
    for (side, _), slot in sorted(found.items()):
        out[side].append(_message(side, slot["parts"], slot.get("role"), slot.get("content")))
    return out["input"], out["output"]


def _listed(value: Any, side: str) -> list[dict[str, Any]]:
    """llm.input_messages given whole (a list of {"message.role", "message.content"} objects, as some exporters
    send the logical form) as GenAI messages."""
    out: list[dict[str, Any]] = []
    for m in value if isinstance(value, list) else ():
        if isinstance(m, dict):
            content = m.get("message.content")
            out.append(_message(side, {}, m.get("message.role"), content if isinstance(content, str) else None))
    return out


def _body_text(value: Any, side: str) -> list[dict[str, Any]]:
    """input.value / output.value: an OpenAI-style JSON body (request `messages`/`prompt`, response `choices`),
    else the value itself as one text."""
    if not isinstance(value, str) or not value:
        return []
    try:
        body = orjson.loads(value)
    except orjson.JSONDecodeError:
        return [_message(side, {}, None, value)]
    texts: list[str] = []
    if isinstance(body, dict):
        for m in body.get("messages") or ():
            if isinstance(m, dict) and isinstance(m.get("content"), str):
                texts.append(m["content"])
        if isinstance(body.get("prompt"), str):
            texts.append(body["prompt"])
        for c in body.get("choices") or ():
            if isinstance(c, dict):
                msg = c.get("message") if isinstance(c.get("message"), dict) else {}
                text = msg.get("content") if msg else c.get("text")
                if isinstance(text, str):
                    texts.append(text)
    elif isinstance(body, str):
        texts.append(body)
    return [_message(side, {}, None, t) for t in texts]


def _max_tokens(params: Any) -> Any:
    if not isinstance(params, str):
        return None
    try:
        p = orjson.loads(params)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(p, dict):
        return None
    return p.get("max_tokens", p.get("max_completion_tokens"))


_RENAMES = (
    ("llm.token_count.prompt", "gen_ai.usage.input_tokens"),
    ("llm.token_count.completion", "gen_ai.usage.output_tokens"),
    ("llm.token_count.prompt_details.cache_read", "gen_ai.usage.cache_read.input_tokens"),
)


def as_genai(span: Span) -> Span:
    """The span with the GenAI attributes its OpenInference ones stand for (GenAI ones it already has are kept)."""
    a = span.attributes
    g: dict[str, Any] = {}
    inputs, outputs = _flattened(a)
    inputs = inputs or _listed(a.get("llm.input_messages"), "input") or _body_text(a.get("input.value"), "input")
    outputs = outputs or _listed(a.get("llm.output_messages"), "output") or _body_text(a.get("output.value"), "output")
    completion = any(k.startswith("llm.prompts.") for k in a) and not any(k.startswith("llm.input_messages") for k in a)
    g["gen_ai.operation.name"] = "text_completion" if completion else "chat"
    model = a.get("llm.request.model_name") or a.get("llm.model_name")
    if model:
        g["gen_ai.request.model"] = model
    response_model = a.get("llm.response.model_name") or a.get("llm.model_name")
    if response_model:
        g["gen_ai.response.model"] = response_model
    provider = a.get("llm.provider") or a.get("llm.system")
    if provider:
        g["gen_ai.provider.name"] = provider
    for old, new in _RENAMES:
        if old in a:
            g[new] = a[old]
    if isinstance(a.get("llm.finish_reason"), str):
        g["gen_ai.response.finish_reasons"] = [a["llm.finish_reason"]]
    max_tokens = _max_tokens(a.get("llm.invocation_parameters"))
    if isinstance(max_tokens, int) and not isinstance(max_tokens, bool):
        g["gen_ai.request.max_tokens"] = max_tokens
    if inputs:
        g["gen_ai.input.messages"] = inputs
    if outputs:
        g["gen_ai.output.messages"] = outputs
    return replace(span, attributes={**a, **{k: v for k, v in g.items() if k not in a}})

"""What gateways put on their spans, for the tests of the gateway recipes (docs/connect.md)."""

from __future__ import annotations

import orjson


def envoy_openinference_attrs(prompt: str, answer: str, model: str = "gpt-5-nano") -> dict[str, object]:
    """The attributes Envoy AI Gateway v1.1's OpenInference recorder sets on a chat completion's span, request then
    response (internal/tracing/openinference/openai: chat_completion_test.go's expectations), token counts as in
    its test."""
    req_body = orjson.dumps({"model": model, "messages": [{"role": "user", "content": prompt}]}).decode()
    resp_body = orjson.dumps({"model": model, "choices": [{"message": {"role": "assistant", "content": answer}}]})
    return {
        "openinference.span.kind": "LLM",
        "llm.system": "openai",
        "llm.model_name": model,
        "input.value": req_body,
        "input.mime_type": "application/json",
        "llm.invocation_parameters": orjson.dumps({"model": model, "max_tokens": 256}).decode(),
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": prompt,
        "output.mime_type": "application/json",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": answer,
        "llm.token_count.prompt": 20,
        "llm.token_count.completion": 10,
        "llm.token_count.total": 30,
        "output.value": resp_body.decode(),
    }

"""Every field that becomes prompt tokens is counted by the guard (issue 42).

An 8k-token prompt against a 4,096-token limit passed the guard when it sat in the Responses API
`instructions`, a `function_call_output` input item, an Anthropic `/v1/messages` `system`, or a chat
tool's `description` or parameters. Each shape here carries the long text in that one field only; the
same shape with a short text passes, so the count is not inflated either.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
litellm = pytest.importorskip("litellm")

from streams.integrations.litellm import CrosstalkLogger  # noqa: E402
from streams.settings import Settings  # noqa: E402

LONG = " ".join(f"word{i}" for i in range(3000))  # ~8.6k tokens
SHORT = "a short question that fits"
USER = [{"role": "user", "content": SHORT}]


def _tool_param(text: str) -> dict[str, Any]:
    return {"type": "object", "properties": {"q": {"type": "string", "description": text}}}


SHAPES: dict[str, Callable[[str], dict[str, Any]]] = {
    "responses-instructions": lambda t: {"input": SHORT, "instructions": t},
    "responses-instructions-empty-input": lambda t: {"input": [], "instructions": t},
    "responses-function-call-output": lambda t: {
        "input": [{"type": "function_call_output", "call_id": "c1", "output": t}]
    },
    "responses-function-call-output-parts": lambda t: {
        "input": [{"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": t}]}]
    },
    "responses-function-call-arguments": lambda t: {
        "input": [{"type": "function_call", "call_id": "c1", "name": "f", "arguments": t}]
    },
    "responses-tool": lambda t: {"input": SHORT, "tools": [{"type": "function", "name": "f", "description": t}]},
    "anthropic-system": lambda t: {"messages": USER, "system": t, "max_tokens": 16},
    "anthropic-system-blocks": lambda t: {"messages": USER, "system": [{"type": "text", "text": t}], "max_tokens": 16},
    "anthropic-tool": lambda t: {"messages": USER, "tools": [{"name": "f", "description": t, "input_schema": {}}]},
    "chat-tool-description": lambda t: {
        "messages": USER,
        "tools": [{"type": "function", "function": {"name": "f", "description": t, "parameters": {}}}],
    },
    "chat-tool-parameters": lambda t: {
        "messages": USER,
        "tools": [{"type": "function", "function": {"name": "f", "parameters": _tool_param(t)}}],
    },
    "chat-functions": lambda t: {"messages": USER, "functions": [{"name": "f", "description": t}]},
}


@pytest.fixture
def lg() -> Iterator[CrosstalkLogger]:
    s = Settings(
        detection={"fingerprint_key": "guard-fields-key"},
        litellm={"cache_domains": {"glm-5.3": "glm53-pd-1"}, "limits_url": None, "headroom_tokens": 0},
    )
    logger = CrosstalkLogger(s)
    assert logger.limits is not None
    logger.limits.offer("glm53-pd-1", {"ts": time.time(), "prefill_capacity_tokens": 4096}, "kafka")
    yield logger
    logger.close()


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_long_prompt_in_any_field_is_refused(lg: CrosstalkLogger, shape: str) -> None:
    with pytest.raises(litellm.ContextWindowExceededError, match="exceeds the current prefill capacity of 4096"):
        asyncio.run(lg.check("glm-5.3", data={"model": "glm-5.3", **SHAPES[shape](LONG)}))
    asyncio.run(lg.check("glm-5.3", data={"model": "glm-5.3", **SHAPES[shape](SHORT)}))
    assert (lg.counters["guard.rejected"], lg.counters["guard.passed"]) == (1, 1)

"""The text a LiteLLM call's prompt is fingerprinted by (streams/integrations/litellm_prompt.py): every part the model
reads, what tools returned included, in the request shapes LiteLLM takes."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
pytest.importorskip("litellm")

from streams.integrations.litellm_prompt import request_text

RESULT = "order 7 shipped from the Leipzig depot on Tuesday"


@pytest.mark.parametrize(
    "message",
    [
        {"role": "tool", "tool_call_id": "call_1", "content": RESULT},  # OpenAI chat
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": RESULT}]},  # Anthropic
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1",
                                      "content": [{"type": "text", "text": RESULT}]}]},
    ],
)  # fmt: skip
def test_what_a_tool_returned_is_prompt_text(message: dict) -> None:
    # Before, an Anthropic tool_result block carried no text here, though the model read it and the guard counted it.
    text = request_text({"messages": [{"role": "user", "content": "where is order 7?"}, message]})
    assert text == f"where is order 7?\n{RESULT}"


def test_parts_without_text_add_nothing() -> None:
    parts = [{"type": "image_url", "image_url": {"url": "data:,"}}, {"type": "tool_result", "content": None}]
    assert request_text({"messages": [{"role": "user", "content": parts}]}) is None
    assert request_text({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, *parts]}]}) == "hi"

"""Integrations with serving stacks that run crosstalk code in their own process (LiteLLM)."""

"""The base of every settings section."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """A settings section: unknown keys are an error, not silently ignored."""

    model_config = ConfigDict(extra="forbid")

"""JSON Schema of every event type and of the alert, for producers written in other languages."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel

from schemas.alert import Alert
from schemas.events import EVENT_ADAPTER, EVENT_TYPES

SCHEMA_VERSION = "1"


def schemas() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    models: dict[str, type[BaseModel]] = {**EVENT_TYPES, "alert": Alert}
    for name, model in models.items():
        mode: Literal["validation", "serialization"] = "serialization" if name == "alert" else "validation"
        schema = model.model_json_schema(mode=mode)
        schema["$id"] = f"https://crosstalk.dev/schemas/v{SCHEMA_VERSION}/{name}.json"
        schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
        out[name] = schema
    union = EVENT_ADAPTER.json_schema()
    union["$id"] = f"https://crosstalk.dev/schemas/v{SCHEMA_VERSION}/event.json"
    union["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    out["event"] = union
    return out


def write_schemas(out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, schema in schemas().items():
        path = out_dir / f"{name}.schema.json"
        path.write_bytes(orjson.dumps(schema, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")
        written.append(path)
    return written

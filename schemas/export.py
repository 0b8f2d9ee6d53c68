"""JSON Schema of every event type, of the alert, of a replay's lead and of the exchange (the joined pair that
crosses the internal topics and that sinks receive), for producers and consumers written in other languages."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel

from schemas.alert import Alert, Lead
from schemas.events import EVENT_ADAPTER, EVENT_TYPES
from schemas.exchange import EXCHANGE_ADAPTER

SCHEMA_VERSION = "1"


def schemas() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    models: dict[str, type[BaseModel]] = {**EVENT_TYPES, "alert": Alert, "lead": Lead}
    for name, model in models.items():
        # Events are read (validated); the alert, the lead and the exchange are written by crosstalk.
        mode: Literal["validation", "serialization"] = "validation" if name in EVENT_TYPES else "serialization"
        out[name] = model.model_json_schema(mode=mode)
    # The exchange is a plain dataclass inside the process; pydantic writes its JSON form (schemas.exchange).
    out["exchange"] = EXCHANGE_ADAPTER.json_schema(mode="serialization")
    for name, schema in out.items():
        schema["$id"] = f"https://crosstalk.dev/schemas/v{SCHEMA_VERSION}/{name}.json"
        schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
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

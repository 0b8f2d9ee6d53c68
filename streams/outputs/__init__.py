"""Where produced events go, one abstraction for every producer crosstalk ships.

The OTLP receiver and bridge, the engine-metrics scraper, the prober, the test engine, the live demo and the LiteLLM
callback produce wire events; each hands them to an `Output` (base.py): a JSON Lines file or stdout (jsonl.py), the
Kafka input topic through the gateway producer library (kafka.py), or a function such as the in-process monitor
(function.py; the embedded runner's own output is streams/embedded/output.py). `ValidatedOutput` (validated.py)
checks each event against the wire contract before it leaves. Alerts leave through sinks (streams/sinks/), not here.
"""

from streams.outputs.base import Letter, Output, Refused
from streams.outputs.function import FunctionOutput, NullOutput
from streams.outputs.jsonl import JsonlOutput
from streams.outputs.kafka import KafkaOutput
from streams.outputs.validated import ValidatedOutput

__all__ = [
    "FunctionOutput",
    "JsonlOutput",
    "KafkaOutput",
    "Letter",
    "NullOutput",
    "Output",
    "Refused",
    "ValidatedOutput",
]

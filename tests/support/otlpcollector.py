"""A loopback OTLP/HTTP receiver that decodes the protobuf requests: what an OpenTelemetry Collector
would get from crosstalk's OtelSink. Used by the sink's tests and the Kafka runtime tests.
"""

from __future__ import annotations

import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


class OtlpReceiver:
    """Collects what OTLP exporters send to `endpoint` (/v1/traces, /v1/metrics), decoded; stop() when done."""

    def __init__(self) -> None:
        self.traces: list[ExportTraceServiceRequest] = []
        self.metrics: list[ExportMetricsServiceRequest] = []
        self.headers: list[dict[str, str]] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                assert self.headers.get("Content-Type") == "application/x-protobuf"
                with outer.lock:
                    outer.headers.append(dict(self.headers))
                    if self.path == "/v1/traces":
                        req_t = ExportTraceServiceRequest()
                        req_t.ParseFromString(body)
                        outer.traces.append(req_t)
                    elif self.path == "/v1/metrics":
                        req_m = ExportMetricsServiceRequest()
                        req_m.ParseFromString(body)
                        outer.metrics.append(req_m)
                self.send_response(200 if self.path in ("/v1/traces", "/v1/metrics") else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def spans(self) -> list[Any]:
        with self.lock:
            return [s for r in self.traces for rs in r.resource_spans for ss in rs.scope_spans for s in ss.spans]

    def metric_points(self) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {}
        with self.lock:
            for r in self.metrics:
                for rm in r.resource_metrics:
                    for sm in rm.scope_metrics:
                        for m in sm.metrics:
                            # Cumulative temporality: the latest export holds the totals.
                            out[m.name] = list(getattr(m, m.WhichOneof("data")).data_points)
        return out

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

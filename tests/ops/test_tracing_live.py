"""Traces from a served instance (scripts/serve.py, as `make run` starts it) reach an OTLP/HTTP receiver: a
tiny HTTP server on 127.0.0.1 that keeps every POST to /v1/traces. With tracing off, nothing reaches it."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tenancy import services
from tests.conftest import API, make_user
from tests.helpers.serving import served


class Receiver:
    """The OTLP/HTTP receiver: what was posted to /v1/traces, decoded."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path == "/v1/traces":
                    parsed = ExportTraceServiceRequest()
                    parsed.ParseFromString(body)
                    with receiver.lock:
                        receiver.requests.append(parsed)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def spans(self) -> list[tuple[str, str, str]]:
        """(service name, span name, trace id) of every span received."""
        found = []
        with self.lock:
            for request in self.requests:
                for resource_spans in request.resource_spans:
                    service = next(
                        (
                            a.value.string_value
                            for a in resource_spans.resource.attributes
                            if a.key == "service.name"
                        ),
                        "",
                    )
                    for scope_spans in resource_spans.scope_spans:
                        for span in scope_spans.spans:
                            found.append((service, span.name, span.trace_id.hex()))
        return found


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    try:
        yield found
    finally:
        found.server.shutdown()
        found.server.server_close()


def context_get(port: int, key: str) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{API}/context/get",
        data=json.dumps({"query": "what did we decide about retries", "strategy": "lexical"}).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.loads(answer.read())


@pytest.mark.django_db(transaction=True, databases="__all__")
def test_it_sends_a_context_gets_spans_to_the_otlp_endpoint(receiver: Receiver, tmp_path: Path):
    key = services.api_key_create(user=make_user("tracer"), scope="read").raw_key
    with served(
        tmp_path / "serve.log",
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{receiver.port}",
        OTEL_SERVICE_NAME="cairn-live-test",
        OTEL_BSP_SCHEDULE_DELAY="200",
    ) as server:
        envelope = context_get(server.port, key)
        trace_id = envelope["meta"]["traceId"]
        deadline = time.time() + 10
        while time.time() < deadline:
            names = {name for _, name, tid in receiver.spans() if tid == trace_id}
            if {"context.lexical", "context.text"} <= names:
                break
            time.sleep(0.2)
    names = {name for _, name, tid in receiver.spans() if tid == trace_id}
    expected = {"cairn.auth", "context.scope", "context.rules", "context.lexical", "context.fusion"}
    assert expected <= names, names
    assert any(name.startswith("POST") or "context/get" in name for name in names), names
    assert {service for service, _, tid in receiver.spans() if tid == trace_id} == {"cairn-live-test"}


@pytest.mark.django_db(transaction=True, databases="__all__")
def test_it_exports_nothing_when_tracing_is_off(receiver: Receiver, tmp_path: Path):
    key = services.api_key_create(user=make_user("untraced"), scope="read").raw_key
    # The receiver is named, but the SDK's own switch is off: nothing is exported, and no trace id is given.
    with served(
        tmp_path / "serve.log",
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{receiver.port}",
        OTEL_SDK_DISABLED="true",
        OTEL_BSP_SCHEDULE_DELAY="200",
    ) as server:
        envelope = context_get(server.port, key)
        time.sleep(3)
    assert "traceId" not in envelope["meta"]
    assert receiver.spans() == []
    assert receiver.requests == []

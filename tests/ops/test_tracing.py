"""OpenTelemetry traces (config.tracing): the span tree of a context/get and of an add, in-process with the
SDK's in-memory exporter; a background job's own trace, linked to the request that queued it; nothing secret
in any attribute; the trace id in the envelope's meta and in the JSON log line."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
from django.test import Client
from django_q.models import OrmQ
from django_q.signals import post_execute_in_worker, pre_execute
from django_q.signing import SignedPackage
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from config import tracing
from graphsvc import presence
from ops.jsonlog import JsonFormatter
from rollout.models import RolloutConfig
from rollout.services import rollout_cache_clear
from tenancy.rls import workspace_context
from tests.conftest import SdkClient
from tests.graphsvc.graph_builder import GraphBuilder

CONTEXT_STAGES = {
    "cairn.auth",
    "context.scope",
    "context.rules",
    "context.lexical",
    "context.vectors",
    "context.fusion",
    "context.ordering",
    "context.graph_expansion",
    "context.facts",
    "context.conflicts",
    "context.text",
    "context.answer",
}
SECRET_QUERY = "zanzibar quokka migration"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    assert tracing.tracing_configure(service_name="cairn-test", exporter=exporter)
    try:
        yield exporter
    finally:
        tracing.tracing_shutdown()


def fresh(api: SdkClient) -> SdkClient:
    """The persona's key on a new test client: its handler loads the middleware (with the Django
    instrumentation's) on its first request."""
    return SdkClient(Client(), api.key)


def by_name(finished: tuple[ReadableSpan, ...]) -> dict[str, list[ReadableSpan]]:
    found: dict[str, list[ReadableSpan]] = {}
    for span in finished:
        found.setdefault(span.name, []).append(span)
    return found


def ancestors(span: ReadableSpan, finished: tuple[ReadableSpan, ...]) -> list[str]:
    by_id = {s.context.span_id: s for s in finished}
    names = []
    parent = span.parent
    while parent is not None and parent.span_id in by_id:
        span = by_id[parent.span_id]
        names.append(span.name)
        parent = span.parent
    return names


def all_attribute_text(finished: tuple[ReadableSpan, ...]) -> str:
    parts = []
    for span in finished:
        parts.append(span.name)
        parts.extend(f"{key}={value}" for key, value in (span.attributes or {}).items())
        for event in span.events:
            parts.extend(f"{key}={value}" for key, value in (event.attributes or {}).items())
    return "\n".join(parts)


def test_it_traces_a_context_get_stage_by_stage_under_the_request_span(
    spans, alice_api, alice_ws, local_embedder, settings
):
    settings.CONTEXT_SETTINGS_CACHE_SECONDS = 0
    api = fresh(alice_api)
    secret_content = "The billing service talks to Postgres through pgbouncer sk-live-abcdef1234567890abcdef"
    api.add(secret_content)
    api.add("Nightly zanzibar backups of the quokka cluster run at 03:00")
    # An entity graph, so that the facts stage runs.
    g = GraphBuilder(alice_ws)
    g.fact("Billing", "depends_on", "Postgres")
    presence.graph_presence_forget()
    # Graph expansion runs where the rollout applies it.
    with workspace_context(alice_ws):
        RolloutConfig.objects.update_or_create(workspace_id=alice_ws, defaults={"mode": "canary"})
    rollout_cache_clear(alice_ws)
    from pipeline.services import jobs_run_pending

    jobs_run_pending(workspace_id=alice_ws)  # the memories' vectors, for the vector stage
    spans.clear()

    response = api.post(
        "context/get",
        {"query": f"billing postgres {SECRET_QUERY}", "strategy": "hybrid", "graphDepth": 1},
    )
    assert response.status_code == 200, response.content
    finished = spans.get_finished_spans()
    names = by_name(finished)
    missing = CONTEXT_STAGES - set(names)
    assert not missing, sorted(names)

    (server,) = [s for s in finished if s.kind == SpanKind.SERVER]
    assert server.parent is None
    assert server.attributes["http.route"].endswith("context/get")
    # Every stage is a descendant of the request's span, in one trace.
    for stage in CONTEXT_STAGES:
        for span in names[stage]:
            assert span.context.trace_id == server.context.trace_id
            assert server.name in ancestors(span, finished), (stage, ancestors(span, finished))
    # The ranking's stages run inside their statements' parents: lexical candidates are SQL.
    lexical = names["context.lexical"][0]
    statements = [s for s in finished if s.parent and s.parent.span_id == lexical.context.span_id]
    assert statements and all(s.kind == SpanKind.CLIENT for s in statements)
    assert all(s.attributes["db.system.name"] == "postgresql" for s in statements)
    assert names["context.lexical"][0].attributes["cairn.candidates"] >= 1
    assert names["context.fusion"][0].attributes["cairn.strategy"] == "hybrid"
    assert names["context.facts"][0].attributes["cairn.facts"] >= 1

    # The envelope names the trace; nothing of the query, the content or the key is in any span.
    envelope = response.json()
    assert envelope["meta"]["traceId"] == format(server.context.trace_id, "032x")
    text = all_attribute_text(finished)
    for secret in ("zanzibar", "quokka", "pgbouncer", "sk-live", api.key, "billing postgres"):
        assert secret.lower() not in text.lower(), secret
    assert "SELECT" not in " ".join(
        str(v)
        for s in finished
        for k, v in (s.attributes or {}).items()
        if k.startswith("db.") and k != "db.operation.name"
    )


def test_it_traces_an_add_and_links_its_jobs_traces_to_it(spans, alice_api, alice_ws):
    api = fresh(alice_api)
    OrmQ.objects.all().delete()
    spans.clear()
    memory = api.add("The deploy pipeline signs images with cosign before pushing")
    finished = spans.get_finished_spans()
    names = by_name(finished)
    (server,) = [s for s in finished if s.kind == SpanKind.SERVER]
    assert {"cairn.auth", "memory.add", "jobs.enqueue"} <= set(names), sorted(names)
    assert "memory.add" in ancestors(names["jobs.enqueue"][0], finished)
    assert server.name in ancestors(names["memory.add"][0], finished)

    # Each queued message carries the request's trace context; the worker's job runs in a trace of its own
    # (through django-q2's execution signals, as its worker sends them) whose root links back to the request.
    messages = [SignedPackage.loads(m.payload) for m in OrmQ.objects.all()]
    assert messages
    tracing.job_signals_connect()
    spans.clear()
    task = messages[0]
    from pipeline import tasks

    function = getattr(tasks, task["func"].rsplit(".", 1)[-1])
    pre_execute.send(sender="django_q", func=function, task=task)
    try:
        task["result"], task["success"] = function(*task["args"], **task["kwargs"]), True
    finally:
        post_execute_in_worker.send(sender="django_q", func=function, task=task)
    job_spans = [s for s in spans.get_finished_spans() if s.name.startswith("job ")]
    assert len(job_spans) == 1
    job = job_spans[0]
    assert job.parent is None and job.kind == SpanKind.CONSUMER
    assert job.context.trace_id != server.context.trace_id
    assert [link.context.trace_id for link in job.links] == [server.context.trace_id]
    assert job.attributes["cairn.workspace_id"] == alice_ws
    # The job's own statements are inside its trace.
    inner = [s for s in spans.get_finished_spans() if s.context.trace_id == job.context.trace_id]
    assert len(inner) > 1
    assert memory["id"] and "cosign" not in all_attribute_text(spans.get_finished_spans())


def test_it_puts_the_trace_id_in_every_json_log_line_and_nothing_when_off(spans):
    formatter = JsonFormatter()
    record = logging.LogRecord("cairn.test", logging.INFO, __file__, 1, "hello", None, None)
    with tracing.span("outer"):
        inside = json.loads(formatter.format(record))
        expected = tracing.trace_id()
    assert expected is not None and inside["trace_id"] == expected
    outside = json.loads(formatter.format(record))
    assert "trace_id" not in outside


def test_it_scrubs_query_strings_headers_and_statements_from_what_leaves():
    kept = tracing.scrubbed_attributes(
        {
            "http.route": "api/sdk/v1/context/get",
            "http.target": "/accounts/reset/MQ/abc-token/?next=/x",
            "http.url": "http://h/accounts/reset/MQ/abc-token/?q=secret",
            "url.full": "http://h/p?key=sk-123",
            "url.query": "q=secret",
            "http.request.header.authorization": ("Bearer mem_x",),
            "db.statement": "SELECT 'secret'",
            "db.query.text": "SELECT 'secret'",
            "http.status_code": 200,
        }
    )
    assert kept == {
        "http.route": "api/sdk/v1/context/get",
        "http.target": "api/sdk/v1/context/get",
        "http.status_code": 200,
    }
    outbound = tracing.scrubbed_attributes({"http.url": "https://api.example.com/v1/embeddings?key=sk-1"})
    assert outbound == {"http.url": "https://api.example.com/v1/embeddings"}


def test_it_is_off_without_an_endpoint_and_refuses_what_it_cannot_export():
    from django.core.exceptions import ImproperlyConfigured

    assert not tracing.tracing_wanted({})
    assert not tracing.tracing_wanted({"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on"})
    assert tracing.tracing_wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert tracing.tracing_wanted({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"})
    assert not tracing.tracing_wanted(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}
    )
    assert not tracing.tracing_wanted(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"}
    )
    with pytest.raises(ImproperlyConfigured, match="http/protobuf"):
        tracing.tracing_wanted(
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
        )
    with pytest.raises(ImproperlyConfigured, match="OTLP"):
        tracing.tracing_wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_EXPORTER": "zipkin"})
    # Off in this process (the test settings set no endpoint): the helpers are one branch and a shared no-op.
    assert not tracing.ENABLED
    assert tracing.span("x") is tracing.span("y")
    assert tracing.trace_id() is None
    assert tracing.job_message_stamp({"id": 1}) == {"id": 1}


def test_it_answers_without_a_trace_id_when_off(alice_api):
    response = alice_api.post("context/get", {"query": "anything"})
    assert response.status_code == 200
    assert set(response.json()["meta"]) == {"version", "endpoint", "requestId", "timestamp"}


def test_it_stamps_tasks_queued_through_async_task(spans):
    from django_q.tasks import async_task

    tracing.job_signals_connect()
    OrmQ.objects.all().delete()
    with tracing.span("request") as span:
        async_task("pipeline.tasks.background_jobs_sweep")
        expected = format(span.get_span_context().trace_id, "032x")
    (message,) = [SignedPackage.loads(m.payload) for m in OrmQ.objects.all()]
    assert message[tracing.TRACE_KEY].split("-")[1] == expected

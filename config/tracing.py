"""OpenTelemetry traces: the standard SDK, exporting OTLP over HTTP, configured by the standard environment
variables only (docs/operations.md, "Tracing").

Off unless OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set: nothing is imported,
no provider is installed, and every helper here is one test of `ENABLED` before it returns a shared no-op.
On, each process (a gunicorn worker, a django-q2 worker, a command) exports its spans in the background
(BatchSpanProcessor, which survives a fork) to the endpoint's /v1/traces.

What is traced: every request (the Django instrumentation), every SQL statement (a span per statement from
Django's execute wrappers: the operation only, never the text or its values), outbound HTTP through httpx and
requests, each litellm call (embedding, completion, rerank: model and token counts), the stages of
context/get, and every background job (a trace of its own, linked to the request that queued it).

Spans carry ids, counts, strategies and timings, never memory content, queries or keys: every span passes
through `_scrubbed` before it leaves the process, which drops query strings and anything that names a header,
a statement text or a URL with its query, whatever an instrumentation recorded.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span, Tracer

logger = logging.getLogger("cairn.tracing")

# True once a provider is installed in this process: the one branch a traced code path pays when it is off.
ENABLED = False
_tracer: Tracer | None = None
_provider: TracerProvider | None = None

AttributeValue = str | bool | int | float | Sequence[str] | Sequence[int] | Sequence[float]

# Attributes that may carry what a span must not: a URL's query (search words, a provider key passed as
# ?key=), request or response headers (Authorization, cookies) and statement texts.
_DROPPED_PREFIXES = ("http.request.header.", "http.response.header.", "db.statement", "db.query.text")
_DROPPED = frozenset({"url.query", "http.request.body", "http.response.body"})
# URL-like attributes kept without their query string or fragment.
_URL_KEYS = frozenset({"http.url", "url.full", "http.target"})
# A server span's path may hold a token (a password-reset link): where the route template is known, the path
# attributes become the template.
_PATH_KEYS = ("http.target", "url.path")


def tracing_wanted(environment: Mapping[str, str] | None = None) -> bool:
    """Whether the environment asks for traces: an OTLP endpoint is set, and neither OTEL_SDK_DISABLED nor
    OTEL_TRACES_EXPORTER=none turns them off. Only OTLP over HTTP is built in: another protocol or exporter is
    a configuration error, said at start rather than found missing later."""
    environ = os.environ if environment is None else environment
    endpoint = (
        environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
        or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    )
    if not endpoint or environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() or "otlp"
    if exporter == "none":
        return False
    if exporter != "otlp":
        raise ImproperlyConfigured(
            f"OTEL_TRACES_EXPORTER={exporter!r} is not supported: this server exports traces with OTLP over "
            "HTTP only (set it to otlp, or leave it unset)."
        )
    protocol = (
        environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "").strip()
        or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "").strip()
        or "http/protobuf"
    )
    if protocol != "http/protobuf":
        raise ImproperlyConfigured(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not supported: this server exports traces with "
            "OTLP over HTTP (http/protobuf); point the endpoint at a collector's HTTP receiver (port 4318)."
        )
    return True


def tracing_configure(*, service_name: str, exporter: SpanExporter | None = None) -> bool:
    """Install the tracer provider and the instrumentations when the environment asks for traces (or
    `exporter` is given: the tests' in-memory exporter, exported at once). `service_name` is the default
    for OTEL_SERVICE_NAME. Once per process; returns whether tracing is on."""
    global ENABLED, _tracer, _provider
    if ENABLED:
        return True
    if exporter is None and not tracing_wanted():
        return False
    from opentelemetry import trace
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    attributes: dict[str, str] = {}
    if not os.environ.get("OTEL_SERVICE_NAME", "").strip():
        attributes[SERVICE_NAME] = service_name
    # The sampler comes from OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG (the SDK's default: parent-based,
    # always on); the resource from OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
    provider = TracerProvider(resource=Resource.create(attributes))
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        # Endpoint, headers, timeout and compression from OTEL_EXPORTER_OTLP_*.
        provider.add_span_processor(BatchSpanProcessor(_scrubbing(OTLPSpanExporter())))
    else:
        provider.add_span_processor(SimpleSpanProcessor(_scrubbing(exporter)))
    trace.set_tracer_provider(provider)
    _provider = provider
    _tracer = provider.get_tracer("cairn")
    ENABLED = True
    _instrument(provider)
    return True


def _instrument(provider: TracerProvider) -> None:
    from django.db.backends.signals import connection_created
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.instrumentation.requests import RequestsInstrumentor

    # Before the WSGI handler loads its middleware (AppConfig.ready runs first): the instrumentation adds its
    # own at the front, so the request log and everything after it run inside the request's span.
    DjangoInstrumentor().instrument(tracer_provider=provider)
    HTTPXClientInstrumentor().instrument(tracer_provider=provider)
    RequestsInstrumentor().instrument(tracer_provider=provider)
    connection_created.connect(_statement_spans_ensure, dispatch_uid="cairn.tracing.statements")
    from django.db import connections

    for connection in connections.all(initialized_only=True):
        _statement_spans_ensure(sender=None, connection=connection)


def tracing_shutdown() -> None:
    """Flush and stop (tests; a process exporting in the background flushes at exit by itself)."""
    global ENABLED, _tracer, _provider
    if not ENABLED:
        return
    from django.db import connections
    from django.db.backends.signals import connection_created
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.instrumentation.requests import RequestsInstrumentor

    DjangoInstrumentor().uninstrument()
    HTTPXClientInstrumentor().uninstrument()
    RequestsInstrumentor().uninstrument()
    connection_created.disconnect(dispatch_uid="cairn.tracing.statements")
    from django_q.signals import post_execute_in_worker, pre_enqueue, pre_execute

    pre_enqueue.disconnect(dispatch_uid="cairn.tracing.job_queued")
    pre_execute.disconnect(dispatch_uid="cairn.tracing.job_start")
    post_execute_in_worker.disconnect(dispatch_uid="cairn.tracing.job_end")
    for connection in connections.all(initialized_only=True):
        connection.execute_wrappers[:] = [w for w in connection.execute_wrappers if w is not _statement_span]
    if _provider is not None:
        _provider.shutdown()
    ENABLED, _tracer, _provider = False, None, None
    # The API keeps the first provider it was given; the next configure (a test) installs its own.
    from opentelemetry import trace

    trace._TRACER_PROVIDER_SET_ONCE._done = False
    trace._TRACER_PROVIDER = None


# --- spans of our own -------------------------------------------------------------------------------------

_NOOP = contextlib.nullcontext(None)


def span(
    name: str, attributes: Mapping[str, AttributeValue] | None = None
) -> contextlib.AbstractContextManager[Any]:
    """A span around a block (the current span's child), or a shared no-op when tracing is off. The block
    gets the span (None when off) to add attributes as it learns them (`span_set`)."""
    if not ENABLED or _tracer is None:
        return _NOOP
    return _tracer.start_as_current_span(name, attributes=attributes)


def span_set(target: Span | None, attributes: Mapping[str, AttributeValue]) -> None:
    if target is not None:
        target.set_attributes(attributes)


def trace_id() -> str | None:
    """The current trace's id (32 hex digits), None when tracing is off or nothing is being traced."""
    if not ENABLED:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


# --- background jobs: a trace each, linked to the request that queued them ---------------------------------

TRACE_KEY = "cairn_traceparent"


def job_message_stamp(task: dict[str, Any]) -> dict[str, Any]:
    """Put the current span's W3C traceparent in a django-q2 task message, for the job's own trace to link to
    (job_span_start). Nothing when tracing is off or no span is current."""
    if ENABLED:
        from opentelemetry.propagate import inject

        carrier: dict[str, str] = {}
        inject(carrier)
        if "traceparent" in carrier:
            task[TRACE_KEY] = carrier["traceparent"]
    return task


_job_spans: list[tuple[Any, Any]] = []


def job_span_start(*, func: str, task: Mapping[str, Any]) -> None:
    """django-q2's pre_execute: a new trace for the job (a root span, not the request's child: the request
    has long answered), linked to the span that queued it when the message carries one."""
    if not ENABLED or _tracer is None:
        return
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.propagate import extract
    from opentelemetry.trace import Link, SpanKind

    links = []
    parent = task.get(TRACE_KEY)
    if isinstance(parent, str):
        linked = trace.get_current_span(extract({"traceparent": parent})).get_span_context()
        if linked.is_valid:
            links.append(Link(linked))
    args = task.get("args") or ()
    attributes: dict[str, AttributeValue] = {"cairn.job.func": func}
    if args and isinstance(args[0], int):
        attributes["cairn.workspace_id"] = args[0]
    # The kind of a pipeline or background job is its last short text argument (ids are numbers or UUIDs).
    kind = next((a for a in reversed(args[1:]) if isinstance(a, str) and a.isidentifier()), None)
    if kind is not None:
        attributes["cairn.job.kind"] = kind
    job_span = _tracer.start_span(
        f"job {func.rsplit('.', 1)[-1]}",
        context=otel_context.Context(),
        kind=SpanKind.CONSUMER,
        links=links,
        attributes=attributes,
    )
    token = otel_context.attach(trace.set_span_in_context(job_span))
    _job_spans.append((job_span, token))


def job_signals_connect() -> None:
    """Every django-q2 task the workers of this process run gets its span (job_span_start/job_span_end), and
    every task queued through django-q2's own async_task carries the queuing span's context (our job queues
    stamp their messages themselves: job_message_stamp)."""
    from django_q.signals import post_execute_in_worker, pre_enqueue, pre_execute

    pre_enqueue.connect(_on_pre_enqueue, dispatch_uid="cairn.tracing.job_queued")
    pre_execute.connect(_on_pre_execute, dispatch_uid="cairn.tracing.job_start")
    post_execute_in_worker.connect(_on_post_execute, dispatch_uid="cairn.tracing.job_end")


def _on_pre_enqueue(sender: Any, task: dict[str, Any], **kwargs: Any) -> None:
    job_message_stamp(task)


def _on_pre_execute(sender: Any, func: Any, task: Mapping[str, Any], **kwargs: Any) -> None:
    name = task.get("func")
    job_span_start(func=name if isinstance(name, str) else getattr(func, "__name__", "task"), task=task)


def _on_post_execute(sender: Any, task: Mapping[str, Any], **kwargs: Any) -> None:
    job_span_end(task=task)


def job_span_end(*, task: Mapping[str, Any]) -> None:
    """django-q2's post_execute_in_worker: end the job's span with its outcome."""
    if not _job_spans:
        return
    from opentelemetry import context as otel_context
    from opentelemetry.trace import Status, StatusCode

    job_span, token = _job_spans.pop()
    if task.get("success") is False:
        job_span.set_status(Status(StatusCode.ERROR))
    otel_context.detach(token)
    job_span.end()


# --- litellm calls ---------------------------------------------------------------------------------------


def llm_span(
    operation: str, *, model: str, count: int | None = None
) -> contextlib.AbstractContextManager[Any]:
    """A span around one litellm call: GenAI semantic conventions' operation and model (the provider's HTTP
    call is its child through the httpx instrumentation)."""
    if not ENABLED:
        return _NOOP
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": operation,
        "gen_ai.request.model": model,
    }
    if count is not None:
        attributes["cairn.llm.inputs"] = count
    return span(f"{operation} {model}", attributes)


def llm_usage(target: Span | None, response: Any) -> None:
    """Token counts of a litellm response on its span (nothing else of the response)."""
    if target is None:
        return
    usage = getattr(response, "usage", None)
    if usage is None and isinstance(response, Mapping):
        usage = response.get("usage")
    for name, key in (
        ("gen_ai.usage.input_tokens", "prompt_tokens"),
        ("gen_ai.usage.output_tokens", "completion_tokens"),
    ):
        value = usage.get(key) if isinstance(usage, Mapping) else getattr(usage, key, None)
        if isinstance(value, int):
            target.set_attribute(name, value)


# --- statements ---------------------------------------------------------------------------------------------


def _statement_spans_ensure(sender: Any, connection: Any, **kwargs: Any) -> None:
    if _statement_span not in connection.execute_wrappers:
        connection.execute_wrappers.append(_statement_span)


def _statement_span(execute: Callable[..., Any], sql: Any, params: Any, many: bool, context: Any) -> Any:
    """One CLIENT span per statement: the database system, the database and the operation (the statement's
    first word). Never the text: it would be the same for every call and is in the code; its values are
    what a span must not carry."""
    if not ENABLED or _tracer is None:
        return execute(sql, params, many, context)
    from opentelemetry.trace import SpanKind

    text = sql if isinstance(sql, str) else ""
    operation = text.lstrip(" \n(").split(None, 1)[0].upper() if text.strip() else "SQL"
    connection = context["connection"]
    attributes: dict[str, AttributeValue] = {
        "db.system.name": "postgresql",
        "db.system": "postgresql",
        "db.namespace": str(connection.settings_dict.get("NAME") or ""),
        "db.operation.name": operation[:32],
    }
    with _tracer.start_as_current_span(operation[:32], kind=SpanKind.CLIENT, attributes=attributes):
        return execute(sql, params, many, context)


# --- what leaves the process ------------------------------------------------------------------------------


def _without_query(value: str) -> str:
    return value.split("?", 1)[0].split("#", 1)[0]


def scrubbed_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """A span's attributes as they may leave the process (see the module's docstring)."""
    route = attributes.get("http.route")
    kept: dict[str, Any] = {}
    for key, value in attributes.items():
        if key in _DROPPED or key.startswith(_DROPPED_PREFIXES):
            continue
        if key in _URL_KEYS and isinstance(value, str):
            value = _without_query(value)
        kept[key] = value
    if isinstance(route, str):
        for key in _PATH_KEYS:
            if key in kept:
                kept[key] = route
        kept.pop("http.url", None)
        kept.pop("url.full", None)
    return kept


def _scrubbed(span: ReadableSpan) -> ReadableSpan:
    from opentelemetry.sdk.trace import ReadableSpan

    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=scrubbed_attributes(span.attributes or {}),
        # Events carry attributes too (an exception's message may quote a value): only their names and
        # the exception's type leave.
        events=[_scrubbed_event(event) for event in span.events],
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def _scrubbed_event(event: Any) -> Any:
    from opentelemetry.sdk.trace import Event

    kept = {k: v for k, v in (event.attributes or {}).items() if k == "exception.type"}
    return Event(event.name, kept, event.timestamp)


def _scrubbing(inner: SpanExporter) -> SpanExporter:
    """The real exporter, wrapped: every span is scrubbed on its way out. (The class is made here so that the
    SDK is imported only when tracing is on.)"""
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class ScrubbingExporter(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return inner.export([_scrubbed(s) for s in spans])

        def shutdown(self) -> None:
            inner.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return bool(inner.force_flush(timeout_millis))

    return ScrubbingExporter()

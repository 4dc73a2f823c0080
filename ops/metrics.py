"""Prometheus metrics.

Two sources, because Cairn runs many processes:
- per-process instruments (request latency, retrievals) with prometheus_client, which aggregates the gunicorn
  workers of a host when PROMETHEUS_MULTIPROC_DIR is set (prometheus_client's multiprocess mode);
- numbers that must be shared by every process, worker hosts included (jobs, LLM tokens and cost, embeddings),
  kept in ops_metric_counters and read, with the broker's queue, at scrape time.
Label values are route templates, statuses, job kinds, strategies and model names: never a workspace, user or
key.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from typing import Any

from django.db import connections
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import REGISTRY, Collector

REQUEST_SECONDS = Histogram(
    "cairn_http_request_duration_seconds",
    "Time to answer an HTTP request, per route template, method and status.",
    ["route", "method", "status"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
RETRIEVALS = Counter(
    "cairn_retrievals",
    "Retrievals (context/get, graph/trace) per requested and applied strategy and fallback reason.",
    ["endpoint", "requested", "applied", "fallback_reason"],
)

JOB_DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

# Shared counters: name in ops_metric_counters → (exported family, help).
JOBS = "cairn_jobs"
JOB_SECONDS = "cairn_job_duration_seconds"
LLM_TOKENS = "cairn_llm_tokens"
LLM_COST = "cairn_llm_cost_usd"
LLM_CALLS = "cairn_llm_calls"
EMBEDDINGS = "cairn_embeddings"
_COUNTER_HELP = {
    JOBS: "Pipeline job runs per kind and outcome (succeeded, retry, dead_letter, other).",
    LLM_TOKENS: "LLM tokens used, per model and direction (prompt, completion).",
    LLM_COST: "LLM cost in US dollars, per model.",
    LLM_CALLS: "LLM calls per model and outcome (ok, error).",
    EMBEDDINGS: "Memories embedded, per model.",
}


def counters_add(*, rows: Iterable[tuple[str, dict[str, str], float]]) -> None:
    encoded = [(name, json.dumps(labels, sort_keys=True), float(value)) for name, labels, value in rows]
    if not encoded:
        return
    with connections["app"].cursor() as cursor:
        cursor.executemany(
            """
            INSERT INTO ops_metric_counters (name, labels, value, updated_at)
            VALUES (%s, %s::jsonb, %s, now())
            ON CONFLICT (name, labels) DO UPDATE
                SET value = ops_metric_counters.value + EXCLUDED.value, updated_at = now()
            """,
            encoded,
        )


def job_duration_record(*, kind: str, seconds: float, outcomes: dict[str, int]) -> None:
    """One task run of `kind`: its duration (histogram) and its jobs' outcomes."""
    bucket = next((str(le) for le in JOB_DURATION_BUCKETS if seconds <= le), "+Inf")
    rows: list[tuple[str, dict[str, str], float]] = [
        (JOB_SECONDS + "_bucket", {"kind": kind, "le": bucket}, 1.0),
        (JOB_SECONDS + "_sum", {"kind": kind}, seconds),
        (JOB_SECONDS + "_count", {"kind": kind}, 1.0),
    ]
    rows += [(JOBS, {"kind": kind, "outcome": outcome}, float(n)) for outcome, n in outcomes.items() if n]
    counters_add(rows=rows)


class DatabaseCollector(Collector):
    """Reads the shared counters, the broker queue and the worker heartbeats at scrape time."""

    def collect(self) -> Iterator[Metric]:
        with connections["app"].cursor() as cursor:
            cursor.execute("SELECT name, labels, value FROM ops_metric_counters ORDER BY name, labels::text")
            counters = cursor.fetchall()
            cursor.execute(
                """
                SELECT count(*) FILTER (WHERE lock <= now()), count(*) FILTER (WHERE lock > now()),
                       coalesce(extract(epoch FROM now() - min(lock) FILTER (WHERE lock <= now())), 0)
                FROM django_q_ormq
                """
            )
            ready, delayed, oldest = cursor.fetchone()
            cursor.execute(
                "SELECT coalesce(extract(epoch FROM now() - max(seen_at)), -1), count(*) "
                "FROM ops_worker_heartbeats WHERE seen_at > now() - interval '10 minutes'"
            )
            heartbeat_age, workers = cursor.fetchone()
        queue = GaugeMetricFamily(
            "cairn_queue_depth", "Broker messages waiting, by state (ready, delayed retry).", labels=["state"]
        )
        queue.add_metric(["ready"], ready)
        queue.add_metric(["delayed"], delayed)
        yield queue
        yield GaugeMetricFamily(
            "cairn_queue_oldest_age_seconds", "Age of the oldest ready broker message.", value=float(oldest)
        )
        yield GaugeMetricFamily(
            "cairn_worker_heartbeat_age_seconds",
            "Seconds since a worker last beat (-1: none in 10 minutes).",
            value=float(heartbeat_age),
        )
        yield GaugeMetricFamily(
            "cairn_workers_alive", "Worker processes that beat in the last 10 minutes.", value=float(workers)
        )
        yield from _counter_families(counters)


def _counter_families(rows: list[tuple[str, Any, float]]) -> Iterator[Metric]:
    families: dict[str, CounterMetricFamily] = {}
    buckets: dict[str, dict[str, float]] = {}
    sums: dict[str, float] = {}
    for name, labels, value in rows:
        labels = labels if isinstance(labels, dict) else json.loads(labels)
        if name == JOB_SECONDS + "_bucket":
            buckets.setdefault(labels["kind"], {})[labels["le"]] = value
        elif name == JOB_SECONDS + "_sum":
            sums[labels["kind"]] = value
        elif name in _COUNTER_HELP:
            names = sorted(labels)
            family = families.setdefault(name, CounterMetricFamily(name, _COUNTER_HELP[name], labels=names))
            family.add_metric([str(labels[key]) for key in names], value)
    yield from families.values()
    if buckets:
        histogram = HistogramMetricFamily(
            JOB_SECONDS, "Duration of one job task run, per kind.", labels=["kind"]
        )
        for kind, counts in sorted(buckets.items()):
            cumulative, series = 0.0, []
            for le in [*(str(b) for b in JOB_DURATION_BUCKETS), "+Inf"]:
                cumulative += counts.get(le, 0.0)
                series.append((le, cumulative))
            histogram.add_metric([kind], series, sum_value=sums.get(kind, 0.0))
        yield histogram


def metrics_render() -> bytes:
    """The text exposition: this host's processes plus the shared numbers from the database."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        local = CollectorRegistry()
        multiprocess.MultiProcessCollector(local)
    else:
        local = REGISTRY
    shared = CollectorRegistry(auto_describe=False)
    shared.register(DatabaseCollector())
    return generate_latest(local) + generate_latest(shared)

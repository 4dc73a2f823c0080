"""/healthz, /readyz and /metrics: outside the SDK auth, real database, real request path."""

from __future__ import annotations

import json
import logging

from django.test import Client
from django.utils import timezone

from ops import heartbeat, metrics
from ops.jsonlog import JsonFormatter

TOKEN = "metrics-token-for-tests"


def test_it_answers_healthz_without_auth_or_dependencies():
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_it_is_not_ready_without_a_worker_heartbeat(settings):
    settings.OPS_READYZ_REQUIRE_WORKER = True
    response = Client().get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "not_ready"
    assert body["checks"]["database"]["ok"] and body["checks"]["migrations"]["ok"]
    assert not body["checks"]["worker"]["ok"] and "qcluster" in body["checks"]["worker"]["detail"]


def test_it_is_ready_with_a_recent_heartbeat(settings):
    heartbeat.heartbeat_beat(started_at=timezone.now(), worker="test-host:1")
    response = Client().get("/readyz")
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "ready"


def test_it_is_not_ready_when_the_heartbeat_is_old(settings):
    heartbeat.heartbeat_beat(started_at=timezone.now(), worker="test-host:2")
    settings.OPS_HEARTBEAT_MAX_AGE_SECONDS = 1
    from django.db import connections

    with connections["app"].cursor() as cursor:
        cursor.execute("UPDATE ops_worker_heartbeats SET seen_at = now() - interval '1 hour'")
    response = Client().get("/readyz")
    assert response.status_code == 503
    assert "ago" in response.json()["checks"]["worker"]["detail"]


def test_it_hides_metrics_without_the_token(settings):
    settings.METRICS_TOKEN = ""
    assert Client().get("/metrics").status_code == 404
    settings.METRICS_TOKEN = TOKEN
    assert Client().get("/metrics").status_code == 401
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401


def test_it_exports_request_job_llm_and_queue_metrics_without_tenant_labels(settings, personas):
    settings.METRICS_TOKEN = TOKEN
    memory = personas.alice_api.add("the metrics should never show this sentence")
    personas.alice_api.ok("context/get", {"query": "metrics"})
    metrics.job_duration_record(kind="embed", seconds=0.3, outcomes={"succeeded": 2, "retry": 1})
    metrics.counters_add(rows=[(metrics.LLM_TOKENS, {"model": "openai/fake", "direction": "prompt"}, 120)])
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    text = response.content.decode()
    assert (
        'cairn_http_request_duration_seconds_bucket{le="0.005",method="POST",route="/api/sdk/v1/memories/add"'
        in text
        or 'route="/api/sdk/v1/memories/add"' in text
    )
    assert 'status="201"' in text
    assert 'cairn_jobs_total{kind="embed",outcome="succeeded"} 2.0' in text
    assert 'cairn_job_duration_seconds_bucket{kind="embed",le="0.5"} 1.0' in text
    assert 'cairn_llm_tokens_total{direction="prompt",model="openai/fake"} 120.0' in text
    assert 'cairn_queue_depth{state="ready"}' in text and "cairn_queue_oldest_age_seconds" in text
    assert "cairn_retrievals_total" in text
    for secret in (memory["id"], str(personas.acme.id) + '"', personas.alice_api.key[:12], "never show"):
        assert secret not in text


def test_it_logs_one_json_line_per_request_without_content_or_key(personas, caplog):
    caplog.set_level(logging.INFO, logger="cairn.request")
    personas.alice_api.add("a private sentence that must stay out of logs")
    records = [r for r in caplog.records if r.name == "cairn.request"]
    assert records
    line = json.loads(JsonFormatter().format(records[-1]))
    assert line["route"] == "/api/sdk/v1/memories/add" and line["status"] == 201
    assert line["workspace_id"] and line["key_prefix"] and line["request_id"] and line["duration_ms"] >= 0
    text = json.dumps(line)
    assert "private sentence" not in text and personas.alice_api.key not in text

"""rollout_state_get, the call on every context/get: two queries when it reads, none while cached, and a safe
answer when the rollout tables cannot be read."""

from __future__ import annotations

from django.db import DatabaseError, connections
from django.test.utils import CaptureQueriesContext

from rollout import selectors, services
from tenancy.rls import workspace_context
from tests.rollout.helpers import record


def reads(queries: CaptureQueriesContext) -> list[str]:
    """The statements that read data (no savepoints, no RLS setting)."""
    return [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].lstrip().upper().startswith("SELECT") and "set_config" not in q["sql"]
    ]


def test_it_reads_the_state_in_two_queries_and_then_caches_it(alice_api, ws):
    record(ws, 3)
    with workspace_context(ws), CaptureQueriesContext(connections["app"]) as queries:
        state = services.rollout_state_get(workspace_id=ws)
    assert len(reads(queries)) == 2
    assert state == services.RolloutState(
        mode="off",
        canary_blocked=False,
        gate_status="insufficient_data",
        gate_reason_codes=[],
        default_strategy="lexical",
        ready_for_default_on=False,
        blocker_codes=[
            "MIN_HYBRID_SAMPLES_NOT_MET",
            "MIN_CANARY_SAMPLES_NOT_MET",
            "QUALITY_STATUS_INSUFFICIENT_DATA",
        ],
    )
    with workspace_context(ws), CaptureQueriesContext(connections["app"]) as queries:
        assert services.rollout_state_get(workspace_id=ws) is state
    assert queries.captured_queries == []


def test_it_rereads_after_the_ttl(ws, settings):
    settings.ROLLOUT_STATE_CACHE_SECONDS = 0
    assert services.rollout_state_get(workspace_id=ws).gate_status == "insufficient_data"
    record(ws, 16)
    record(ws, 4, reason="graph_expansion_error")
    assert services.rollout_state_get(workspace_id=ws).gate_status == "fail"


def test_it_keeps_a_stale_state_until_cleared(ws):
    assert services.rollout_state_get(workspace_id=ws).gate_status == "insufficient_data"
    record(ws, 16)
    record(ws, 4, reason="graph_expansion_error")
    assert services.rollout_state_get(workspace_id=ws).gate_status == "insufficient_data"
    services.rollout_cache_clear(ws)
    assert services.rollout_state_get(workspace_id=ws).canary_blocked is True


def test_it_fails_closed_when_the_gate_cannot_be_read(alice_api, ws, monkeypatch):
    alice_api.ok("graph/rollout", {"mode": "canary"})

    def broken(**kwargs):
        raise DatabaseError("metrics unreadable")

    monkeypatch.setattr(selectors, "metrics_windows", broken)
    with workspace_context(ws):
        state = services.rollout_state_get(workspace_id=ws)
        # The savepoint kept the caller's transaction usable.
        assert services.rollout_state_get(workspace_id=ws) is state
        with connections["app"].cursor() as cursor:
            cursor.execute("SELECT 1")
    assert state.gate_status == "unavailable" and state.canary_blocked is True
    assert state.mode == "off"  # the settings could not be trusted either: the safe default
    assert "QUALITY_STATUS_UNAVAILABLE" in state.blocker_codes
    status = alice_api.ok("graph/status", {})
    assert status["qualityGate"]["status"] == "unavailable"
    assert "GRAPH_ROLLOUT_STATE_UNAVAILABLE" in {error["code"] for error in status["recentErrors"]}
    alice_api.error("graph/rollout", {"mode": "canary"}, status=409, code="CANARY_ROLLOUT_BLOCKED")


def test_it_records_one_row_per_call(ws):
    from rollout.models import RetrievalMetric

    with workspace_context(ws), CaptureQueriesContext(connections["app"]) as queries:
        services.retrieval_metric_record(
            workspace_id=ws,
            mode="shadow",
            requested_strategy="semantic",
            applied_strategy="semantic",
            shadow_executed=True,
            baseline_candidates=3,
            graph_candidates=2,
            graph_expanded_count=0,
            total_candidates=3,
            fallback_triggered=False,
            fallback_reason=None,
            project_id="github.com/a/b",
            user_id="u1",
            semantic_model="local/all-MiniLM-L6-v2",
            duration_ms=4.2,
            endpoint="graph/trace",
        )
    assert [q["sql"].split()[0] for q in queries.captured_queries if "INSERT" in q["sql"]] == ["INSERT"]
    assert not any(q["sql"].lstrip().upper().startswith("DELETE") for q in queries.captured_queries)
    with workspace_context(ws):
        row = RetrievalMetric.objects.get()
    assert (row.endpoint, row.project_id, row.user_id, row.duration_ms) == (
        "graph/trace",
        "github.com/a/b",
        "u1",
        4.2,
    )


def test_it_stores_nulls_and_rejects_what_does_not_fit(ws):
    # The INSERT is prepared, each value cast to its column's type: NULLs keep their column's type, and a
    # value too long for its column fails the call instead of being cut by the cast.
    import pytest
    from django.db import DataError

    from rollout.models import RetrievalMetric

    def record_one(**overrides):
        values = dict(
            workspace_id=ws,
            mode="canary",
            requested_strategy="hybrid",
            applied_strategy="baseline",
            shadow_executed=False,
            baseline_candidates=0,
            graph_candidates=0,
            graph_expanded_count=0,
            total_candidates=0,
            fallback_triggered=True,
            fallback_reason=None,
            project_id=None,
            user_id=None,
            semantic_model=None,
            duration_ms=0.0,
            endpoint="context/get",
        )
        services.retrieval_metric_record(**{**values, **overrides})

    with workspace_context(ws):
        record_one()
        row = RetrievalMetric.objects.get()
        assert (row.fallback_reason, row.project_id, row.user_id, row.semantic_model) == (
            None,
            None,
            None,
            None,
        )
    with pytest.raises(DataError), workspace_context(ws):
        record_one(project_id="p" * 241)

"""Metric rows for rollout scenarios, written through the service context/get uses, and graph/rollout as read
over HTTP."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rollout import services
from rollout.models import RetrievalMetric
from tenancy.rls import workspace_context


def record(
    ws: int,
    count: int = 1,
    *,
    mode: str = "canary",
    requested: str = "hybrid",
    applied: str | None = None,
    reason: str | None = None,
    shadow: bool = False,
    baseline: int = 2,
    graph: int = 3,
    expanded: int | None = None,
    total: int | None = None,
    at: datetime | None = None,
) -> None:
    """`count` retrievals. By default a canary hybrid request that applied the graph and added one memory;
    with a fallback `reason` it fell back to the baseline (nothing added)."""
    fallback = reason is not None
    if applied is None:
        applied = "hybrid_graph" if requested == "hybrid" and not fallback else "baseline"
    if expanded is None:
        expanded = 1 if applied == "hybrid_graph" else 0
    fields: dict[str, Any] = {
        "mode": mode,
        "requested_strategy": requested,
        "applied_strategy": applied,
        "shadow_executed": shadow,
        "baseline_candidates": baseline,
        "graph_candidates": graph,
        "graph_expanded_count": expanded,
        "total_candidates": baseline + expanded if total is None else total,
        "fallback_triggered": fallback,
        "fallback_reason": reason,
        "project_id": None,
        "user_id": None,
        "semantic_model": None,
        "duration_ms": 12.5,
        "endpoint": "context/get",
    }
    with workspace_context(ws):
        for _ in range(count):
            services.retrieval_metric_record(workspace_id=ws, **fields)
        if at is not None:
            # The service stamps "now"; move the rows just written back in time.
            newest = (
                RetrievalMetric.objects.filter(workspace_id=ws).order_by("-id").values_list("id", flat=True)
            )
            RetrievalMetric.objects.filter(id__in=list(newest[:count])).update(created_at=at)


def rollout(api: Any, query: str = "") -> dict[str, Any]:
    """GET graph/rollout (`query`: a query string such as "?windowHours=48"): its data, after a 200."""
    response = api.get(f"graph/rollout{query}")
    assert response.status_code == 200, response.content
    return response.json()["data"]


def codes(items: list[dict[str, Any]]) -> set[str]:
    return {item["code"] for item in items}

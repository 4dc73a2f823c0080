"""SDK routes graph/status (and, with the read path, graph/trace and graph/rollout)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone
from ninja import Query, Router

from config.errors import success_envelope
from config.schemas import Envelope
from graphsvc import selectors as graph_selectors
from memories import selectors as memory_selectors
from memories import vectors
from memories.api import resolve_scope
from rollout.schemas import StatusIn, StatusOut, StatusQuery
from tenancy.auth import SdkKeyAuth
from tenancy.rls import workspace_context

router = Router(tags=["graph"], auth=SdkKeyAuth())


def graph_status_payload(*, workspace_id: int, top_nodes_limit: int) -> dict[str, Any]:
    pipeline = memory_selectors.pipeline_counts(workspace_id=workspace_id)
    errors = memory_selectors.recent_pipeline_errors(workspace_id=workspace_id)
    model = settings.EMBEDDING_MODEL
    vector_count, access_path = vectors.vector_state(workspace_id=workspace_id, model=model)
    recent_cutoff = timezone.now() - timezone.timedelta(hours=1)
    degraded = pipeline["deadLetter"] > 0 or any(error["timestamp"] >= recent_cutoff for error in errors)
    return {
        "health": "degraded" if degraded else "ok",
        "counts": graph_selectors.graph_counts(workspace_id=workspace_id),
        "topConnectedNodes": graph_selectors.top_connected_nodes(workspace_id=workspace_id, limit=top_nodes_limit),
        "pipeline": pipeline,
        "vectors": {"model": model, "vectors": vector_count, "accessPath": access_path},
        "recentErrors": errors,
        "sampledAt": timezone.now(),
    }


@router.post("/graph/status", response=Envelope[StatusOut], summary="Graph and pipeline health of a workspace")
def graph_status(request: HttpRequest, payload: StatusIn) -> dict[str, Any]:
    workspace_id, _ = resolve_scope(request, payload.scope)
    with workspace_context(workspace_id):
        data = graph_status_payload(workspace_id=workspace_id, top_nodes_limit=payload.topNodesLimit)
    return success_envelope(request, data)


@router.get("/graph/status", response=Envelope[StatusOut], summary="Graph and pipeline health (query string)")
def graph_status_get(request: HttpRequest, query: Query[StatusQuery]) -> dict[str, Any]:
    return graph_status(request, StatusIn(topNodesLimit=query.topNodesLimit, scope=query.scope()))

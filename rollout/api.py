"""SDK routes graph/status and graph/rollout: resolve the workspace, open its RLS transaction, call the
services."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone
from ninja import Query, Router

from config.errors import ApiError, success_envelope
from config.schemas import JSON_MAX_DEPTH, Envelope, ScopeIn
from graphsvc import selectors as graph_selectors
from memories import selectors as memory_selectors
from retrieval import vectors
from rollout import services
from rollout.schemas import (
    RolloutOut,
    RolloutPatchIn,
    RolloutQuery,
    RolloutSetIn,
    StatusIn,
    StatusOut,
    StatusQuery,
)
from tenancy.access import request_workspace_id
from tenancy.auth import SdkCaller, SdkKeyAuth
from tenancy.policy import ADMIN, READ, requires
from tenancy.rls import workspace_context

router = Router(tags=["graph"], auth=SdkKeyAuth())


def graph_status_payload(*, workspace_id: int, top_nodes_limit: int) -> dict[str, Any]:
    pipeline = memory_selectors.pipeline_counts(workspace_id=workspace_id)
    errors = memory_selectors.recent_pipeline_errors(workspace_id=workspace_id)
    model = settings.EMBEDDING_MODEL
    vector_count, access_path = vectors.vector_state(workspace_id=workspace_id, model=model)
    recent_cutoff = timezone.now() - timedelta(hours=1)
    degraded = pipeline["deadLetter"] > 0 or any(error["timestamp"] >= recent_cutoff for error in errors)
    overview = services.rollout_overview(workspace_id=workspace_id)
    if overview["qualityGate"]["status"] == "unavailable":
        errors.append(
            {
                "code": "GRAPH_ROLLOUT_STATE_UNAVAILABLE",
                "source": "rollout",
                "memoryId": None,
                "message": "Could not read the rollout mode, metrics or quality gate.",
                "timestamp": overview["qualityGate"]["evaluatedAt"],
            }
        )
    unreadable = memory_selectors.unreadable_rows(workspace_id=workspace_id)
    if any(unreadable.values()):
        # A row reads cannot serve as stored: they leave it out or answer it repaired, and say so here.
        degraded = True
        errors.append(
            {
                "code": "UNREADABLE_ROWS",
                "source": "storage",
                "memoryId": None,
                "message": f"{unreadable['memories']} memories and {unreadable['graphEdges']} graph edges "
                "hold values reads cannot serve as stored (a time outside years 1-9999 UTC, metadata deeper "
                f"than {JSON_MAX_DEPTH} levels, a number that is not finite); reads answer them repaired or "
                "leave them out. The operator repairs them with `manage.py stored_rows_repair`.",
                "timestamp": timezone.now(),
            }
        )
    errors.extend(
        {
            "code": alarm["code"],
            "message": alarm["message"],
            "source": "alarm",
            "memoryId": None,
            "timestamp": alarm["triggeredAt"],
        }
        for alarm in overview["alarms"]
    )
    return {
        "health": "degraded" if degraded else "ok",
        "counts": graph_selectors.graph_counts(workspace_id=workspace_id),
        "topConnectedNodes": graph_selectors.top_connected_nodes(
            workspace_id=workspace_id, limit=top_nodes_limit
        ),
        "pipeline": pipeline,
        "vectors": {"model": model, "vectors": vector_count, "accessPath": access_path},
        "extraction": graph_selectors.extraction_status(workspace_id=workspace_id),
        "admission": memory_selectors.admission_status(workspace_id=workspace_id),
        "rollout": overview["rollout"],
        "shadowMetrics": overview["shadowMetrics"],
        "qualityGate": overview["qualityGate"],
        "rolloutPlan": overview["rolloutPlan"],
        "alarms": overview["alarms"],
        "recentErrors": errors,
        "sampledAt": timezone.now(),
    }


@router.post(
    "/graph/status", response=Envelope[StatusOut], summary="Graph, pipeline and rollout health of a workspace"
)
@requires(READ)
def graph_status(request: HttpRequest, payload: StatusIn) -> dict[str, Any]:
    workspace_id = request_workspace_id(request, payload.scope)
    with workspace_context(workspace_id):
        data = graph_status_payload(workspace_id=workspace_id, top_nodes_limit=payload.topNodesLimit)
    return success_envelope(request, data)


@router.get(
    "/graph/status", response=Envelope[StatusOut], summary="Graph, pipeline and rollout health (query string)"
)
@requires(READ)
def graph_status_get(request: HttpRequest, query: Query[StatusQuery]) -> dict[str, Any]:
    return graph_status(request, StatusIn(topNodesLimit=query.topNodesLimit, scope=query.scope()))


def _rollout_data(
    *, workspace_id: int, scope: ScopeIn, window_hours: int | None = None, autopilot_applied: bool = False
) -> dict[str, Any]:
    overview = services.rollout_overview(
        workspace_id=workspace_id, window_hours=window_hours, autopilot_applied=autopilot_applied
    )
    overview.pop("alarms")
    overview["scope"] = {"tenantId": scope.tenantId, "userId": scope.userId, "projectId": scope.projectId}
    return overview


def _caller_label(request: HttpRequest) -> str:
    caller: SdkCaller = request.auth  # type: ignore[attr-defined]
    return f"user:{caller.user.pk}"


@router.get(
    "/graph/rollout",
    response=Envelope[RolloutOut],
    summary="Rollout mode, quality gate, plan and default-strategy policy",
    description="Read-mostly: when the workspace enabled the mode autopilot, this call also moves it to the "
    "plan's recommendedMode (rolloutPlan.autopilot.applied says so), and the default-strategy policy is "
    "evaluated once per policy window.",
)
@requires(READ)
def graph_rollout_get(request: HttpRequest, query: Query[RolloutQuery]) -> dict[str, Any]:
    scope = query.scope()
    workspace_id = request_workspace_id(request, scope)
    with workspace_context(workspace_id):
        applied = services.rollout_autopilot_apply(workspace_id=workspace_id)
        services.retrieval_policy_evaluate(workspace_id=workspace_id)
        data = _rollout_data(
            workspace_id=workspace_id, scope=scope, window_hours=query.windowHours, autopilot_applied=applied
        )
    return success_envelope(request, data)


@router.post(
    "/graph/rollout",
    response=Envelope[RolloutOut],
    summary="Set the rollout mode",
    description="mode canary is refused with 409 CANARY_ROLLOUT_BLOCKED (details: reasonCodes, "
    "qualityStatus, windowHours) while the quality gate blocks it.",
)
@requires(ADMIN)
def graph_rollout_set(request: HttpRequest, payload: RolloutSetIn) -> dict[str, Any]:
    workspace_id = request_workspace_id(request, payload.scope)
    with workspace_context(workspace_id):
        services.rollout_mode_set(
            workspace_id=workspace_id,
            mode=payload.mode,
            autopilot_enabled=None,
            updated_by=_caller_label(request),
        )
        data = _rollout_data(workspace_id=workspace_id, scope=payload.scope)
    return success_envelope(request, data)


@router.patch(
    "/graph/rollout",
    response=Envelope[RolloutOut],
    summary="Change the rollout mode and/or the mode autopilot",
    description="Send mode, autopilotEnabled or both. mode canary is refused with 409 CANARY_ROLLOUT_BLOCKED "
    "while the quality gate blocks it.",
)
@requires(ADMIN)
def graph_rollout_patch(request: HttpRequest, payload: RolloutPatchIn) -> dict[str, Any]:
    if payload.mode is None and payload.autopilotEnabled is None:
        raise ApiError(400, "INVALID_REQUEST", "Send mode, autopilotEnabled or both.")
    workspace_id = request_workspace_id(request, payload.scope)
    with workspace_context(workspace_id):
        services.rollout_mode_set(
            workspace_id=workspace_id,
            mode=payload.mode,
            autopilot_enabled=payload.autopilotEnabled,
            updated_by=_caller_label(request),
        )
        data = _rollout_data(workspace_id=workspace_id, scope=payload.scope)
    return success_envelope(request, data)

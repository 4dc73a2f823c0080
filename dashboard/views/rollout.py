"""The rollout page: the mode (changed by admins, confirmed before canary or off), the quality gate and its
trend, the plan and its blockers, graph health, the pipeline queue, LLM spend, recent errors."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from config.errors import ApiError
from dashboard.access import SignedInRequest, workspace_page
from dashboard.views.common import changed_by, confirmation_page, confirmed, page
from graphsvc import selectors as graph_selectors
from memories.selectors import pipeline_counts, recent_pipeline_errors
from rollout import selectors as rollout_selectors
from rollout import services as rollout_services
from rollout.models import RolloutConfig
from tenancy import policy
from tenancy.models import Workspace
from tenancy.rls import workspace_context

MODE_HELP = {
    "off": (
        "Graph retrieval never runs: context/get answers from the baseline "
        "(lexical, semantic or hybrid) only."
    ),
    "shadow": (
        "The graph runs next to the baseline and is measured, but callers still get the baseline answer."
    ),
    "canary": "Hybrid requests get graph-expanded results; allowed only while the quality gate passes.",
}
# Modes that change what agents receive: asked twice.
MODE_CONFIRM = {
    "canary": "Agents asking for hybrid retrieval will get graph-expanded context from now on.",
    "off": "Graph retrieval stops entirely: no more shadow measurements, no graph-expanded context.",
}
# How the gate's status reads: only a real failure is red; too little traffic yet is not a failure.
GATE_TONE = {
    "pass": "good",
    "warn": "warn",
    "fail": "bad",
    "unavailable": "neutral",
    "insufficient_data": "neutral",
}
# The plan's blocker codes as people read them (an unknown code is shown as itself, in words).
BLOCKER_TEXT = {
    "MIN_SHADOW_EXECUTIONS_NOT_MET": "too few shadow runs yet",
    "SHADOW_GRAPH_CANDIDATES_TOO_LOW": "shadow runs find too few graph candidates",
    "SHADOW_GRAPH_ERROR_RATE_TOO_HIGH": "too many graph errors in shadow",
    "MIN_HYBRID_SAMPLES_NOT_MET": "too few hybrid requests yet",
    "MIN_CANARY_SAMPLES_NOT_MET": "too few canary requests yet",
    "FALLBACK_RATE_TOO_HIGH": "too many fallbacks",
    "GRAPH_ERROR_RATE_TOO_HIGH": "too many graph errors",
    "EXPANSION_COVERAGE_TOO_LOW": "expansion adds memories too rarely",
    "QUALITY_STATUS_INSUFFICIENT_DATA": "the gate has too little data to judge",
}
TREND_BUCKETS = 12
# The trend covers at least a day, however short the gate's window: an hour-long window is empty most of
# the time, and an empty chart says nothing.
TREND_MIN_HOURS = 24
STAGE_ORDER = ("off", "shadow", "canary", "default_on")
CHART_WIDTH, CHART_HEIGHT = 600, 120


def _trend_chart(points: list[rollout_selectors.TrendPoint], thresholds: dict[str, float]) -> dict[str, Any]:
    """Coordinates for a server-rendered SVG: request bars and the two fallback rates as lines, with the
    gate's limits as dashed lines (all as SVG attributes: the CSP allows no inline style)."""
    count = len(points)
    step = CHART_WIDTH / max(count, 1)
    top = max([p.total_requests for p in points] + [1])
    bars = [
        {
            "x": round(i * step + 2, 1),
            "width": round(step - 4, 1),
            "y": round(CHART_HEIGHT - CHART_HEIGHT * p.total_requests / top, 1),
            "height": round(CHART_HEIGHT * p.total_requests / top, 1),
            "label": f"{p.start_at:%H:%M}: {p.total_requests} requests, {p.hybrid_requested} hybrid judged",
        }
        for i, p in enumerate(points)
    ]

    def line(values: list[float | None]) -> str:
        # A slice without hybrid requests has no rate: the line skips it rather than dropping to zero.
        return " ".join(
            f"{round(i * step + step / 2, 1)},{round(CHART_HEIGHT - CHART_HEIGHT * min(v, 1.0), 1)}"
            for i, v in enumerate(values)
            if v is not None
        )

    def level(value: float) -> float:
        return round(CHART_HEIGHT - CHART_HEIGHT * value, 1)

    return {
        "width": CHART_WIDTH,
        "height": CHART_HEIGHT,
        "bars": bars,
        "fallback": line([p.fallback_rate if p.hybrid_requested else None for p in points]),
        "graph_error": line([p.graph_error_rate if p.hybrid_requested else None for p in points]),
        "fallback_limit": level(thresholds["fallback"]),
        "graph_error_limit": level(thresholds["graph_error"]),
        "max_requests": top,
        "ticks": [
            {"x": round(i * step + step / 2, 1), "label": f"{p.start_at:%H:%M}"}
            for i, p in enumerate(points)
            if i % 3 == 0
        ],
        "first": points[0].start_at if points else None,
        "any_traffic": any(p.total_requests for p in points),
    }


def _rollout_context(workspace: Workspace, role: str) -> dict[str, Any]:
    overview = rollout_services.rollout_overview(workspace_id=workspace.id)
    now = timezone.now()
    window = overview["qualityGate"].get("windowHours") or settings.ROLLOUT_GATE_WINDOW_HOURS
    with workspace_context(workspace.id):
        errors = recent_pipeline_errors(workspace_id=workspace.id, limit=10)
        queue = pipeline_counts(workspace_id=workspace.id)
        health = graph_selectors.graph_counts(workspace_id=workspace.id)
        extraction = graph_selectors.extraction_status(workspace_id=workspace.id)
        week = graph_selectors.llm_usage_since(workspace_id=workspace.id, since=now - timedelta(days=7))
        trend_hours = max(int(window), TREND_MIN_HOURS)
        trend = rollout_selectors.metrics_trend(
            workspace_id=workspace.id, now=now, window_hours=trend_hours, buckets=TREND_BUCKETS
        )
    rollout = overview["rollout"]
    gate = overview["qualityGate"]
    current_rank = STAGE_ORDER.index(rollout["mode"]) if rollout["mode"] in STAGE_ORDER else 0
    for stage in overview["rolloutPlan"]["stages"]:
        stage["blockers"] = [
            {"code": code, "text": BLOCKER_TEXT.get(code, code.replace("_", " ").lower())}
            for code in stage["blockerCodes"]
        ]
        # One word per stage that agrees with the mode and the plan: the stage in use is "current" (its
        # blockers then say what would send it back), the ones before it "passed".
        rank = STAGE_ORDER.index(stage["stage"]) if stage["stage"] in STAGE_ORDER else len(STAGE_ORDER)
        if rank == current_rank:
            stage["state"], stage["tone"] = "current mode", "good"
        elif rank < current_rank:
            stage["state"], stage["tone"] = "passed", "good"
        elif stage["ready"]:
            stage["state"], stage["tone"] = "ready", "good"
        else:
            stage["state"], stage["tone"] = "not yet", "neutral"
    modes = [
        {"value": value, "help": MODE_HELP[value], "confirm": MODE_CONFIRM.get(value, "")}
        for value in RolloutConfig.Mode.values
    ]
    return {
        "workspace": workspace,
        "overview": overview,
        "errors": errors,
        "modes": modes,
        "can_manage": policy.allows(role, policy.ADMIN),
        "changed_by": changed_by(rollout.get("updatedBy")),
        "gate_tone": GATE_TONE.get(gate["status"], "neutral"),
        "gate_label": str(gate["status"]).replace("_", " "),
        "queue": queue,
        "health": health,
        "extraction": extraction,
        "week": week,
        "chart": _trend_chart(
            trend,
            {
                "fallback": rollout_selectors.GATE.max_fallback_rate,
                "graph_error": rollout_selectors.GATE.max_graph_error_fallback_rate,
            },
        ),
        "window_hours": trend_hours,
    }


@workspace_page(policy.READ)
@require_GET
def rollout(request: SignedInRequest, workspace: Workspace, role: str) -> HttpResponse:
    context = _rollout_context(workspace, role)
    if request.headers.get("HX-Request"):
        return render(request, "dashboard/_rollout_panel.html", context)
    return page(request, "dashboard/rollout.html", workspace, role, context, section="rollout")


@workspace_page(policy.ADMIN)
@require_POST
def rollout_mode(request: SignedInRequest, workspace: Workspace, role: str) -> HttpResponse:
    mode = request.POST.get("mode", "")
    blocked = None
    if mode not in RolloutConfig.Mode.values:
        blocked = f"mode must be one of {', '.join(RolloutConfig.Mode.values)}"
    elif mode in MODE_CONFIRM and not confirmed(request):
        if not request.headers.get("HX-Request"):
            return confirmation_page(
                request,
                workspace,
                role,
                title=f"Switch graph retrieval to {mode}?",
                message=MODE_CONFIRM[mode],
                action=reverse("dashboard-rollout-mode", args=[workspace.id]),
                button=f"Switch to {mode}",
                cancel_url=reverse("dashboard-rollout", args=[workspace.id]),
                section="rollout",
            )
        blocked = f"Switching to {mode} needs a confirmation; nothing changed."
    else:
        try:
            rollout_services.rollout_mode_set(
                workspace_id=workspace.id,
                mode=mode,
                autopilot_enabled=None,
                updated_by=f"dashboard:{request.user.get_username()}",
            )
        except ApiError as error:
            blocked = error.message
    context = {**_rollout_context(workspace, role), "blocked": blocked}
    if request.headers.get("HX-Request"):
        # htmx swaps only 2xx answers by default; the blocked message must show, so it comes with a 200.
        return render(request, "dashboard/_rollout_panel.html", context)
    if blocked:
        return page(
            request, "dashboard/rollout.html", workspace, role, context, section="rollout", status=409
        )
    return redirect("dashboard-rollout", workspace_id=workspace.id)

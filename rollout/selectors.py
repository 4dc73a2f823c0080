"""Reads of the rollout: the workspace's settings and the per-window metrics aggregate the evaluations in
rollout.gate are built on. Call the readers inside tenancy.rls.workspace_context.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connections

# --- fallback reasons ---------------------------------------------------------------------------------------

GATE_BLOCKED_REASON = "quality_gate_blocked"
GRAPH_ERROR_REASON = "graph_expansion_error"
# Fallbacks the workspace's own configuration causes: every hybrid request falls back in off and shadow mode
# by design. Counting them (as memories.sh does) fails the gate for any workspace with hybrid traffic before
# it reaches canary, so canary could never be switched on; they say nothing about graph quality.
MODE_FALLBACK_REASONS = ("feature_flag_disabled", "rollout_off", "shadow_mode")
# Neither the gate nor shadowMetrics counts these as fallbacks. quality_gate_blocked is excluded so that a
# block cannot keep itself in place (a design hazard of memories.sh's gate); both kinds are counted and shown
# separately.
EXCLUDED_FALLBACK_REASONS = (GATE_BLOCKED_REASON, *MODE_FALLBACK_REASONS)


@dataclass(frozen=True)
class GateThresholds:
    min_hybrid_samples: int = 20
    min_canary_samples_for_relevance: int = 12
    max_fallback_rate: float = 0.15
    max_graph_error_fallback_rate: float = 0.05
    max_fallback_rate_increase: float = 0.07
    max_graph_error_rate_increase: float = 0.03
    min_expansion_coverage_rate: float = 0.10
    max_expansion_coverage_drop: float = 0.25
    max_candidate_lift_drop_ratio: float = 0.35


GATE = GateThresholds()

# Rollout-plan SLOs; the plan compares with strict > / < where the gate uses ≥.
SLO: dict[str, float] = {
    "minShadowExecutionsForCanary": 40,
    "minShadowAverageGraphCandidates": 1,
    "maxShadowGraphErrorRateForCanary": 0.05,
    "minHybridSamplesForDefaultOn": 20,
    "minCanarySamplesForDefaultOn": 12,
    "maxFallbackRateForDefaultOn": 0.15,
    "maxGraphErrorRateForDefaultOn": 0.05,
    "minExpansionCoverageForDefaultOn": 0.10,
}


def rate(numerator: float, denominator: float) -> float:
    return round(numerator / denominator, 4) if denominator > 0 else 0.0


# --- settings of a workspace --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RolloutSettings:
    """The config and policy rows, or their defaults when the workspace never changed them."""

    mode: str
    autopilot_enabled: bool
    config_updated_at: datetime | None
    config_updated_by: str | None
    default_strategy: str = "lexical"
    ready_window_streak: int = 0
    last_decision: str | None = None
    last_evaluated_at: datetime | None = None
    last_window_start: datetime | None = None
    policy_updated_at: datetime | None = None
    policy_updated_by: str | None = None
    default_autopilot_enabled: bool = True

    @classmethod
    def defaults(cls) -> RolloutSettings:
        return cls(
            mode=settings.ROLLOUT_DEFAULT_MODE,
            autopilot_enabled=False,
            config_updated_at=None,
            config_updated_by=None,
        )


def rollout_settings_get(*, workspace_id: int) -> RolloutSettings:
    """Both rows in one round trip (this runs on every uncached context/get)."""
    with connections["app"].cursor() as cursor:
        cursor.execute(
            """
            SELECT c.mode, c.autopilot_enabled, c.updated_at, c.updated_by,
                   p.default_strategy, p.ready_window_streak, p.last_decision, p.last_evaluated_at,
                   p.last_window_start, p.updated_at, p.updated_by, p.default_autopilot_enabled
            FROM (SELECT %(ws)s::bigint AS workspace_id) w
            LEFT JOIN rollout_configs c ON c.workspace_id = w.workspace_id
            LEFT JOIN retrieval_policies p ON p.workspace_id = w.workspace_id
            """,
            {"ws": workspace_id},
        )
        row = cursor.fetchone()
    defaults = RolloutSettings.defaults()
    (
        mode,
        autopilot,
        config_at,
        config_by,
        strategy,
        streak,
        decision,
        evaluated_at,
        window_start,
        policy_at,
        policy_by,
        default_autopilot,
    ) = row
    return RolloutSettings(
        mode=mode or defaults.mode,
        autopilot_enabled=bool(autopilot),
        config_updated_at=config_at,
        config_updated_by=config_by,
        default_strategy=strategy or defaults.default_strategy,
        ready_window_streak=streak or 0,
        last_decision=decision,
        last_evaluated_at=evaluated_at,
        last_window_start=window_start,
        policy_updated_at=policy_at,
        policy_updated_by=policy_by,
        default_autopilot_enabled=defaults.default_autopilot_enabled
        if default_autopilot is None
        else default_autopilot,
    )


# --- the metrics of two windows -----------------------------------------------------------------------------


@dataclass(frozen=True)
class WindowStats:
    start_at: datetime
    end_at: datetime
    total_requests: int = 0
    hybrid_requested_all: int = 0  # every hybrid request, whatever happened to it
    hybrid_requested: int = (
        0  # hybrid requests the gate judges: without configuration and gate-block fallbacks
    )
    canary_applied: int = 0
    hybrid_fallbacks: int = 0  # fallbacks among the judged hybrid requests
    gate_blocked_fallbacks: int = 0
    mode_fallbacks: int = 0
    graph_error_fallbacks: int = 0
    canary_with_expansion: int = 0
    avg_expanded_count: float = 0.0
    avg_candidate_lift: float = 0.0
    shadow_executions: int = 0
    fallback_count: int = 0  # every request's fallbacks, without configuration and gate-block ones
    shadow_avg_graph_candidates: float = 0.0

    @property
    def fallback_rate(self) -> float:
        return rate(self.hybrid_fallbacks, self.hybrid_requested)

    @property
    def graph_error_fallback_rate(self) -> float:
        return rate(self.graph_error_fallbacks, self.hybrid_requested)

    @property
    def expansion_coverage_rate(self) -> float:
        return rate(self.canary_with_expansion, self.canary_applied)

    def payload(self) -> dict[str, Any]:
        return {
            "startAt": self.start_at,
            "endAt": self.end_at,
            "totalRequests": self.total_requests,
            "hybridRequested": self.hybrid_requested,
            "canaryApplied": self.canary_applied,
            "hybridFallbacks": self.hybrid_fallbacks,
            "gateBlockedFallbacks": self.gate_blocked_fallbacks,
            "modeFallbacks": self.mode_fallbacks,
            "graphErrorFallbacks": self.graph_error_fallbacks,
            "fallbackRate": self.fallback_rate,
            "graphErrorFallbackRate": self.graph_error_fallback_rate,
            "canaryWithExpansion": self.canary_with_expansion,
            "expansionCoverageRate": self.expansion_coverage_rate,
            "avgExpandedCount": self.avg_expanded_count,
            "avgCandidateLift": self.avg_candidate_lift,
        }


_WINDOWS_SQL = """
SELECT created_at >= %(current_start)s AS is_current,
       count(*),
       count(*) FILTER (WHERE hybrid),
       count(*) FILTER (WHERE hybrid AND NOT excluded),
       count(*) FILTER (WHERE applied),
       count(*) FILTER (WHERE hybrid AND fallback_triggered AND NOT excluded),
       count(*) FILTER (WHERE fallback_reason = %(gate_blocked)s),
       count(*) FILTER (WHERE fallback_reason = ANY(%(mode_reasons)s)),
       count(*) FILTER (WHERE fallback_reason = %(graph_error)s),
       count(*) FILTER (WHERE applied AND graph_expanded_count > 0),
       avg(graph_expanded_count) FILTER (WHERE applied),
       avg(greatest(total_candidates - baseline_candidates, 0)) FILTER (WHERE applied),
       count(*) FILTER (WHERE shadow_executed),
       count(*) FILTER (WHERE fallback_triggered AND NOT excluded),
       avg(graph_candidates) FILTER (WHERE shadow_executed)
FROM (
    SELECT *,
           requested_strategy = 'hybrid' AS hybrid,
           applied_strategy = 'hybrid_graph' AS applied,
           coalesce(fallback_reason = ANY(%(excluded)s), false) AS excluded
    FROM retrieval_metrics
    WHERE workspace_id = %(ws)s AND created_at >= %(previous_start)s AND created_at < %(end)s
) m
GROUP BY 1
"""


def _metric(value: Any, digits: int = 4) -> float:
    return round(float(value), digits) if value is not None else 0.0


def metrics_windows(
    *, workspace_id: int, now: datetime, window_hours: int
) -> tuple[WindowStats, WindowStats]:
    """The current window [now − N h, now) and the previous one before it, in one indexed aggregate."""
    current_start = now - timedelta(hours=window_hours)
    previous_start = current_start - timedelta(hours=window_hours)
    with connections["app"].cursor() as cursor:
        cursor.execute(
            _WINDOWS_SQL,
            {
                "ws": workspace_id,
                "current_start": current_start,
                "previous_start": previous_start,
                "end": now,
                "gate_blocked": GATE_BLOCKED_REASON,
                "graph_error": GRAPH_ERROR_REASON,
                "mode_reasons": list(MODE_FALLBACK_REASONS),
                "excluded": list(EXCLUDED_FALLBACK_REASONS),
            },
        )
        rows = {row[0]: row[1:] for row in cursor.fetchall()}

    def window(is_current: bool, start: datetime, end: datetime) -> WindowStats:
        row = rows.get(is_current)
        if row is None:
            return WindowStats(start_at=start, end_at=end)
        return WindowStats(
            start_at=start,
            end_at=end,
            total_requests=row[0],
            hybrid_requested_all=row[1],
            hybrid_requested=row[2],
            canary_applied=row[3],
            hybrid_fallbacks=row[4],
            gate_blocked_fallbacks=row[5],
            mode_fallbacks=row[6],
            graph_error_fallbacks=row[7],
            canary_with_expansion=row[8],
            avg_expanded_count=_metric(row[9]),
            avg_candidate_lift=_metric(row[10]),
            shadow_executions=row[11],
            fallback_count=row[12],
            shadow_avg_graph_candidates=_metric(row[13], 2),
        )

    return window(True, current_start, now), window(False, previous_start, current_start)


def last_fallback(*, workspace_id: int, since: datetime) -> tuple[datetime | None, str | None]:
    with connections["app"].cursor() as cursor:
        cursor.execute(
            """
            SELECT created_at, fallback_reason FROM retrieval_metrics
            WHERE workspace_id = %s AND fallback_triggered AND created_at >= %s
            ORDER BY created_at DESC LIMIT 1
            """,
            [workspace_id, since],
        )
        row = cursor.fetchone()
    return (row[0], row[1]) if row else (None, None)


# --- the gate's metrics over time (the dashboard's trend) ---------------------------------------------------


@dataclass(frozen=True)
class TrendPoint:
    """One time bucket of the window: how many requests and what share of the judged hybrid ones fell back."""

    start_at: datetime
    total_requests: int
    hybrid_requested: int
    fallback_rate: float
    graph_error_rate: float
    canary_applied: int
    expansion_coverage_rate: float


def metrics_trend(*, workspace_id: int, now: datetime, window_hours: int, buckets: int) -> list[TrendPoint]:
    """The current window cut into `buckets` equal slices, oldest first, counted as the gate counts them
    (configuration and gate-block fallbacks left out); empty slices are zero."""
    start = now - timedelta(hours=window_hours)
    step = timedelta(hours=window_hours) / buckets
    with connections["app"].cursor() as cursor:
        cursor.execute(
            """
            SELECT least(floor(extract(epoch FROM created_at - %(start)s) / %(step)s)::int, %(last)s) AS slot,
                   count(*),
                   count(*) FILTER (WHERE hybrid AND NOT excluded),
                   count(*) FILTER (WHERE hybrid AND fallback_triggered AND NOT excluded),
                   count(*) FILTER (WHERE fallback_reason = %(graph_error)s),
                   count(*) FILTER (WHERE applied),
                   count(*) FILTER (WHERE applied AND graph_expanded_count > 0)
            FROM (
                SELECT *, requested_strategy = 'hybrid' AS hybrid,
                       applied_strategy = 'hybrid_graph' AS applied,
                       coalesce(fallback_reason = ANY(%(excluded)s), false) AS excluded
                FROM retrieval_metrics
                WHERE workspace_id = %(ws)s AND created_at >= %(start)s AND created_at < %(end)s
            ) m
            GROUP BY 1
            """,
            {
                "ws": workspace_id,
                "start": start,
                "end": now,
                "step": step.total_seconds(),
                "last": buckets - 1,
                "graph_error": GRAPH_ERROR_REASON,
                "excluded": list(EXCLUDED_FALLBACK_REASONS),
            },
        )
        rows = {row[0]: row[1:] for row in cursor.fetchall()}
    points = []
    for slot in range(buckets):
        total, hybrid, fallbacks, graph_errors, applied, covered = rows.get(slot, (0, 0, 0, 0, 0, 0))
        points.append(
            TrendPoint(
                start_at=start + step * slot,
                total_requests=total,
                hybrid_requested=hybrid,
                fallback_rate=rate(fallbacks, hybrid),
                graph_error_rate=rate(graph_errors, hybrid),
                canary_applied=applied,
                expansion_coverage_rate=rate(covered, applied),
            )
        )
    return points

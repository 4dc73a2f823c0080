"""Reads of the rollout: the workspace's settings, the per-window metrics aggregate, and the evaluations built
on it — quality gate, rollout plan, shadowMetrics and alarms.

The evaluations are pure functions of the aggregates, so each can be checked without rows. Call the readers
inside tenancy.rls.workspace_context.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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


# --- quality gate -------------------------------------------------------------------------------------------

GATE_STATUSES = ("pass", "warn", "fail", "insufficient_data", "unavailable")


@dataclass(frozen=True)
class QualityGate:
    evaluated_at: datetime
    window_hours: int
    status: str
    canary_blocked: bool
    reasons: list[dict[str, Any]]
    current: WindowStats
    previous: WindowStats

    @property
    def reason_codes(self) -> list[str]:
        return [reason["code"] for reason in self.reasons]

    @property
    def blocking_codes(self) -> list[str]:
        return [reason["code"] for reason in self.reasons if reason["blocking"]]

    @classmethod
    def unavailable(cls, *, now: datetime, window_hours: int) -> QualityGate:
        """The gate could not be read: canary stays blocked (fail closed) until it can."""
        start = now - timedelta(hours=window_hours)
        return cls(
            now,
            window_hours,
            "unavailable",
            True,
            [],
            WindowStats(start, now),
            WindowStats(start - timedelta(hours=window_hours), start),
        )

    def payload(self) -> dict[str, Any]:
        return {
            "evaluatedAt": self.evaluated_at,
            "windowHours": self.window_hours,
            "minHybridSamples": GATE.min_hybrid_samples,
            "minCanarySamplesForRelevance": GATE.min_canary_samples_for_relevance,
            "status": self.status,
            "canaryBlocked": self.canary_blocked,
            "reasons": self.reasons,
            "excludedFallbackReasons": list(EXCLUDED_FALLBACK_REASONS),
            "current": self.current.payload(),
            "previous": self.previous.payload(),
        }


def _reason(
    code: str,
    severity: str,
    metric: str,
    current: float,
    previous: float | None,
    threshold: float,
    message: str,
) -> dict[str, Any]:
    # Every reason blocks, warnings included, as in memories.sh.
    return {
        "code": code,
        "severity": severity,
        "blocking": True,
        "metric": metric,
        "currentValue": current,
        "previousValue": previous,
        "threshold": round(threshold, 4),
        "message": message,
    }


def _pct(value: float) -> str:
    return f"{value * 100:.1f}%"


def quality_gate_evaluate(
    *, current: WindowStats, previous: WindowStats, window_hours: int, evaluated_at: datetime
) -> QualityGate:
    reasons: list[dict[str, Any]] = []
    enough_now = current.hybrid_requested >= GATE.min_hybrid_samples
    enough_both = enough_now and previous.hybrid_requested >= GATE.min_hybrid_samples
    if enough_now and current.fallback_rate >= GATE.max_fallback_rate:
        reasons.append(
            _reason(
                "FALLBACK_RATE_ABOVE_LIMIT",
                "critical",
                "fallback_rate",
                current.fallback_rate,
                previous.fallback_rate,
                GATE.max_fallback_rate,
                f"Fallback rate {_pct(current.fallback_rate)} is above the "
                f"{_pct(GATE.max_fallback_rate)} threshold.",
            )
        )
    if enough_now and current.graph_error_fallback_rate >= GATE.max_graph_error_fallback_rate:
        reasons.append(
            _reason(
                "GRAPH_ERROR_RATE_ABOVE_LIMIT",
                "critical",
                "graph_error_rate",
                current.graph_error_fallback_rate,
                previous.graph_error_fallback_rate,
                GATE.max_graph_error_fallback_rate,
                f"Graph error fallback rate {_pct(current.graph_error_fallback_rate)} is above the "
                f"{_pct(GATE.max_graph_error_fallback_rate)} threshold.",
            )
        )
    if enough_both:
        delta = current.fallback_rate - previous.fallback_rate
        if delta >= GATE.max_fallback_rate_increase:
            reasons.append(
                _reason(
                    "FALLBACK_RATE_REGRESSION",
                    "critical",
                    "fallback_rate",
                    current.fallback_rate,
                    previous.fallback_rate,
                    GATE.max_fallback_rate_increase,
                    f"Fallback rate rose by {delta * 100:.1f} points window over window.",
                )
            )
        delta = current.graph_error_fallback_rate - previous.graph_error_fallback_rate
        if delta >= GATE.max_graph_error_rate_increase:
            reasons.append(
                _reason(
                    "GRAPH_ERROR_RATE_REGRESSION",
                    "critical",
                    "graph_error_rate",
                    current.graph_error_fallback_rate,
                    previous.graph_error_fallback_rate,
                    GATE.max_graph_error_rate_increase,
                    f"Graph error fallback rate rose by {delta * 100:.1f} points window over window.",
                )
            )
    if current.canary_applied >= GATE.min_canary_samples_for_relevance:
        if current.expansion_coverage_rate < GATE.min_expansion_coverage_rate:
            reasons.append(
                _reason(
                    "EXPANSION_COVERAGE_TOO_LOW",
                    "warning",
                    "expansion_coverage",
                    current.expansion_coverage_rate,
                    previous.expansion_coverage_rate,
                    GATE.min_expansion_coverage_rate,
                    f"Graph expansion coverage {_pct(current.expansion_coverage_rate)} is below the "
                    f"{_pct(GATE.min_expansion_coverage_rate)} minimum.",
                )
            )
        if previous.canary_applied >= GATE.min_canary_samples_for_relevance:
            drop = previous.expansion_coverage_rate - current.expansion_coverage_rate
            if drop >= GATE.max_expansion_coverage_drop:
                reasons.append(
                    _reason(
                        "EXPANSION_COVERAGE_REGRESSION",
                        "warning",
                        "expansion_coverage",
                        current.expansion_coverage_rate,
                        previous.expansion_coverage_rate,
                        GATE.max_expansion_coverage_drop,
                        f"Graph expansion coverage dropped {drop * 100:.1f} points window over window.",
                    )
                )
            if previous.avg_candidate_lift > 0:
                floor = previous.avg_candidate_lift * (1 - GATE.max_candidate_lift_drop_ratio)
                if current.avg_candidate_lift < floor:
                    reasons.append(
                        _reason(
                            "CANDIDATE_LIFT_REGRESSION",
                            "warning",
                            "candidate_lift",
                            current.avg_candidate_lift,
                            previous.avg_candidate_lift,
                            floor,
                            f"Average candidate lift dropped from {previous.avg_candidate_lift:.2f} to "
                            f"{current.avg_candidate_lift:.2f}.",
                        )
                    )
    blocked = any(reason["blocking"] for reason in reasons)
    if not enough_now:
        status = "insufficient_data"
    elif blocked:
        status = "fail"
    elif reasons:
        status = "warn"
    else:
        status = "pass"
    return QualityGate(evaluated_at, window_hours, status, blocked, reasons, current, previous)


# --- rollout plan -------------------------------------------------------------------------------------------


def canary_blockers(gate: QualityGate) -> list[str]:
    """What keeps a workspace in shadow: too little shadow evidence, or a gate that would refuse canary
    anyway."""
    shadow = gate.current
    blockers = []
    if shadow.shadow_executions < SLO["minShadowExecutionsForCanary"]:
        blockers.append("MIN_SHADOW_EXECUTIONS_NOT_MET")
    if shadow.shadow_avg_graph_candidates < SLO["minShadowAverageGraphCandidates"]:
        blockers.append("SHADOW_GRAPH_CANDIDATES_TOO_LOW")
    if shadow_graph_error_rate(shadow) > SLO["maxShadowGraphErrorRateForCanary"]:
        blockers.append("SHADOW_GRAPH_ERROR_RATE_ABOVE_LIMIT")
    # Not in memories.sh's list: without it the autopilot would switch on a canary that POST graph/rollout
    # refuses.
    if gate.canary_blocked:
        blockers.append("CANARY_QUALITY_GATE_BLOCKED")
    return blockers


def shadow_graph_error_rate(window: WindowStats) -> float:
    return rate(window.graph_error_fallbacks, max(1, window.shadow_executions))


def default_on_blockers(gate: QualityGate) -> list[str]:
    current = gate.current
    blockers = []
    if current.hybrid_requested < SLO["minHybridSamplesForDefaultOn"]:
        blockers.append("MIN_HYBRID_SAMPLES_NOT_MET")
    if current.canary_applied < SLO["minCanarySamplesForDefaultOn"]:
        blockers.append("MIN_CANARY_SAMPLES_NOT_MET")
    if current.fallback_rate > SLO["maxFallbackRateForDefaultOn"]:
        blockers.append("FALLBACK_RATE_ABOVE_LIMIT")
    if current.graph_error_fallback_rate > SLO["maxGraphErrorRateForDefaultOn"]:
        blockers.append("GRAPH_ERROR_RATE_ABOVE_LIMIT")
    if current.expansion_coverage_rate < SLO["minExpansionCoverageForDefaultOn"]:
        blockers.append("EXPANSION_COVERAGE_TOO_LOW")
    if gate.canary_blocked:
        blockers.append("CANARY_QUALITY_GATE_BLOCKED")
    if gate.status != "pass":
        blockers.append(f"QUALITY_STATUS_{gate.status.upper()}")
    return blockers


def _baseline_metric(metric: str, comparator: str, target: float, current: float) -> dict[str, Any]:
    if comparator == ">=":
        ready, gap = current >= target, max(0.0, target - current)
    else:
        ready, gap = current <= target, max(0.0, current - target)
    return {
        "metric": metric,
        "comparator": comparator,
        "target": target,
        "current": round(current, 4),
        "gapToGoal": round(gap, 4),
        "ready": ready,
    }


@dataclass(frozen=True)
class RolloutPlan:
    evaluated_at: datetime
    current_mode: str
    recommended_mode: str
    ready_for_default_on: bool
    blocker_codes: list[str]
    canary_blocker_codes: list[str]
    gate: QualityGate
    autopilot_enabled: bool = False
    autopilot_applied: bool = False
    stages: list[dict[str, Any]] = field(default_factory=list)

    @property
    def default_behavior_decision(self) -> str:
        return "enable_hybrid_default" if self.ready_for_default_on else "hold_lexical_default"

    def payload(self) -> dict[str, Any]:
        current = self.gate.current
        if self.ready_for_default_on:
            rationale = "Canary quality meets every default-on SLO: hybrid retrieval can become the default."
        else:
            rationale = (
                "Keep lexical as the default until these clear: " + ", ".join(self.blocker_codes) + "."
            )
        return {
            "evaluatedAt": self.evaluated_at,
            "currentMode": self.current_mode,
            "recommendedMode": self.recommended_mode,
            "defaultBehaviorDecision": self.default_behavior_decision,
            "rationale": rationale,
            "readyForDefaultOn": self.ready_for_default_on,
            "blockerCodes": self.blocker_codes,
            "stages": self.stages,
            "baseline": [
                _baseline_metric(
                    "shadow_executions", ">=", SLO["minShadowExecutionsForCanary"], current.shadow_executions
                ),
                _baseline_metric(
                    "shadow_avg_graph_candidates",
                    ">=",
                    SLO["minShadowAverageGraphCandidates"],
                    current.shadow_avg_graph_candidates,
                ),
                _baseline_metric(
                    "shadow_graph_error_rate",
                    "<=",
                    SLO["maxShadowGraphErrorRateForCanary"],
                    shadow_graph_error_rate(current),
                ),
                _baseline_metric(
                    "hybrid_samples", ">=", SLO["minHybridSamplesForDefaultOn"], current.hybrid_requested
                ),
                _baseline_metric(
                    "canary_samples", ">=", SLO["minCanarySamplesForDefaultOn"], current.canary_applied
                ),
                _baseline_metric(
                    "fallback_rate", "<=", SLO["maxFallbackRateForDefaultOn"], current.fallback_rate
                ),
                _baseline_metric(
                    "graph_error_rate",
                    "<=",
                    SLO["maxGraphErrorRateForDefaultOn"],
                    current.graph_error_fallback_rate,
                ),
                _baseline_metric(
                    "expansion_coverage",
                    ">=",
                    SLO["minExpansionCoverageForDefaultOn"],
                    current.expansion_coverage_rate,
                ),
            ],
            "slo": dict(SLO),
            "autopilot": {"enabled": self.autopilot_enabled, "applied": self.autopilot_applied},
        }


def rollout_plan_build(
    *,
    evaluated_at: datetime,
    mode: str,
    gate: QualityGate,
    autopilot_enabled: bool = False,
    autopilot_applied: bool = False,
) -> RolloutPlan:
    """Stages are 'ready to enter': shadow needs nothing, canary needs shadow evidence, default-on canary
    quality."""
    canary = canary_blockers(gate)
    default_on = default_on_blockers(gate)
    if mode == "off":
        recommended = "shadow"
    elif mode == "shadow" and not canary:
        recommended = "canary"
    else:
        recommended = mode
    current = gate.current
    stages = [
        {
            "stage": "shadow",
            "ready": True,
            "requiredSamples": 0,
            "currentSamples": current.shadow_executions,
            "blockerCodes": [],
        },
        {
            "stage": "canary",
            "ready": not canary,
            "requiredSamples": int(SLO["minShadowExecutionsForCanary"]),
            "currentSamples": current.shadow_executions,
            "blockerCodes": canary,
        },
        {
            "stage": "default_on",
            "ready": not default_on,
            "requiredSamples": int(SLO["minHybridSamplesForDefaultOn"]),
            "currentSamples": current.hybrid_requested,
            "blockerCodes": default_on,
        },
    ]
    return RolloutPlan(
        evaluated_at=evaluated_at,
        current_mode=mode,
        recommended_mode=recommended,
        ready_for_default_on=not default_on,
        blocker_codes=default_on,
        canary_blocker_codes=canary,
        gate=gate,
        autopilot_enabled=autopilot_enabled,
        autopilot_applied=autopilot_applied,
        stages=stages,
    )


# --- shadowMetrics and alarms -------------------------------------------------------------------------------


def shadow_metrics_payload(
    *,
    window: WindowStats,
    window_hours: int,
    last_fallback_at: datetime | None,
    last_fallback_reason: str | None,
) -> dict[str, Any]:
    return {
        "windowHours": window_hours,
        "totalRequests": window.total_requests,
        "hybridRequested": window.hybrid_requested_all,
        "canaryApplied": window.canary_applied,
        "shadowExecutions": window.shadow_executions,
        "fallbackCount": window.fallback_count,
        "fallbackRate": rate(window.fallback_count, window.total_requests),
        "gateBlockedFallbacks": window.gate_blocked_fallbacks,
        "modeFallbacks": window.mode_fallbacks,
        "graphErrorFallbacks": window.graph_error_fallbacks,
        "avgGraphCandidates": window.shadow_avg_graph_candidates,
        "avgGraphExpandedCount": round(window.avg_expanded_count, 2),
        "lastFallbackAt": last_fallback_at,
        "lastFallbackReason": last_fallback_reason,
    }


def rollout_alarms(*, shadow: dict[str, Any], gate: QualityGate, now: datetime) -> list[dict[str, Any]]:
    alarms: list[dict[str, Any]] = []
    total, fallback_rate, hours = shadow["totalRequests"], shadow["fallbackRate"], shadow["windowHours"]
    if total >= 20 and fallback_rate >= 0.15:
        alarms.append(
            {
                "code": "HIGH_FALLBACK_RATE",
                "severity": "critical",
                "triggeredAt": now,
                "message": f"Fallback rate is {_pct(fallback_rate)} over the last {hours} h.",
            }
        )
    elif total >= 10 and fallback_rate >= 0.05:
        alarms.append(
            {
                "code": "ELEVATED_FALLBACK_RATE",
                "severity": "warning",
                "triggeredAt": now,
                "message": f"Fallback rate is {_pct(fallback_rate)} over the last {hours} h.",
            }
        )
    errors = shadow["graphErrorFallbacks"]
    if errors >= 3:
        alarms.append(
            {
                "code": "GRAPH_EXPANSION_ERRORS",
                "severity": "critical",
                "triggeredAt": now,
                "message": f"{errors} graph expansion error fallback{'s' if errors != 1 else ''} in the "
                f"last {hours} h.",
            }
        )
    if gate.canary_blocked:
        codes = ", ".join(gate.blocking_codes[:3])
        alarms.append(
            {
                "code": "CANARY_QUALITY_GATE_BLOCKED",
                "severity": "critical",
                "triggeredAt": now,
                "message": f"Canary rollout blocked by the retrieval quality gate ({codes})."
                if codes
                else f"Canary rollout blocked by the retrieval quality gate (status {gate.status}).",
            }
        )
    elif gate.status == "warn":
        alarms.append(
            {
                "code": "CANARY_QUALITY_GATE_WARNING",
                "severity": "warning",
                "triggeredAt": now,
                "message": "The retrieval quality gate sees warning-level drift; watch it before canary.",
            }
        )
    return alarms

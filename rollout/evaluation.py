"""The rollout's evaluations, pure functions of the metric windows (rollout.selectors): the quality gate, the
rollout plan with its blockers, shadowMetrics and alarms. Each can be checked without rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from rollout.selectors import (
    EXCLUDED_FALLBACK_REASONS,
    GATE,
    SLO,
    WindowStats,
    rate,
)

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

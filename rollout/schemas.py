"""Schemas of the graph/status and graph/rollout routes."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from ninja import Schema
from pydantic import Field

from config.schemas import ScopeIn, ScopeQuery, StrictIn, scope_field
from graphsvc.schemas import ExtractionOut


class StatusIn(StrictIn):
    topNodesLimit: int = Field(10, ge=1, le=50, description="How many hub nodes to list, 1–50 (default 10).")
    scope: ScopeIn = scope_field()


class CountsOut(Schema):
    nodes: int = Field(description="Graph nodes in the workspace.")
    edges: int = Field(description="All edges, including expired and invalidated ones.")
    memoryLinks: int = Field(description="Memory ↔ node links.")
    activeEdges: int = Field(description="Edges neither expired nor invalidated.")
    expiredEdges: int = Field(description="Edges past expires_at or invalidated (kept until eviction).")
    orphanNodes: int = Field(description="Nodes with no link and no active edge.")


class TopNodeOut(Schema):
    nodeType: str = Field(
        description="memory, memory_type, repo, user, category, topic, condition or an entity type."
    )
    nodeKey: str = Field(description="Key of the node within its type.")
    label: str = Field(description="Display label.")
    memoryLinks: int = Field(description="Memories linked to the node.")
    outboundEdges: int = Field(description="Active edges from the node.")
    inboundEdges: int = Field(description="Active edges to the node.")
    degree: int = Field(description="Sum of the three.")


class ErrorItemOut(Schema):
    code: str = Field(description="Error code, e.g. EMBEDDING_FAILED or GRAPH_MAPPING_SYNC_FAILED.")
    message: str | None = Field(description="What failed.")
    source: str = Field(description="Where: mapping, pipeline:embed, pipeline:similarity, alarm.")
    memoryId: str | None = Field(description="The memory concerned, if any.")
    timestamp: datetime = Field(description="When.")


class PipelineCountsOut(Schema):
    queued: int = Field(description="Jobs waiting (including retries waiting for their backoff).")
    processing: int = Field(description="Jobs a worker is running.")
    succeeded: int = Field(description="Jobs done.")
    deadLetter: int = Field(description="Jobs that failed 5 times; see recentErrors.")
    oldestQueuedAgeSeconds: float | None = Field(description="Age of the oldest queued job; null when none.")


class VectorsOut(Schema):
    model: str = Field(description="Embedding model searches use.")
    vectors: int = Field(description="Stored vectors of that model in the workspace.")
    accessPath: Literal["exact", "hnsw"] = Field(
        description="exact scan (small workspaces) or an HNSW index."
    )


# --- rollout ------------------------------------------------------------------------------------------------

RolloutMode = Literal["off", "shadow", "canary"]


class RolloutModeOut(Schema):
    mode: RolloutMode = Field(
        description=(
            "off: baseline only. shadow: traverse the graph for metrics, never apply it. canary: apply graph "
            "expansion to hybrid requests unless the quality gate blocks."
        )
    )
    autopilotEnabled: bool = Field(
        description="Whether the mode autopilot moves the workspace to recommendedMode."
    )
    updatedAt: datetime | None = Field(
        description="Last change; null while the workspace has its default mode."
    )
    updatedBy: str | None = Field(description="Who changed it last: user:<id> or autopilot.")


class ShadowMetricsOut(Schema):
    windowHours: int = Field(description="Length of the window these numbers cover, in hours.")
    totalRequests: int = Field(description="Retrievals (context/get and graph/trace) in the window.")
    hybridRequested: int = Field(description="Retrievals that asked for hybrid (graph) retrieval.")
    canaryApplied: int = Field(description="Hybrid retrievals that got graph expansion applied.")
    shadowExecutions: int = Field(description="Retrievals that traversed the graph without applying it.")
    fallbackCount: int = Field(
        description="Retrievals that fell back to the baseline, not counting the mode's own fallbacks "
        "(rollout_off, shadow_mode) nor quality_gate_blocked (see gateBlockedFallbacks and modeFallbacks)."
    )
    fallbackRate: float = Field(
        description="fallbackCount / totalRequests (all requests, not only hybrid ones)."
    )
    gateBlockedFallbacks: int = Field(description="Hybrid retrievals the quality gate kept from canary.")
    modeFallbacks: int = Field(
        description="Hybrid retrievals that fell back because of the mode (off or shadow)."
    )
    graphErrorFallbacks: int = Field(description="Fallbacks caused by an error during graph expansion.")
    avgGraphCandidates: float = Field(description="Average graph candidates per shadow execution.")
    avgGraphExpandedCount: float = Field(description="Average memories added per canary-applied retrieval.")
    lastFallbackAt: datetime | None = Field(description="When the latest fallback of any reason happened.")
    lastFallbackReason: str | None = Field(description="Its reason.")


class GateReasonOut(Schema):
    code: str = Field(
        description="FALLBACK_RATE_ABOVE_LIMIT, GRAPH_ERROR_RATE_ABOVE_LIMIT, FALLBACK_RATE_REGRESSION, "
        "GRAPH_ERROR_RATE_REGRESSION, EXPANSION_COVERAGE_TOO_LOW, EXPANSION_COVERAGE_REGRESSION or "
        "CANDIDATE_LIFT_REGRESSION."
    )
    severity: Literal["warning", "critical"] = Field(description="critical for error and fallback rates.")
    blocking: bool = Field(description="Whether it blocks canary (every current reason does).")
    metric: str = Field(description="fallback_rate, graph_error_rate, expansion_coverage or candidate_lift.")
    currentValue: float = Field(description="The metric in the current window.")
    previousValue: float | None = Field(description="The metric in the previous window.")
    threshold: float | None = Field(description="The limit it crossed.")
    message: str = Field(description="What is wrong, in words.")


class GateWindowOut(Schema):
    startAt: datetime = Field(description="Window start (inclusive).")
    endAt: datetime = Field(description="Window end (exclusive).")
    totalRequests: int = Field(description="Retrievals in the window.")
    hybridRequested: int = Field(
        description=(
            "Hybrid retrievals the gate judges: all hybrid ones except those that fell back because of the "
            "mode (modeFallbacks) or of the gate itself (gateBlockedFallbacks), so a block cannot sustain "
            "itself."
        )
    )
    canaryApplied: int = Field(description="Hybrid retrievals with graph expansion applied.")
    hybridFallbacks: int = Field(description="Judged hybrid retrievals that fell back to the baseline.")
    gateBlockedFallbacks: int = Field(description="Hybrid retrievals blocked by the gate (not judged).")
    modeFallbacks: int = Field(description="Hybrid retrievals that fell back because of mode off or shadow.")
    graphErrorFallbacks: int = Field(description="Fallbacks caused by graph expansion errors.")
    fallbackRate: float = Field(description="hybridFallbacks / hybridRequested, 4 decimals.")
    graphErrorFallbackRate: float = Field(description="graphErrorFallbacks / hybridRequested, 4 decimals.")
    canaryWithExpansion: int = Field(description="Canary-applied retrievals that added at least one memory.")
    expansionCoverageRate: float = Field(description="canaryWithExpansion / canaryApplied, 4 decimals.")
    avgExpandedCount: float = Field(description="Average memories added per canary-applied retrieval.")
    avgCandidateLift: float = Field(
        description="Average of max(0, total − baseline candidates) when applied."
    )


class QualityGateOut(Schema):
    evaluatedAt: datetime = Field(description="When the gate was evaluated.")
    windowHours: int = Field(
        description="Window length: current = last N hours, previous = the N hours before."
    )
    minHybridSamples: int = Field(
        description="Judged hybrid retrievals needed before the gate can pass or fail."
    )
    minCanarySamplesForRelevance: int = Field(
        description="Canary retrievals needed for the coverage/lift checks."
    )
    status: Literal["pass", "warn", "fail", "insufficient_data", "unavailable"] = Field(
        description=(
            "insufficient_data below minHybridSamples; fail with a blocking reason; unavailable when it "
            "could not be read (canary then stays blocked)."
        )
    )
    canaryBlocked: bool = Field(description="Whether hybrid requests in canary fall back to the baseline.")
    reasons: list[GateReasonOut] = Field(description="Every check that failed.")
    excludedFallbackReasons: list[str] = Field(description="Fallback reasons the gate does not count.")
    current: GateWindowOut = Field(description="The current window.")
    previous: GateWindowOut = Field(description="The window before it.")


class PlanStageOut(Schema):
    stage: Literal["shadow", "canary", "default_on"] = Field(description="Rollout stage.")
    ready: bool = Field(description="Whether the workspace may enter it now.")
    requiredSamples: int = Field(
        description="Samples it needs (shadow executions; hybrid requests for default_on)."
    )
    currentSamples: int = Field(description="Samples in the window.")
    blockerCodes: list[str] = Field(description="What keeps it from being ready.")


class PlanMetricOut(Schema):
    metric: str = Field(description="The SLO metric, e.g. shadow_executions or expansion_coverage.")
    comparator: Literal[">=", "<="] = Field(description="How current must compare with target.")
    target: float = Field(description="The SLO target.")
    current: float = Field(description="Its value in the window.")
    gapToGoal: float = Field(description="How far current is from target (0 when met).")
    ready: bool = Field(description="Whether the target is met.")


class AutopilotOut(Schema):
    enabled: bool = Field(description="Whether the workspace's mode autopilot is on.")
    applied: bool = Field(description="Whether this evaluation changed the mode.")


class RolloutPlanOut(Schema):
    evaluatedAt: datetime = Field(description="When the plan was built.")
    currentMode: RolloutMode = Field(description="The mode now.")
    recommendedMode: RolloutMode = Field(
        description=(
            "off → shadow; shadow → canary once no canary blocker remains; otherwise the current mode."
        )
    )
    defaultBehaviorDecision: Literal["enable_hybrid_default", "hold_lexical_default"] = Field(
        description="Whether hybrid may become the default strategy of context/get."
    )
    rationale: str = Field(description="The decision in words.")
    readyForDefaultOn: bool = Field(description="True when no default-on blocker remains.")
    blockerCodes: list[str] = Field(description="Default-on blockers, e.g. MIN_HYBRID_SAMPLES_NOT_MET.")
    stages: list[PlanStageOut] = Field(description="shadow, canary and default_on.")
    baseline: list[PlanMetricOut] = Field(description="The 8 SLO metrics against their targets.")
    slo: dict[str, float] = Field(description="The SLO thresholds the plan uses.")
    autopilot: AutopilotOut = Field(description="Mode autopilot state for this evaluation.")


class AlarmOut(Schema):
    code: str = Field(
        description="HIGH_FALLBACK_RATE, ELEVATED_FALLBACK_RATE, GRAPH_EXPANSION_ERRORS, "
        "CANARY_QUALITY_GATE_BLOCKED or CANARY_QUALITY_GATE_WARNING."
    )
    severity: Literal["info", "warning", "critical"] = Field(description="How urgent.")
    message: str = Field(description="What triggered it.")
    triggeredAt: datetime = Field(description="When it was evaluated.")


class RetrievalPolicyOut(Schema):
    defaultStrategy: Literal["lexical", "hybrid"] = Field(
        description="Strategy context/get uses when the request names none."
    )
    readyWindowStreak: int = Field(description="Consecutive evaluation windows ready for hybrid-by-default.")
    lastDecision: str | None = Field(
        description=(
            "promote_hybrid_default, hold_lexical_default, keep_hybrid_default or rollback_lexical_default."
        )
    )
    lastEvaluatedAt: datetime | None = Field(
        description="Last evaluation (at most one per policy window counts)."
    )
    updatedAt: datetime | None = Field(description="Last change of the default strategy.")
    updatedBy: str | None = Field(description="Who changed it (autopilot).")
    autopilotEnabled: bool = Field(
        description="Whether the default-strategy autopilot may change the default."
    )


class ScopeOut(Schema):
    tenantId: str | None = Field(description="As sent.")
    userId: str | None = Field(description="As sent.")
    projectId: str | None = Field(description="As sent.")


class RolloutOut(Schema):
    rollout: RolloutModeOut = Field(description="The workspace's mode.")
    shadowMetrics: ShadowMetricsOut = Field(description="Retrieval metrics of the window.")
    qualityGate: QualityGateOut = Field(description="The canary quality gate.")
    rolloutPlan: RolloutPlanOut = Field(description="Stages, blockers and recommendations.")
    retrievalPolicy: RetrievalPolicyOut = Field(description="The default strategy and its autopilot.")
    scope: ScopeOut = Field(description="The scope of the request.")


class RolloutQuery(ScopeQuery):
    windowHours: int | None = Field(
        None,
        ge=1,
        le=168,
        description="Window of the metrics, gate and plan shown, 1–168 hours (default 24).",
    )


class RolloutSetIn(StrictIn):
    mode: RolloutMode = Field(
        description="off, shadow or canary. canary is refused (409) while the gate blocks."
    )
    scope: ScopeIn = scope_field()


class RolloutPatchIn(StrictIn):
    mode: RolloutMode | None = Field(
        None, description="off, shadow or canary. canary is refused (409) while the gate blocks."
    )
    autopilotEnabled: bool | None = Field(
        None, description="Turn the mode autopilot on or off (it moves the workspace to recommendedMode)."
    )
    scope: ScopeIn = scope_field()


class AdmissionStatusOut(Schema):
    enabled: bool = Field(description="Whether admission control is on for memories/add (memories/settings).")
    admitted: int = Field(description="memories/add calls admitted since counting began.")
    rejected: int = Field(description="memories/add calls refused (nothing written).")
    byReason: dict[str, int] = Field(
        description="Counts per reason: FAST_PATH, SCORE, NEAR_DUPLICATE, LOW_SCORE."
    )


class StatusOut(Schema):
    health: Literal["ok", "degraded"] = Field(
        description="degraded when jobs are dead-lettered or errors are recent."
    )
    counts: CountsOut = Field(description="Graph size.")
    topConnectedNodes: list[TopNodeOut] = Field(description="Hub nodes, highest degree first.")
    pipeline: PipelineCountsOut = Field(description="Background job counts.")
    vectors: VectorsOut = Field(description="Vector search state.")
    extraction: ExtractionOut = Field(
        description="LLM extraction: on/off, token budget, usage, what it built."
    )
    admission: AdmissionStatusOut | None = Field(None, description="Admission control decisions.")
    rollout: RolloutModeOut = Field(description="The workspace's graph retrieval mode.")
    shadowMetrics: ShadowMetricsOut = Field(description="Retrieval metrics of the last gate window.")
    qualityGate: QualityGateOut = Field(description="The canary quality gate.")
    rolloutPlan: RolloutPlanOut = Field(description="Rollout plan (status never applies the autopilot).")
    alarms: list[AlarmOut] = Field(description="Fallback, graph-error and quality-gate alarms.")
    recentErrors: list[ErrorItemOut] = Field(
        description="Latest failures, newest first (at most 20), then the alarms with source 'alarm'."
    )
    sampledAt: datetime = Field(description="When these numbers were read.")


class StatusQuery(ScopeQuery):
    topNodesLimit: int = Field(10, ge=1, le=50, description="How many hub nodes to list, 1–50 (default 10).")

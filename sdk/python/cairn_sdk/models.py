"""Request and response models of Cairn's SDK API (/api/sdk/v1).

Attributes are snake_case; on the wire they are the API's camelCase names (`next_cursor` ↔ `nextCursor`).
The server's OpenAPI document is the source of truth: `cairn_sdk.drift.schema_drift` compares every model here
with it, and the project's test suite fails when the two disagree.

Requests refuse unknown fields (a typo fails before anything is sent) but leave limits to the server, whose
answer names the field to fix. Responses keep fields a newer server adds (`extra="allow"`), and enumerations
in responses are plain strings so that a new value on the server does not break an older client.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

MemoryType = Literal["rule", "decision", "fact", "note", "skill"]
MemoryLayer = Literal["rule", "working", "long_term"]
SearchStrategy = Literal["lexical", "semantic", "hybrid", "baseline", "hybrid_graph"]
ContextStrategy = Literal["lexical", "semantic", "hybrid", "auto", "baseline", "hybrid_graph"]
ContextMode = Literal["all", "working", "long_term", "rules_only"]
RolloutMode = Literal["off", "shadow", "canary"]
KeyScope = Literal["read", "write", "admin"]
EdgeClass = Literal["semantic", "temporal", "causal", "entity"]
RecallStrategy = Literal["bfs", "spreading"]
Direction = Literal["out", "in", "both"]  # which way facts are followed from an entity


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, validate_by_name=True, validate_by_alias=True, serialize_by_alias=True
    )


class RequestModel(_Model):
    model_config = ConfigDict(extra="forbid")

    def to_wire(self) -> dict[str, Any]:
        """The JSON body: only the fields the caller set, so the server applies its own defaults."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


class ResponseModel(_Model):
    model_config = ConfigDict(extra="allow")


# --- shared -------------------------------------------------------------------------------------------------


class Scope(RequestModel):
    """Where a call applies. The workspace comes from your key plus tenant_id (or repo routing by project_id);
    user_id and project_id filter inside it."""

    tenant_id: str | None = None
    user_id: str | None = None
    project_id: str | None = None


class ErrorBody(ResponseModel):
    type: str
    code: str
    message: str
    status: int
    retryable: bool
    details: dict[str, Any] | None = None


class Meta(ResponseModel):
    version: str
    endpoint: str
    request_id: str
    timestamp: str


class Health(ResponseModel):
    status: str
    service: str
    schema_version: str


# --- memories -----------------------------------------------------------------------------------------------


class PipelineStep(ResponseModel):
    status: str
    attempts: int
    last_error_code: str | None


class Pipeline(ResponseModel):
    status: str
    steps: dict[str, PipelineStep]


class Conversation(ResponseModel):
    """A turn's (or a session summary's) place in its session."""

    session_id: str
    kind: str | None
    turn_index: int | None
    role: str | None
    speaker: str | None
    said_at: datetime | None


class Memory(ResponseModel):
    id: str
    content: str
    type: str
    layer: str
    expires_at: datetime | None
    scope: str
    project_id: str | None
    tags: list[str]
    paths: list[str]
    category: str | None
    metadata: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
    injection_flags: list[str]
    importance: float = 0.5
    superseded_by: str | None = None
    conversation: Conversation | None = None
    pipeline: Pipeline | None = None


class AddRequest(RequestModel):
    content: str
    type: MemoryType | None = None
    layer: MemoryLayer | None = None
    tags: list[str] | None = None
    paths: list[str] | None = None
    category: str | None = None
    metadata: dict[str, Any] | None = None
    embedding_model: str | None = None
    scope: Scope | None = None


class Admission(ResponseModel):
    admitted: bool
    reason: str
    score: float
    nearest_memory_id: str | None
    similarity: float | None
    factors: dict[str, float]


class AddResult(ResponseModel):
    id: str
    message: str
    memory: Memory
    embedding_model: str
    embedding_model_source: str
    admitted: bool = True  # False: admission control refused it; id and memory are the existing memory
    admission: Admission | None = None


class SearchRequest(RequestModel):
    query: str
    type: MemoryType | None = None
    layer: MemoryLayer | None = None
    strategy: SearchStrategy | None = None
    limit: int | None = None
    importance_weight: float | None = None
    half_life_days: float | None = None
    mmr_lambda: float | None = None
    include_superseded: bool | None = None
    scope: Scope | None = None


class TimeWindow(ResponseModel):
    """The window a time expression of the query named ("last week", "before the migration")."""

    expression: str
    start: datetime | None  # inclusive; null: open
    end: datetime | None  # exclusive; null: open (both null: no window could be made)
    anchor_memory_id: str | None  # before/after/since an event: the memory whose time bounds the window
    in_window: int = 0
    applied: bool = False  # whether the ranking used the window
    reason: str | None = None  # why it was applied or not


class Reranker(ResponseModel):
    """The operator's optional reranker of the final candidates."""

    model: str
    ran: bool  # False: the fused order stands (see fallback_reason)
    candidates: int
    duration_ms: float
    fallback_reason: str | None


class SearchTrace(ResponseModel):
    requested_strategy: str
    applied_strategy: str
    lexical_candidates: int
    semantic_candidates: int
    fallback_triggered: bool
    fallback_reason: str | None
    time_window: TimeWindow | None = None
    reranker: Reranker | None = None  # None: no reranker configured


class SearchResult(ResponseModel):
    memories: list[Memory]
    count: int
    trace: SearchTrace


class ListRequest(RequestModel):
    type: MemoryType | None = None
    layer: MemoryLayer | None = None
    tags: str | None = None
    limit: int | None = None
    cursor: str | None = None
    include_superseded: bool | None = None
    scope: Scope | None = None


class ListResult(ResponseModel):
    memories: list[Memory]
    count: int
    next_cursor: str | None


class EditRequest(RequestModel):
    id: str
    content: str | None = None
    type: MemoryType | None = None
    layer: MemoryLayer | None = None
    tags: list[str] | None = None
    paths: list[str] | None = None
    category: str | None = None
    metadata: dict[str, Any] | None = None
    embedding_model: str | None = None
    scope: Scope | None = None


class EditResult(ResponseModel):
    id: str
    updated: bool
    message: str
    embedding_model: str
    embedding_model_source: str
    memory: Memory


class ForgetRequest(RequestModel):
    id: str
    scope: Scope | None = None


class ForgetResult(ResponseModel):
    id: str
    deleted: bool
    message: str


class ResolveRequest(RequestModel):
    action: Literal["supersedes", "not_conflict", "restates", "revert"]
    memory_id: str
    other_memory_id: str
    note: str | None = None
    scope: Scope | None = None


class Decision(ResponseModel):
    """One recorded decision about which of two memories is current."""

    id: int
    newer_memory_id: str
    older_memory_id: str
    decision: str  # supersedes | restates | not_conflict
    origin: str  # heuristic | llm | manual
    rule: str | None = None
    model: str | None = None
    confidence: float
    evidence: dict[str, Any] | None = None
    actor: str
    created_at: datetime
    reverted_at: datetime | None = None
    reverted_by: str | None = None


class ResolveResult(ResponseModel):
    decision: Decision | None
    reverted: list[Decision]
    memories: list[Memory]


class DecisionsRequest(RequestModel):
    memory_id: str
    include_reverted: bool | None = None
    limit: int | None = None
    scope: Scope | None = None


class DecisionsResult(ResponseModel):
    decisions: list[Decision]


class BulkForgetFilters(RequestModel):
    types: list[MemoryType] | None = None
    tags: list[str] | None = None
    older_than_days: int | None = None
    pattern: str | None = None
    project_id: str | None = None
    all: bool | None = None


class BulkForgetRequest(RequestModel):
    filters: BulkForgetFilters
    dry_run: bool | None = None
    scope: Scope | None = None


class BulkForgetPreview(ResponseModel):
    id: str
    type: str
    content_preview: str


class BulkForgetResult(ResponseModel):
    count: int
    ids: list[str] | None = None
    memories: list[BulkForgetPreview] | None = None
    has_more: bool = False
    message: str


class VacuumRequest(RequestModel):
    scope: Scope | None = None


class VacuumResult(ResponseModel):
    purged: int
    message: str


# --- context/get and graph/trace ----------------------------------------------------------------------------


class ContextRequest(RequestModel):
    query: str | None = None
    limit: int | None = None
    include_rules: bool | None = None
    include_skill_files: bool | None = None
    mode: ContextMode | None = None
    strategy: ContextStrategy | None = None
    graph_depth: int | None = None
    graph_limit: int | None = None
    half_life_days: float | None = None
    mmr_lambda: float | None = None
    importance_weight: float | None = None
    include_superseded: bool | None = None
    token_budget: int | None = None
    fact_edge_classes: list[EdgeClass] | None = None
    fact_direction: Direction | None = None
    scope: Scope | None = None


class TraceRequest(ContextRequest):
    pass


class GraphReason(ResponseModel):
    why_included: str
    linked_via_node: str
    edge_type: str
    hop_count: int
    confidence: float
    seed_memory_id: str


class ContextMemory(Memory):
    graph: GraphReason | None = None


class Conflict(ResponseModel):
    memory_a_id: str
    memory_b_id: str
    edge_type: str
    confidence: float
    explanation: str
    evidence: str | None = None
    suggestion: str
    current_memory_id: str  # the side that holds now, when Cairn can tell
    current_because: str  # why that side is current (superseded, newer, a decision)


class ContextTrace(ResponseModel):
    requested_strategy: str
    strategy: str
    semantic_strategy_requested: str
    semantic_strategy_applied: str
    lexical_candidates: int
    semantic_candidates: int
    semantic_fallback_triggered: bool
    semantic_fallback_reason: str | None
    time_window: TimeWindow | None = None
    reranker: Reranker | None = None
    rules_total: int = 0  # rules in scope
    rules_ranked: bool = False  # ranked by the query within their budget share (many rules)
    graph_depth: int
    graph_limit: int
    rollout_mode: str
    shadow_executed: bool
    quality_gate_status: str
    quality_gate_blocked: bool
    quality_gate_reason_codes: list[str]
    baseline_candidates: int
    graph_candidates: int
    graph_expanded_count: int
    conflict_count: int
    fallback_triggered: bool
    fallback_reason: str | None
    total_candidates: int
    retrieval_policy_default_strategy: str
    retrieval_policy_applied_strategy: str
    retrieval_policy_selection: str
    retrieval_policy_ready_for_default_on: bool
    retrieval_policy_blocker_codes: list[str]
    # The entity graph's share of the token budget: what it could fill, what it filled, what it found.
    graph_budget_tokens: int = 0
    graph_tokens_used: int = 0
    facts_recalled: int = 0
    fact_count: int = 0
    community_count: int = 0
    fact_seed_source: str = "none"  # words, meaning, entity or none
    duration_ms: float


class CommunityRecall(ResponseModel):
    """A community summary context/get put in its answer."""

    id: str
    name: str
    summary: str
    size: int
    member_ids: list[str]
    score: float
    matched_by: str  # centroid or summary


class ContextResult(ResponseModel):
    mode: str
    query: str | None
    rules: list[ContextMemory]
    memories: list[ContextMemory]
    working_memories: list[ContextMemory]
    long_term_memories: list[ContextMemory]
    conflicts: list[Conflict]
    skill_files: list[SkillFile] = Field(default_factory=list)
    facts: list[Fact]
    communities: list[CommunityRecall] = Field(default_factory=list)
    context: str
    trace: ContextTrace


class RecallItem(ResponseModel):
    rank: int
    memory_id: str
    layer: str
    type: str
    scope: str
    project_id: str | None
    source: str
    graph: GraphReason | None


class TraceStrategy(ResponseModel):
    requested: str
    applied: str


class Tiers(ResponseModel):
    rule_ids: list[str]
    working_ids: list[str]
    long_term_ids: list[str]


class TraceResult(ResponseModel):
    mode: str
    include_rules: bool
    query: str | None
    strategy: TraceStrategy
    trace: ContextTrace
    tiers: Tiers
    recall: list[RecallItem]
    rules: list[ContextMemory]
    memories: list[ContextMemory]


# --- graph/status and graph/rollout -------------------------------------------------------------------------


class StatusRequest(RequestModel):
    top_nodes_limit: int | None = None
    scope: Scope | None = None


class GraphCounts(ResponseModel):
    nodes: int
    edges: int
    memory_links: int
    active_edges: int
    expired_edges: int
    orphan_nodes: int


class TopNode(ResponseModel):
    node_type: str
    node_key: str
    label: str
    memory_links: int
    outbound_edges: int
    inbound_edges: int
    degree: int


class PipelineCounts(ResponseModel):
    queued: int
    processing: int
    succeeded: int
    dead_letter: int
    oldest_queued_age_seconds: float | None


class VectorState(ResponseModel):
    model: str
    vectors: int
    access_path: str


class LlmUsage(ResponseModel):
    tokens: int
    cost_usd: float
    calls: int
    failed_calls: int


class LlmTotal(ResponseModel):
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    calls: int


class Eviction(ResponseModel):
    expired_facts: int
    decayed_facts: int = 0  # current facts under the confidence floor past the grace, invalidated (kept)
    stale_entities: int  # entities with no current fact unseen for the retention, archived (kept)
    over_cap_entities: int
    ran_at: datetime


class ExtractionState(ResponseModel):
    enabled: bool
    model: str | None
    status: str
    message: str
    daily_token_budget: int | None
    budget_resets_at: datetime
    today: LlmUsage
    total: LlmTotal
    entities: int
    archived_entities: int
    active_facts: int
    invalidated_facts: int
    relationship_edges: int
    last_eviction: Eviction | None


class ExtractionQuery(RequestModel):
    """graph/extraction GET: the scope travels flat in the query string."""

    tenant_id: str | None = None
    user_id: str | None = None
    project_id: str | None = None


class ExtractionSettingsRequest(RequestModel):
    daily_token_budget: int | None  # required: null goes back to the server's default budget
    scope: Scope | None = None


class AdmissionStatus(ResponseModel):
    enabled: bool
    admitted: int
    rejected: int
    by_reason: dict[str, int]


class ConsolidateRequest(RequestModel):
    types: list[MemoryType] | None = None
    include_global: bool | None = None
    global_only: bool | None = None
    dry_run: bool | None = None
    model: str | None = None
    scope: Scope | None = None


class ConsolidationRun(ResponseModel):
    id: str | None
    scope: str
    project_id: str | None
    user_id: str | None
    input_count: int
    merged_count: int
    superseded_count: int
    conflicted_count: int
    model: str | None
    created_at: datetime
    metadata: dict[str, Any] | None


class ConsolidateResult(ResponseModel):
    run_id: str | None
    dry_run: bool
    message: str
    run: ConsolidationRun
    winner_memory_ids: list[str]
    superseded_memory_ids: list[str]


class MemorySettings(ResponseModel):
    redact_credentials: bool
    scrub_at_rest: bool
    admission_enabled: bool
    admission_threshold: float
    admission_fast_path_margin: float
    admission_duplicate_cosine: float
    importance_weight: float
    half_life_days: float  # temporal decay of search and context (0: off)
    mmr_lambda: float  # MMR diversity of search and context (1: off)
    sessions_enabled: bool = True
    procedural_enabled: bool = True


class MemorySettingsQuery(RequestModel):
    """memories/settings GET: the scope travels flat in the query string."""

    tenant_id: str | None = None
    user_id: str | None = None
    project_id: str | None = None


class MemorySettingsRequest(RequestModel):
    """memories/settings PATCH: only the fields set are sent (null on a threshold, weight, half-life or
    lambda restores the default)."""

    redact_credentials: bool | None = None
    scrub_at_rest: bool | None = None
    admission_enabled: bool | None = None
    admission_threshold: float | None = None
    importance_weight: float | None = None
    half_life_days: float | None = None
    mmr_lambda: float | None = None
    sessions_enabled: bool | None = None
    procedural_enabled: bool | None = None
    scope: Scope | None = None


class RolloutState(ResponseModel):
    mode: str
    autopilot_enabled: bool
    updated_at: datetime | None
    updated_by: str | None


class ShadowMetrics(ResponseModel):
    window_hours: int
    total_requests: int
    hybrid_requested: int
    canary_applied: int
    shadow_executions: int
    fallback_count: int
    fallback_rate: float
    gate_blocked_fallbacks: int
    mode_fallbacks: int
    graph_error_fallbacks: int
    avg_graph_candidates: float
    avg_graph_expanded_count: float
    last_fallback_at: datetime | None
    last_fallback_reason: str | None


class GateReason(ResponseModel):
    code: str
    severity: str
    blocking: bool
    metric: str
    current_value: float
    previous_value: float | None
    threshold: float | None
    message: str


class GateWindow(ResponseModel):
    start_at: datetime
    end_at: datetime
    total_requests: int
    hybrid_requested: int
    canary_applied: int
    hybrid_fallbacks: int
    gate_blocked_fallbacks: int
    mode_fallbacks: int
    graph_error_fallbacks: int
    fallback_rate: float
    graph_error_fallback_rate: float
    canary_with_expansion: int
    expansion_coverage_rate: float
    avg_expanded_count: float
    avg_candidate_lift: float


class QualityGate(ResponseModel):
    evaluated_at: datetime
    window_hours: int
    min_hybrid_samples: int
    min_canary_samples_for_relevance: int
    status: str
    canary_blocked: bool
    reasons: list[GateReason]
    excluded_fallback_reasons: list[str]
    current: GateWindow
    previous: GateWindow


class PlanStage(ResponseModel):
    stage: str
    ready: bool
    required_samples: int
    current_samples: int
    blocker_codes: list[str]


class PlanMetric(ResponseModel):
    metric: str
    comparator: str
    target: float
    current: float
    gap_to_goal: float
    ready: bool


class Autopilot(ResponseModel):
    enabled: bool
    applied: bool


class RolloutPlan(ResponseModel):
    evaluated_at: datetime
    current_mode: str
    recommended_mode: str
    default_behavior_decision: str
    rationale: str
    ready_for_default_on: bool
    blocker_codes: list[str]
    stages: list[PlanStage]
    baseline: list[PlanMetric]
    slo: dict[str, float]
    autopilot: Autopilot


class Alarm(ResponseModel):
    code: str
    severity: str
    message: str
    triggered_at: datetime


class ErrorItem(ResponseModel):
    code: str
    message: str | None
    source: str
    memory_id: str | None
    timestamp: datetime


class StatusResult(ResponseModel):
    health: str
    counts: GraphCounts
    top_connected_nodes: list[TopNode]
    pipeline: PipelineCounts
    vectors: VectorState
    extraction: ExtractionState
    admission: AdmissionStatus | None = None
    rollout: RolloutState
    shadow_metrics: ShadowMetrics
    quality_gate: QualityGate
    rollout_plan: RolloutPlan
    alarms: list[Alarm]
    recent_errors: list[ErrorItem]
    sampled_at: datetime


class RetrievalPolicy(ResponseModel):
    default_strategy: str
    ready_window_streak: int
    last_decision: str | None
    last_evaluated_at: datetime | None
    updated_at: datetime | None
    updated_by: str | None
    autopilot_enabled: bool


class ScopeEcho(ResponseModel):
    tenant_id: str | None
    user_id: str | None
    project_id: str | None


class RolloutResult(ResponseModel):
    rollout: RolloutState
    shadow_metrics: ShadowMetrics
    quality_gate: QualityGate
    rollout_plan: RolloutPlan
    retrieval_policy: RetrievalPolicy
    scope: ScopeEcho


class RolloutQuery(RequestModel):
    """graph/rollout GET: the scope travels flat in the query string."""

    tenant_id: str | None = None
    user_id: str | None = None
    project_id: str | None = None
    window_hours: int | None = None


class RolloutSetRequest(RequestModel):
    mode: RolloutMode
    scope: Scope | None = None


class RolloutPatchRequest(RequestModel):
    mode: RolloutMode | None = None
    autopilot_enabled: bool | None = None
    scope: Scope | None = None


# --- graph/facts, graph/traverse, graph/entities, graph/communities, graph/stats, graph/clear, graph/decay,
# graph/settings (the entity graph's reasoning and upkeep) --------------------------------------------------


class FactsRequest(RequestModel):
    query: str | None = None
    entity: str | None = None
    max_hops: int | None = None
    edge_classes: list[EdgeClass] | None = None
    edge_types: list[str] | None = None
    direction: Direction | None = None
    at: datetime | None = None
    limit: int | None = None
    strategy: RecallStrategy | None = None
    scope: Scope | None = None


class Fact(ResponseModel):
    source: str
    relation: str
    target: str
    fact: str
    edge_class: str
    confidence: float
    score: float
    hop: int
    valid_from: datetime | None
    valid_to: datetime | None


class Seed(ResponseModel):
    id: str
    name: str
    score: float


class FactsResult(ResponseModel):
    facts: list[Fact]
    seeds: list[Seed]
    seed_source: str  # words, meaning, entity or none
    strategy: str
    timed_out: bool
    duration_ms: float


class TraverseRequest(RequestModel):
    start_entity: str
    edge_types: list[str] | None = None
    direction: Direction | None = None
    max_hops: int | None = None
    limit: int | None = None
    at: datetime | None = None
    scope: Scope | None = None


class PathStep(ResponseModel):
    source: str
    relation: str
    target: str


class TraverseNode(ResponseModel):
    id: str
    name: str
    hop: int
    score: float
    path: list[PathStep]


class TraverseEdge(ResponseModel):
    source: str
    relation: str
    target: str
    confidence: float
    fact: str
    edge_class: str


class EntityRef(ResponseModel):
    id: str
    name: str


class TraverseResult(ResponseModel):
    start: EntityRef
    nodes: list[TraverseNode]
    edges: list[TraverseEdge]


class EntitiesRequest(RequestModel):
    query: str | None = None
    entity: str | None = None
    type: str | None = None
    limit: int | None = None
    cursor: str | None = None
    scope: Scope | None = None


class EntityFact(ResponseModel):
    id: str  # split_entity moves facts by id
    source: str
    relation: str
    target: str
    fact: str
    confidence: float
    retrievable: bool
    valid_from: datetime | None
    valid_to: datetime | None


class EntityMerge(ResponseModel):
    """A merge (or split) record: merge_entities makes one per entity folded in; split_entity(merge_id=...)
    undoes it."""

    id: str
    kind: str  # merge or split
    survivor_id: str  # the entity kept (merge) or split from (split)
    merged_id: str  # the entity folded in (merge) or made (split)
    merged_name: str
    created_at: datetime
    undone_at: datetime | None


class Entity(ResponseModel):
    id: str
    name: str
    type: str
    summary: str | None
    aliases: list[str] | None  # detail only
    mention_count: int
    confidence: float | None  # how sure the graph is that this is one thing, resolved right
    community: str | None
    last_seen_at: datetime | None
    facts: list[EntityFact] | None  # detail only
    merges: list[EntityMerge] | None  # detail only, newest first


class EntitiesResult(ResponseModel):
    entities: list[Entity]
    next_cursor: str | None


class EntityMergeRequest(RequestModel):
    into: str
    entities: list[str]
    scope: Scope | None = None


class EntityMergeResult(ResponseModel):
    entity: Entity  # the entity kept, in detail
    merges: list[EntityMerge]


class EntitySplitRequest(RequestModel):
    entity: str
    merge_id: str | None = None
    name: str | None = None
    type: str | None = None
    aliases: list[str] | None = None
    fact_ids: list[str] | None = None
    scope: Scope | None = None


class EntitySplitResult(ResponseModel):
    entities: list[Entity]  # the entity split and the one made or brought back (those you may see)
    merge: EntityMerge  # the merge undone, or the split's own record


class CommunitiesRequest(RequestModel):
    refresh: bool | None = None  # True: start a refresh job (202, JobAccepted) instead of listing
    limit: int | None = None
    scope: Scope | None = None


class Community(ResponseModel):
    id: str
    name: str
    summary: str
    size: int
    members: list[str]


class CommunitiesResult(ResponseModel):
    communities: list[Community]
    last_run_at: datetime | None


class BackfillRequest(RequestModel):
    limit: int | None = None
    scope: Scope | None = None


class ScopedRequest(RequestModel):
    scope: Scope | None = None


class GraphStats(ResponseModel):
    entities: int
    aliases: int
    active_facts: int
    invalidated_facts: int
    below_floor_facts: int
    communities: int
    entities_by_type: dict[str, int]
    top_relations: dict[str, int]
    last_eviction: dict[str, Any] | None


class ClearRequest(RequestModel):
    confirm: str
    scope: Scope | None = None


class ClearResult(ResponseModel):
    entities: int
    facts: int


class DecayRequest(RequestModel):
    action: Literal["recompute", "set_rate"]
    edge_type: str | None = None
    rate: float | None = None
    scope: Scope | None = None


class DecayResult(ResponseModel):
    active_facts: int
    below_floor: int
    default_rate: float
    rates: dict[str, float]
    floor: float
    retrieval_counts_decayed: int


class GraphSettingsQuery(RequestModel):
    """graph/settings GET: the scope travels flat in the query string."""

    tenant_id: str | None = None
    user_id: str | None = None
    project_id: str | None = None


class GraphSettingsRequest(RequestModel):
    recall_strategy: RecallStrategy | None = None
    decay_rate: float | None = None
    max_entities: int | None = None
    scope: Scope | None = None


class GraphSettings(ResponseModel):
    recall_strategy: str
    decay_rate: float
    decay_rates: dict[str, float]
    max_entities: int | None


# --- workspace export / import ------------------------------------------------------------------------------


class ExportRequest(RequestModel):
    scope: Scope | None = None
    include_embeddings: bool | None = None


class ExportDownloadRequest(RequestModel):
    id: str  # the job_id workspace/export answered with
    scope: Scope | None = None


class ExportRecord(ResponseModel):
    """One line of an export file (what workspace/export/download streams). The clients hand lines over as
    plain dicts (the importer wants them verbatim); this names the one field every line has. The header line
    versions the format, not OpenAPI."""

    kind: str


class ImportQuery(RequestModel):
    """workspace/import: the body is the file, so the scope travels in the query string (no user_id: a file
    is imported into a whole workspace)."""

    tenant_id: str | None = None
    project_id: str | None = None


class ImportReport(ResponseModel):
    """What an import did: the `result` of its workspace_import job (jobs/status), read by
    `workspace.import_`. Not part of OpenAPI, where a job's result is any object."""

    workspace_id: int
    created: dict[str, int]
    skipped: dict[str, int]
    embed_jobs_queued: int
    # What the server decided differently from the file, one {line, field, code, message} each.
    adjusted: list[dict[str, Any]] = Field(default_factory=list)


class ExportJobResult(ResponseModel):
    """The `result` of a succeeded workspace_export job: the file to fetch with workspace/export/download."""

    lines: int
    bytes: int
    includes_embeddings: bool
    expires_at: datetime  # the server deletes the file then (EXPORT_RETENTION_HOURS)


# --- keys: the caller's own API keys ------------------------------------------------------------------------


class KeyCreateRequest(RequestModel):
    name: str | None = None
    key_scope: KeyScope | None = None
    pinned: bool | None = None
    expires_in_days: int | None = None
    scope: Scope | None = None  # the workspace a pinned key is confined to


class PinnedWorkspace(ResponseModel):
    id: int
    kind: str
    name: str


class ApiKey(ResponseModel):
    """A key's record; the secret itself is only in `KeyCreateResult`."""

    id: str
    name: str
    prefix: str
    last4: str
    key_scope: str
    pinned_workspace: PinnedWorkspace | None
    created_via: str
    created_at: datetime
    expires_at: datetime
    revoked_at: datetime | None
    last_used_at: datetime | None
    active: bool


class KeyCreateResult(ResponseModel):
    key: ApiKey
    secret: str = Field(repr=False)  # the key itself, in this answer only; kept out of repr()


class KeyListRequest(RequestModel):
    include_inactive: bool | None = None


class KeyListResult(ResponseModel):
    keys: list[ApiKey]
    count: int


class KeyRevokeRequest(RequestModel):
    id: str


class KeyRevokeResult(ResponseModel):
    id: str
    revoked: bool
    revoked_at: datetime


# --- jobs: background work (import, export, community refresh, backfill) the caller polls -------------------


class JobStatusRequest(RequestModel):
    id: str
    scope: Scope | None = None


class JobListRequest(RequestModel):
    kind: str | None = None
    limit: int | None = None
    scope: Scope | None = None


class JobError(ResponseModel):
    code: str
    error_class: str
    message: str | None
    details: dict[str, Any] | None


class Job(ResponseModel):
    id: str
    kind: str
    status: str  # queued, running, succeeded or failed
    phase: str | None
    done: int
    total: int | None
    result: dict[str, Any] | None
    error: JobError | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class JobListResult(ResponseModel):
    jobs: list[Job]
    count: int


class JobAccepted(ResponseModel):
    """The 202 answer of a route that starts a background job: follow `job_id` with jobs.status or
    jobs.wait."""

    job_id: str
    job: Job


# --- sessions and skill files -------------------------------------------------------------------------------

TurnRole = Literal["user", "assistant", "system", "tool"]
TurnKind = Literal["message", "tool_call", "tool_result", "event", "checkpoint"]


class SkillFile(ResponseModel):
    id: str
    path: str
    content: str
    scope: str
    project_id: str | None
    user_id: str | None
    procedure_key: str | None
    source_session_id: str | None
    source_snapshot_id: str | None
    usage_count: int
    last_used_at: datetime | None
    created_at: datetime
    updated_at: datetime


class SessionStartRequest(RequestModel):
    title: str | None = None
    client: str | None = None
    metadata: dict[str, Any] | None = None
    scope: Scope | None = None


class Session(ResponseModel):
    id: str
    scope: str
    project_id: str | None
    user_id: str | None
    client: str | None
    status: str
    title: str | None
    turn_count: int
    token_count: int
    summary_memory_id: str | None
    started_at: datetime
    last_activity_at: datetime
    ended_at: datetime | None
    metadata: dict[str, Any] | None


class SessionStartResult(ResponseModel):
    session_id: str
    message: str
    session: Session


class Turn(RequestModel):
    """One turn of a conversation: what was said, by whom (role, speaker) and when (said_at, may be past)."""

    content: str
    role: TurnRole | None = None
    kind: TurnKind | None = None
    speaker: str | None = None
    said_at: datetime | None = None
    turn_index: int | None = None
    token_count: int | None = None
    is_meaningful: bool | None = None
    metadata: dict[str, Any] | None = None


class CheckpointRequest(Turn):
    session_id: str
    scope: Scope | None = None


class TurnEvent(ResponseModel):
    id: str
    session_id: str
    kind: str
    role: str | None
    speaker: str | None
    turn_index: int
    said_at: datetime | None
    token_count: int | None = None
    is_meaningful: bool = True
    replayed: bool = False
    memory: Memory


class CheckpointResult(ResponseModel):
    session_id: str
    event_id: str
    message: str
    event: TurnEvent


class TurnsRequest(RequestModel):
    session_id: str
    turns: list[Turn]
    scope: Scope | None = None


class TurnsResult(ResponseModel):
    session_id: str
    count: int
    created: int
    message: str
    events: list[TurnEvent]


class SessionEndRequest(RequestModel):
    session_id: str
    status: Literal["closed", "compacted"] | None = None
    scope: Scope | None = None


class SessionSummary(ResponseModel):
    memory_id: str
    content: str
    method: str
    fallback_reason: str | None = None


class Snapshot(ResponseModel):
    id: str
    session_id: str
    slug: str
    source_trigger: str
    transcript_md: str
    message_count: int
    created_at: datetime


class SessionEndResult(ResponseModel):
    session_id: str
    message: str
    session: Session
    summary: SessionSummary | None
    snapshot: Snapshot


class SnapshotQuery(RequestModel):
    """sessions/{session_id}/snapshot: the session in the path, the scope flat in the query string."""

    session_id: str = Field(alias="session_id")
    tenant_id: str | None = None
    user_id: str | None = None
    project_id: str | None = None


class SnapshotResult(ResponseModel):
    session_id: str
    message: str
    snapshot: Snapshot


class SkillUpsertRequest(RequestModel):
    path: str
    content: str
    scope: Scope | None = None


class SkillUpsertResult(ResponseModel):
    skill_file: SkillFile
    created: bool
    message: str


class SkillListRequest(RequestModel):
    limit: int | None = None
    scope: Scope | None = None


class SkillListResult(ResponseModel):
    skill_files: list[SkillFile]
    count: int


class SkillDeleteRequest(RequestModel):
    path: str
    scope: Scope | None = None


class SkillDeleteResult(ResponseModel):
    path: str
    deleted: bool
    message: str


class SkillPromoteRequest(RequestModel):
    session_id: str
    snapshot_id: str | None = None
    path: str
    title: str
    procedure_key: str
    max_steps: int | None = None
    scope: Scope | None = None


class PromoteSource(ResponseModel):
    session_id: str
    snapshot_id: str
    snapshot_slug: str
    snapshot_created_at: datetime


class SkillPromoteResult(ResponseModel):
    skill_file: SkillFile
    created: bool
    source: PromoteSource
    method: str
    message: str


ContextResult.model_rebuild()

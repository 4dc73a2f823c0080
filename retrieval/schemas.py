"""Request and response schemas of the read routes: memories/search, context/get and graph/trace."""

from __future__ import annotations

from typing import Annotated, Literal

from ninja import Schema
from pydantic import Field

from config.schemas import ApiDateTime, ScopeIn, StrictIn, Trimmed, scope_field
from graphsvc.schemas import Direction, EdgeClass, FactOut
from memories.schemas import DictOut, MemoryLayer, MemoryOut, MemoryType, SkillFileOut

SearchStrategy = Literal["lexical", "semantic", "hybrid", "baseline", "hybrid_graph"]


class SearchIn(StrictIn):
    query: Annotated[str, Trimmed(500)] = Field(
        description='What to look for, 1–500 chars; web-search syntax ("phrase", -not, or).'
    )
    type: MemoryType | None = Field(None, description="Only this type.")
    layer: MemoryLayer | None = Field(None, description="Only this layer.")
    strategy: SearchStrategy | None = Field(
        None,
        description="hybrid (default; lexical while the workspace has no vectors, see the trace's "
        "fallbackReason), lexical or semantic; baseline = lexical, hybrid_graph = hybrid.",
    )
    limit: int = Field(10, ge=1, le=50, description="1–50, default 10.")
    importanceWeight: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Weight of memory importance in the ranking, 0–1; omitted: the workspace's "
        "setting (default 0.15). 0 turns it off.",
    )
    halfLifeDays: float | None = Field(
        None,
        ge=0,
        le=3650,
        description="Temporal decay (half-life in days of a memory's recency share); omitted: the "
        "workspace's setting (default 30). 0 turns it off.",
    )
    mmrLambda: float | None = Field(
        None,
        ge=0,
        le=1,
        description="MMR diversity, 0–1; omitted: the workspace's setting (default 0.7). 1 turns it off.",
    )
    includeSuperseded: bool = Field(False, description="Also return memories consolidation superseded.")
    scope: ScopeIn = scope_field()


class TimeWindowOut(DictOut):
    expression: str = Field(description="The query's time expression, taken out of the text it ranks.")
    start: ApiDateTime | None = Field(description="Window start (inclusive); null: open.")
    end: ApiDateTime | None = Field(
        description="Window end (exclusive); null: open. Both null: no window could be made (an event "
        "no memory mentions)."
    )
    anchorMemoryId: str | None = Field(
        description="For before/after/since an event: the memory whose time bounds the window."
    )
    inWindow: int = Field(
        0, description="Results whose time (metadata.sessionTime, else createdAt) is in it."
    )
    applied: bool = Field(True, description="Whether the window was applied to the ranking.")
    reason: str | None = Field(
        None,
        description="Why: date (a date or a relative time), event (anchored on the memory that tells of "
        'the event); or why not: indefinite_event ("before a release"), habitual_clause ("before I '
        'push"), procedural_question ("what should I run before …"), anchor_not_found (no memory tells '
        "of the event).",
    )


class RerankerOut(DictOut):
    model: str = Field(description="The reranker the operator configured (RERANK_MODEL).")
    ran: bool = Field(description="Whether its order was applied; false: the fused order stands.")
    candidates: int = Field(description="Candidates sent to it.")
    durationMs: float = Field(description="Time the call took, including a timeout or failure.")
    fallbackReason: str | None = Field(
        description="rerank_timeout, rerank_error or rerank_invalid_answer when it did not run."
    )


class SearchTraceOut(Schema):
    requestedStrategy: str = Field(description="Strategy asked for (after alias mapping).")
    appliedStrategy: str = Field(description="Strategy that produced the ranking.")
    lexicalCandidates: int = Field(description="Candidates from full-text search.")
    semanticCandidates: int = Field(description="Candidates from vector search.")
    fallbackTriggered: bool = Field(description="True when the requested strategy could not run as asked.")
    fallbackReason: str | None = Field(description="Why it fell back, e.g. vectors_unavailable.")
    timeWindow: TimeWindowOut | None = Field(
        None,
        description="The window a time expression of the query named (yesterday, in May 2023, before the "
        "migration): memories in it get a boost. Null: the query names no time.",
    )
    reranker: RerankerOut | None = Field(
        None, description="The optional reranker of the final candidates; null when none is configured."
    )


class SearchOut(Schema):
    memories: list[MemoryOut] = Field(description="Best match first.")
    count: int = Field(description="Number of memories returned.")
    trace: SearchTraceOut = Field(description="How the ranking was produced.")


ContextStrategy = Literal["lexical", "semantic", "hybrid", "auto", "baseline", "hybrid_graph"]


ContextMode = Literal["all", "working", "long_term", "rules_only"]


class ContextIn(StrictIn):
    query: Annotated[str, Trimmed(500)] | None = Field(
        None, description="What the agent is about to do or asks; omit for recency."
    )
    limit: int = Field(
        5, ge=1, le=50, description="Memories in the baseline, 1–50 (default 5); working tier ≤ 3."
    )
    includeRules: bool = Field(True, description="Include every active rule in scope (project rules first).")
    includeSkillFiles: bool = Field(
        True,
        description="Include the skill files (skills/files/*) whose path or text holds a word of the query "
        "(all without a query), at most CONTEXT_SKILL_FILES_LIMIT (20).",
    )
    mode: ContextMode = Field("all", description="all, working, long_term or rules_only.")
    strategy: ContextStrategy | None = Field(
        None,
        description="lexical, semantic, hybrid (also asks for graph expansion) or auto (a heuristic router "
        "picks one from the query's wording); baseline = lexical, hybrid_graph = hybrid. Omitted: the "
        "workspace's retrieval-policy default.",
    )
    graphDepth: int = Field(1, ge=0, le=2, description="Hops of graph expansion, 0–2 (default 1).")
    graphLimit: int = Field(8, ge=1, le=50, description="Most memories expansion may add, 1–50 (default 8).")
    halfLifeDays: float | None = Field(
        None,
        ge=0,
        le=3650,
        description="Temporal decay of the baseline (half-life in days of a memory's recency share); "
        "omitted: the workspace's setting (default 30). 0 turns it off.",
    )
    mmrLambda: float | None = Field(
        None,
        ge=0,
        le=1,
        description="MMR diversity of the baseline, 0–1; omitted: the workspace's setting (default 0.7). "
        "1 turns it off.",
    )
    importanceWeight: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Weight of memory importance in the ranking, 0–1; omitted: the workspace's "
        "setting (default 0.15). 0 turns it off.",
    )
    includeSuperseded: bool = Field(False, description="Also return memories consolidation superseded.")
    tokenBudget: int | None = Field(
        None,
        ge=256,
        le=1_000_000,
        description="The context's token budget; the entity graph's sections (known facts, community "
        "summaries) fill at most GRAPH_CONTEXT_BUDGET_SHARE of it (4 %). Omitted: CONTEXT_TOKEN_BUDGET "
        "(4,000).",
    )
    factEdgeClasses: list[EdgeClass] | None = Field(
        None,
        max_length=4,
        description="Known facts only of these classes (semantic, temporal, causal, entity).",
    )
    factDirection: Direction = Field(
        "both",
        description="Which way known facts are walked from the entities the query names: out (what they do), "
        "in (what points at them) or both (default).",
    )
    scope: ScopeIn = scope_field()


class GraphReasonOut(DictOut):
    whyIncluded: Literal["graph_expansion"] = Field(description="Always graph_expansion.")
    linkedViaNode: str = Field(description="The node it was reached through, as <node_type>:<node_key>.")
    edgeType: str = Field(
        description="Edge type of the last step, or shared_node for a shared tag/repo/type."
    )
    hopCount: int = Field(description="Hops from the seed.")
    confidence: float = Field(description="Confidence of that edge, 0–1.")
    seedMemoryId: str = Field(description="The baseline memory the path started from.")


class ContextMemoryOut(MemoryOut):
    graph: GraphReasonOut | None = Field(None, description="Present on memories added by graph expansion.")


class ConflictOut(DictOut):
    memoryAId: str = Field(description="One memory of the pair (the smaller id).")
    memoryBId: str = Field(description="The other.")
    edgeType: Literal["contradicts", "supersedes"] = Field(
        description="contradicts: the two disagree; supersedes: one replaced the other (update detection, a "
        "model, a person or consolidation), and only the current one is among the returned memories unless "
        "includeSuperseded."
    )
    confidence: float = Field(description="Highest confidence of the edges or the decision between them.")
    currentMemoryId: str = Field(
        description="The side that is current: the successor of a supersession, else the newer memory."
    )
    currentBecause: Literal["superseded", "decided", "newer"] = Field(
        description="superseded: the other side is marked superseded; decided: a person or a model said "
        "both stand (not_conflict) or restate each other; newer: nothing decided, the newer side is taken."
    )
    explanation: str = Field(description="Why they are listed (the model's explanation when it gave one).")
    evidence: str | None = Field(None, description="The quote the model based the contradiction on, if any.")
    suggestion: str = Field(description="What an agent may do about it.")


class ContextTraceOut(DictOut):
    requestedStrategy: str = Field(description="Strategy asked for (or the policy default, or auto).")
    strategy: Literal["baseline", "hybrid_graph"] = Field(description="Whether graph expansion was applied.")
    semanticStrategyRequested: str = Field(description="Ranking asked for: lexical, semantic or hybrid.")
    semanticStrategyApplied: str = Field(description="Ranking that ran (recency without a query).")
    lexicalCandidates: int = Field(description="Full-text candidates over all tiers.")
    semanticCandidates: int = Field(description="Vector candidates over all tiers.")
    semanticFallbackTriggered: bool = Field(description="The ranking fell back (see semanticFallbackReason).")
    semanticFallbackReason: str | None = Field(description="query_missing, query_embedding_unavailable, …")
    timeWindow: TimeWindowOut | None = Field(
        None, description="As in memories/search: the query's time window, if it names a time."
    )
    reranker: RerankerOut | None = Field(
        None, description="As in memories/search: the optional reranker; null when none is configured."
    )
    graphDepth: int = Field(description="Depth traversed (0 when no traversal ran).")
    graphLimit: int = Field(description="Limit used (0 when no traversal ran).")
    rolloutMode: str = Field(description="off, shadow or canary.")
    shadowExecuted: bool = Field(description="Traversal ran for metrics only.")
    qualityGateStatus: str = Field(description="pass, warn, fail, insufficient_data or unavailable.")
    qualityGateBlocked: bool = Field(description="The gate kept this canary request on the baseline.")
    qualityGateReasonCodes: list[str] = Field(description="Codes of the gate's current reasons.")
    baselineCandidates: int = Field(description="Memories in the baseline tiers.")
    graphCandidates: int = Field(description="Memories expansion reached before scope checks and the limit.")
    graphExpandedCount: int = Field(description="Memories expansion added.")
    conflictCount: int = Field(description="Contradiction pairs among the returned memories.")
    fallbackTriggered: bool = Field(description="Graph expansion was asked for but not applied.")
    fallbackReason: str | None = Field(
        description="rollout_off, quality_gate_blocked, shadow_mode, graph_expansion_error or "
        "rollout_guardrail."
    )
    totalCandidates: int = Field(description="Baseline plus added memories.")
    retrievalPolicyDefaultStrategy: str = Field(description="The workspace's default strategy.")
    retrievalPolicyAppliedStrategy: str = Field(
        description="hybrid when expansion applied, else the ranking."
    )
    retrievalPolicySelection: Literal["request", "policy_default", "router"] = Field(
        description="Where the strategy came from."
    )
    retrievalPolicyReadyForDefaultOn: bool = Field(description="Whether hybrid could become the default.")
    retrievalPolicyBlockerCodes: list[str] = Field(description="What keeps hybrid from being the default.")
    graphBudgetTokens: int = Field(0, description="Tokens the entity graph's sections could fill.")
    graphTokensUsed: int = Field(0, description="Tokens they filled (characters / 4 of their lines).")
    factsRecalled: int = Field(0, description="Facts recall found before the budget cut.")
    factCount: int = Field(0, description="Known facts in the answer.")
    communityCount: int = Field(0, description="Community summaries in the answer.")
    factSeedSource: Literal["words", "meaning", "entity", "none"] = Field(
        "none",
        description="How the facts' seed entities were found: the query's words, its meaning, or none.",
    )
    rulesTotal: int = Field(0, description="Rules the scope holds (up to CONTEXT_MAX_RULES).")
    rulesRanked: bool = Field(
        False,
        description="The scope holds more than CONTEXT_RULES_ALWAYS rules and the call has a query: the "
        "rules were ranked by it and kept within their share of the token budget (`rules` holds those kept).",
    )
    durationMs: float = Field(description="Server time spent assembling the context.")


class CommunityRecallOut(DictOut):
    id: str = Field(description="Community id (graph/communities).")
    name: str = Field(description="Community name.")
    summary: str = Field(description="Its summary, as the context text quotes it.")
    size: int = Field(description="Members.")
    memberIds: list[str] = Field(description="Up to 20 member entity ids (graph/entities shows one by name).")
    score: float = Field(
        description="How well it matched: the centroid's cosine or the share of words named."
    )
    matchedBy: Literal["centroid", "summary"] = Field(
        description="centroid: its members' mean vector is close to the query; summary: it holds an entity "
        "the query names and its summary names a word of the query."
    )


class ContextOut(DictOut):
    mode: ContextMode = Field(description="The mode used.")
    query: str | None = Field(description="The query used.")
    rules: list[ContextMemoryOut] = Field(
        description="Active rules in scope (empty with includeRules false)."
    )
    memories: list[ContextMemoryOut] = Field(
        description="The memories for this mode, baseline first, then graph."
    )
    workingMemories: list[ContextMemoryOut] = Field(description="Working tier (≤ 3 plus graph additions).")
    longTermMemories: list[ContextMemoryOut] = Field(description="Long-term tier.")
    conflicts: list[ConflictOut] = Field(description="Contradictions among the returned memories.")
    skillFiles: list[SkillFileOut] = Field(
        default_factory=list,
        description="Skill files matching the query, best first (empty with includeSkillFiles false); each "
        "as skills/files/list answers it. Returning one counts as a use (usageCount, lastUsedAt).",
    )
    facts: list[FactOut] = Field(
        description="Facts from the entity graph about what the query names, best first, as many as fit the "
        "graph's share of the token budget (at most GRAPH_CONTEXT_MAX_FACTS; empty without a query)."
    )
    communities: list[CommunityRecallOut] = Field(
        default_factory=list,
        description="Community summaries that match the query, within the graph's share of the token budget.",
    )
    context: str = Field(
        description="Ready-to-paste text: rules, relevant memories, conflicts, known facts, related topics."
    )
    trace: ContextTraceOut = Field(description="How this answer was produced.")


class TraceIn(ContextIn):
    limit: int = Field(10, ge=1, le=50, description="Memories in the baseline, 1–50 (default 10).")


class RecallItemOut(Schema):
    rank: int = Field(description="1-based position.")
    memoryId: str = Field(description="Memory id.")
    layer: str = Field(description="Memory layer.")
    type: str = Field(description="Memory type.")
    scope: str = Field(description="global or project.")
    projectId: str | None = Field(description="Project, if any.")
    source: Literal["baseline", "graph_expansion"] = Field(description="Where the memory came from.")
    graph: GraphReasonOut | None = Field(description="Provenance of a graph-expanded memory.")


class TraceStrategyOut(Schema):
    requested: str = Field(description="Strategy asked for.")
    applied: Literal["baseline", "hybrid_graph"] = Field(description="What ran.")


class TiersOut(Schema):
    ruleIds: list[str] = Field(description="Rules returned.")
    workingIds: list[str] = Field(description="Working tier, in order.")
    longTermIds: list[str] = Field(description="Long-term tier, in order.")


class TraceOut(Schema):
    mode: ContextMode = Field(description="The mode used.")
    includeRules: bool = Field(description="Whether rules were included.")
    query: str | None = Field(description="The query used.")
    strategy: TraceStrategyOut = Field(description="Requested and applied strategy.")
    trace: ContextTraceOut = Field(description="As in context/get.")
    tiers: TiersOut = Field(description="Ids per tier.")
    recall: list[RecallItemOut] = Field(description="Every returned memory with its source.")
    rules: list[ContextMemoryOut] = Field(description="Rules returned.")
    memories: list[ContextMemoryOut] = Field(description="Memories returned.")

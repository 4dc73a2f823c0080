"""Request and response schemas of the graph routes owned by graphsvc."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import Field, model_validator

from config.schemas import ApiDateTime, ScopeIn, ScopeQuery, StrictIn, Trimmed, scope_field


class LlmUsageOut(Schema):
    tokens: int = Field(description="Prompt + completion tokens since 00:00 UTC.")
    costUsd: float = Field(
        description="Cost since 00:00 UTC, from litellm's cost map (0 for unknown models)."
    )
    calls: int = Field(description="LLM calls since 00:00 UTC.")
    failedCalls: int = Field(description="Of those, calls that failed (timeout, 429, invalid answer …).")


class LlmTotalOut(Schema):
    promptTokens: int = Field(description="All prompt tokens ever sent for this workspace.")
    completionTokens: int = Field(description="All completion tokens received.")
    costUsd: float = Field(description="All cost, from litellm's cost map.")
    calls: int = Field(description="All LLM calls, failed ones included.")


class EvictionOut(Schema):
    expiredFacts: int = Field(description="Invalidated facts past GRAPH_EVICTION_RETENTION_DAYS deleted.")
    decayedFacts: int = Field(
        0,
        description="Current facts under GRAPH_CONFIDENCE_FLOOR for GRAPH_DECAYED_FACT_GRACE_DAYS, "
        "invalidated (kept as history).",
    )
    staleEntities: int = Field(
        description="Entities without current facts, unseen for the retention, archived (kept)."
    )
    overCapEntities: int = Field(description="Entities deleted to keep the entity cap.")
    ranAt: datetime = Field(description="When eviction ran.")


class ExtractionOut(Schema):
    enabled: bool = Field(description="False when no GRAPH_LLM_MODEL is configured.")
    model: str | None = Field(description="The litellm model used for extraction.")
    status: Literal["off", "active", "budget_exhausted"] = Field(
        description=(
            "budget_exhausted: today's token budget is spent and extraction jobs wait; nothing else stops."
        )
    )
    message: str = Field(description="What the status means for this workspace.")
    dailyTokenBudget: int | None = Field(
        description="Tokens per UTC day in effect: the workspace's own, else the server default, never above "
        "the server's ceiling (null: no limit)."
    )
    budgetResetsAt: datetime = Field(description="Next 00:00 UTC.")
    today: LlmUsageOut = Field(description="Usage since 00:00 UTC.")
    total: LlmTotalOut = Field(description="Usage since the workspace began.")
    entities: int = Field(description="Entity nodes in use (archived ones not counted).")
    archivedEntities: int = Field(
        description="Entities archived by eviction (no current facts, unseen for the retention): kept, out "
        "of lists and recall, back when mentioned again."
    )
    activeFacts: int = Field(description="Facts currently valid.")
    invalidatedFacts: int = Field(
        description="Facts replaced by a newer version (kept for point-in-time reads)."
    )
    relationshipEdges: int = Field(
        description="LLM relationship edges between memories (contradicts, caused_by …)."
    )
    lastEviction: EvictionOut | None = Field(
        description="What the last scheduled eviction removed (null: never ran)."
    )


class ExtractionQuery(ScopeQuery):
    """graph/extraction takes only the scope."""


class ExtractionSettingsIn(StrictIn):
    scope: ScopeIn = scope_field()
    dailyTokenBudget: int | None = Field(
        ...,
        ge=1,
        le=10_000_000_000,
        description="Tokens per UTC day for this workspace's LLM extraction, at most the server's ceiling "
        "(GRAPH_LLM_DAILY_TOKEN_BUDGET_MAX, else 400 TOKEN_BUDGET_ABOVE_CEILING); null goes back to the "
        "server "
        "default (GRAPH_LLM_DAILY_TOKEN_BUDGET, itself capped by the ceiling).",
    )


# --- fact recall, traversal, entities, communities, upkeep --------------------------------------------------

EdgeClass = Literal["semantic", "temporal", "causal", "entity"]
RecallStrategy = Literal["bfs", "spreading"]
Direction = Literal["out", "in", "both"]
EdgeTypes = list[Annotated[str, Trimmed(128)]] | None
DIRECTION_HELP = (
    "Which way facts are followed: out (source to target: what the entity does), in (target to source: "
    "what points at it) or both (default)."
)
EDGE_TYPES_HELP = 'Only these relations, written as stored or as words ("works on" is works_on); at most 20.'


class FactsIn(StrictIn):
    query: Annotated[str, Trimmed(500)] | None = Field(
        None, description="Words naming entities; send query or entity."
    )
    entity: Annotated[str, Trimmed(512)] | None = Field(
        None, description="One entity by name or alias (404 when unknown)."
    )
    maxHops: int = Field(2, ge=1, le=3, description="Hops from the seed entities, 1-3 (default 2).")
    edgeClasses: list[EdgeClass] | None = Field(None, max_length=4, description="Only these edge classes.")
    edgeTypes: EdgeTypes = Field(None, max_length=20, description=EDGE_TYPES_HELP)
    direction: Direction = Field("both", description=DIRECTION_HELP)
    at: datetime | None = Field(
        None, description="Facts as they were valid at this time (valid_from <= at < valid_to)."
    )
    limit: int = Field(10, ge=1, le=100, description="Most facts, 1-100 (default 10).")
    strategy: RecallStrategy | None = Field(
        None, description="bfs or spreading; omitted: the workspace setting."
    )
    scope: ScopeIn = scope_field()

    @model_validator(mode="after")
    def _query_or_entity(self) -> FactsIn:
        if not self.query and not self.entity:
            raise ValueError("send query (words naming entities) or entity (one entity's name)")
        return self


class FactOut(Schema):
    source: str = Field(description="Source entity's name.")
    relation: str = Field(description="The relation (a lowercased verb phrase).")
    target: str = Field(description="Target entity's name.")
    fact: str = Field(description="The fact as one sentence (newlines and angle brackets removed).")
    edgeClass: str = Field(description="semantic, temporal, causal or entity.")
    confidence: float = Field(
        description="Effective confidence: decayed since last observed, boosted by use."
    )
    score: float = Field(
        description="Seed match x 1/(1+hop) x confidence x class weight (bfs) or activation."
    )
    hop: int = Field(description="Hops from the nearest seed entity.")
    validFrom: ApiDateTime | None = Field(description="When the fact became true.")
    validTo: ApiDateTime | None = Field(description="When it stopped being true (null: still true).")


class SeedOut(Schema):
    id: str = Field(description="The seed entity's id.")
    name: str = Field(description="A seed entity.")
    score: float = Field(description="Its seed score, 0.1-1.")


class FactsOut(Schema):
    facts: list[FactOut] = Field(description="Best first, one per (source, relation, target).")
    seeds: list[SeedOut] = Field(description="The entities the recall started from.")
    seedSource: Literal["words", "meaning", "entity", "none"] = Field(
        description="How the seeds were found: the query's words, its meaning (no word matched), the entity "
        "named, or none."
    )
    strategy: RecallStrategy = Field(description="The strategy that ran.")
    timedOut: bool = Field(description="Spreading activation passed its time limit; facts is then empty.")
    durationMs: float = Field(description="Server time.")


class TraverseIn(StrictIn):
    startEntity: Annotated[str, Trimmed(512)] = Field(description="Entity to start from, by name or alias.")
    edgeTypes: EdgeTypes = Field(None, max_length=20, description=EDGE_TYPES_HELP)
    direction: Direction = Field("both", description=DIRECTION_HELP)
    maxHops: int = Field(2, ge=1, le=3, description="Hops, 1-3 (default 2).")
    limit: int = Field(20, ge=1, le=100, description="Most nodes, 1-100 (default 20).")
    at: datetime | None = Field(None, description="The graph as it was at this time.")
    scope: ScopeIn = scope_field()


class PathStepOut(Schema):
    source: str = Field(description="Source entity of the fact.")
    relation: str = Field(description="Relation.")
    target: str = Field(description="Target entity.")


class TraverseNodeOut(Schema):
    id: str = Field(description="Entity id.")
    name: str = Field(description="Entity name.")
    hop: int = Field(description="Hops from the start entity.")
    score: float = Field(description="Product of the effective confidences along the path.")
    path: list[PathStepOut] = Field(description="The facts walked from the start entity to this one.")


class TraverseEdgeOut(Schema):
    source: str = Field(description="Source entity.")
    relation: str = Field(description="Relation.")
    target: str = Field(description="Target entity.")
    confidence: float = Field(description="Effective confidence.")
    fact: str = Field(description="The fact.")
    edgeClass: str = Field(description="Edge class.")


class EntityRefOut(Schema):
    id: str = Field(description="Entity id.")
    name: str = Field(description="Entity name.")


class TraverseOut(Schema):
    start: EntityRefOut = Field(description="The entity the walk started from.")
    nodes: list[TraverseNodeOut] = Field(description="Reached entities, best score first.")
    edges: list[TraverseEdgeOut] = Field(description="The facts on the returned paths.")


class EntitiesIn(StrictIn):
    query: Annotated[str, Trimmed(500)] | None = Field(
        None, description="Search by name, alias or summary words."
    )
    entity: Annotated[str, Trimmed(512)] | None = Field(
        None, description="One entity with its aliases and facts (detail)."
    )
    type: Annotated[str, Trimmed(32)] | None = Field(
        None, description="Only this entity type (person, tool, ...)."
    )
    limit: int = Field(20, ge=1, le=100, description="Most entities, 1-100 (default 20).")
    cursor: str | None = Field(
        None, max_length=40, description="nextCursor of the previous page (list only)."
    )
    scope: ScopeIn = scope_field()


class EntityFactOut(Schema):
    id: str = Field(description="Fact id (graph/entities/split moves facts by id).")
    source: str = Field(description="Source entity.")
    relation: str = Field(description="Relation.")
    target: str = Field(description="Target entity.")
    fact: str = Field(description="The fact.")
    confidence: float = Field(description="Effective confidence now.")
    retrievable: bool = Field(description="False when decay took it under the floor (kept, not retrieved).")
    validFrom: datetime | None = Field(description="Valid from.")
    validTo: datetime | None = Field(description="Valid to (null: current).")


class MergeOut(Schema):
    id: str = Field(description="Merge record id (graph/entities/split with mergeId undoes a merge).")
    kind: Literal["merge", "split"] = Field(description="merge or split.")
    survivorId: str = Field(description="The entity kept (merge) or split from (split).")
    mergedId: str = Field(description="The entity folded in (merge) or made (split).")
    mergedName: str = Field(description="Its name.")
    createdAt: datetime = Field(description="When.")
    undoneAt: datetime | None = Field(description="When the merge was undone (null: it holds).")


class EntityOut(Schema):
    id: str = Field(description="Entity id.")
    name: str = Field(description="Latest surface form.")
    type: str = Field(description="Entity type.")
    summary: str | None = Field(description="What the notes said about it.")
    aliases: list[str] | None = Field(description="Known names (detail only).")
    mentionCount: int = Field(description="Times it was mentioned.")
    confidence: float | None = Field(
        description="How sure the graph is that this is one thing, resolved right: 0.5 when first seen, "
        "higher with each mention by its name or an alias, lower when held together by near matches."
    )
    community: str | None = Field(description="Its community's name.")
    lastSeenAt: datetime | None = Field(description="Last mention.")
    facts: list[EntityFactOut] | None = Field(
        description="Its facts, current and past (detail only, at most 100)."
    )
    merges: list[MergeOut] | None = Field(
        description="Merges and splits it took part in, newest first (detail only, at most 20)."
    )


class EntitiesOut(Schema):
    entities: list[EntityOut] = Field(description="Matches (search: best first; list: newest first).")
    nextCursor: str | None = Field(description="Pass as cursor for the next page (list only).")


class EntityMergeIn(StrictIn):
    into: Annotated[str, Trimmed(512)] = Field(description="The entity to keep, by name or alias.")
    entities: list[Annotated[str, Trimmed(512)]] = Field(
        min_length=1,
        max_length=10,
        description="The entities to fold into it, by name or alias (1-10): their aliases, mentions and "
        "facts move to it; duplicate facts merge by their evidence.",
    )
    scope: ScopeIn = scope_field()


class EntityMergeOut(Schema):
    entity: EntityOut = Field(description="The entity kept, as graph/entities shows it in detail.")
    merges: list[MergeOut] = Field(description="One record per entity folded in.")


class EntitySplitIn(StrictIn):
    entity: Annotated[str, Trimmed(512)] = Field(description="The entity to split, by name or alias.")
    mergeId: str | None = Field(
        None,
        max_length=20,
        description="Undo this merge into the entity (its merge record id): the merged entity comes back.",
    )
    name: Annotated[str, Trimmed(300)] | None = Field(
        None, description="Without mergeId: the new entity's name, which takes the aliases and facts given."
    )
    type: Annotated[str, Trimmed(32)] | None = Field(
        None, description="The new entity's type (default: the entity's own)."
    )
    aliases: list[Annotated[str, Trimmed(512)]] = Field(
        default_factory=list, max_length=100, description="Aliases of the entity that move to the new one."
    )
    factIds: list[Annotated[str, Trimmed(20)]] = Field(
        default_factory=list,
        max_length=500,
        description="Facts of the entity (ids from graph/entities detail) that move to the new one.",
    )
    scope: ScopeIn = scope_field()

    @model_validator(mode="after")
    def _undo_or_new(self) -> EntitySplitIn:
        if self.mergeId is None and not self.name:
            raise ValueError("send mergeId (undo a merge) or name with aliases or factIds (a new entity)")
        if self.mergeId is not None and (self.name or self.aliases or self.factIds):
            raise ValueError("mergeId undoes a merge: send it alone, without name, aliases or factIds")
        return self


class EntitySplitOut(Schema):
    entities: list[EntityOut] = Field(
        description="The entity split and the one made or brought back, in detail (those the caller may see)."
    )
    merge: MergeOut = Field(description="The merge undone, or the split's own record.")


class ScopedIn(StrictIn):
    scope: ScopeIn = scope_field()


class CommunitiesIn(StrictIn):
    refresh: bool = Field(
        False,
        description="Start a community refresh (detection, then summaries) as a background job instead of "
        "listing: 202 with a jobId to follow with jobs/status. Needs the admin role.",
    )
    limit: int = Field(50, ge=1, le=200, description="Most communities, 1-200 (default 50).")
    scope: ScopeIn = scope_field()


class CommunityOut(Schema):
    id: str = Field(description="Community id.")
    name: str = Field(description="First member names and a tag.")
    summary: str = Field(description="2-3 sentences (empty without a model).")
    size: int = Field(description="Members.")
    members: list[str] = Field(description="Up to 20 member names.")


class CommunitiesOut(Schema):
    communities: list[CommunityOut] = Field(description="Largest first.")
    lastRunAt: datetime | None = Field(description="Last full detection.")


class BackfillIn(StrictIn):
    limit: int = Field(
        2000,
        ge=1,
        le=2000,
        description="Most memories this job extracts, 1-2000 (default 2000); run again for more (the "
        "result's `more` says whether any are left).",
    )
    scope: ScopeIn = scope_field()


class StatsOut(Schema):
    entities: int = Field(description="Entities.")
    aliases: int = Field(description="Aliases.")
    activeFacts: int = Field(description="Current facts.")
    invalidatedFacts: int = Field(description="Facts replaced or ended (kept for point-in-time reads).")
    belowFloorFacts: int = Field(description="Current facts decayed under the retrieval floor.")
    communities: int = Field(description="Communities.")
    entitiesByType: dict[str, int] = Field(description="Entities per type.")
    topRelations: dict[str, int] = Field(description="The 10 most common current relations.")
    lastEviction: dict[str, Any] | None = Field(description="What the last eviction removed.")


class ClearIn(StrictIn):
    confirm: str = Field(
        description='Must be "delete entity graph": clearing cannot be undone.', max_length=40
    )
    scope: ScopeIn = scope_field()


class ClearOut(Schema):
    entities: int = Field(description="Entities deleted.")
    facts: int = Field(description="Facts deleted.")


class DecayIn(StrictIn):
    action: Literal["recompute", "set_rate"] = Field(
        description="recompute: decay retrieval counts now and report; set_rate: the rate of one edge type."
    )
    edgeType: Annotated[str, Trimmed(128)] | None = Field(
        None, description="set_rate: the relation; omitted = the default rate."
    )
    rate: float | None = Field(
        None, ge=0, le=10, description="set_rate: per day, 0-10; null removes an override."
    )
    scope: ScopeIn = scope_field()


class DecayOut(Schema):
    activeFacts: int = Field(description="Current facts.")
    belowFloor: int = Field(description="Of those, decayed under the floor (not retrieved).")
    defaultRate: float = Field(description="Decay per day for relations without their own rate.")
    rates: dict[str, float] = Field(description="Per-relation rates.")
    floor: float = Field(description="Retrieval floor of the effective confidence.")
    retrievalCountsDecayed: int = Field(description="Facts whose retrieval count was decayed by this call.")


class GraphSettingsOut(Schema):
    recallStrategy: RecallStrategy = Field(description="Default fact recall strategy.")
    decayRate: float = Field(description="Decay per day (default GRAPH_DECAY_RATE).")
    decayRates: dict[str, float] = Field(description="Per-relation decay rates.")
    maxEntities: int | None = Field(description="Entity cap enforced by eviction (null: GRAPH_MAX_ENTITIES).")


class GraphSettingsIn(StrictIn):
    recallStrategy: RecallStrategy | None = Field(None, description="bfs or spreading.")
    decayRate: float | None = Field(None, ge=0, le=10, description="Decay per day, 0-10.")
    maxEntities: int | None = Field(None, ge=10, le=10_000_000, description="Entity cap, 10-10,000,000.")
    scope: ScopeIn = scope_field()

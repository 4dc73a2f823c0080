"""SDK routes of graphsvc: graph/extraction (LLM extraction state and budget) and the entity graph's reasoning
and upkeep routes (facts, traverse, entities, communities, stats, clear, decay, settings)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router, Status

from config.errors import ApiError, success_envelope
from config.schemas import Envelope
from graphsvc import selectors, services, upkeep
from graphsvc.facts import Audience, Seed, audience_for, entity_lookup, entity_not_found, facts_recall
from graphsvc.schemas import (
    BackfillIn,
    ClearIn,
    ClearOut,
    CommunitiesIn,
    CommunitiesOut,
    DecayIn,
    DecayOut,
    EntitiesIn,
    EntitiesOut,
    EntityMergeIn,
    EntityMergeOut,
    EntitySplitIn,
    EntitySplitOut,
    ExtractionOut,
    ExtractionQuery,
    ExtractionSettingsIn,
    FactsIn,
    FactsOut,
    GraphSettingsIn,
    GraphSettingsOut,
    ScopedIn,
    StatsOut,
    TraverseIn,
    TraverseOut,
)
from graphsvc.traverse import graph_traverse
from memories.selectors import memory_scope
from pipeline import graph_jobs
from pipeline import selectors as job_selectors
from pipeline.models import BackgroundJob
from pipeline.schemas import JobAcceptedOut
from retrieval.embeddings import embed_query
from tenancy.access import request_workspace_id
from tenancy.auth import SdkCaller, SdkKeyAuth
from tenancy.policy import ADMIN, READ, requires
from tenancy.rls import workspace_context

router = Router(tags=["graph"], auth=SdkKeyAuth())


@router.get(
    "/graph/extraction",
    response=Envelope[ExtractionOut],
    summary="LLM extraction state: on/off, token budget, today's usage, entities and facts built",
)
@requires(READ)
def graph_extraction_get(request: HttpRequest, query: Query[ExtractionQuery]) -> dict[str, Any]:
    workspace_id = request_workspace_id(request, query.scope())
    with workspace_context(workspace_id):
        data = selectors.extraction_status(workspace_id=workspace_id)
    return success_envelope(request, data)


@router.patch(
    "/graph/extraction",
    response=Envelope[ExtractionOut],
    summary="Set the workspace's daily LLM token budget (null: no limit)",
    description="While today's tokens are at or above the budget, extraction jobs wait (they look again "
    "every GRAPH_LLM_BUDGET_RECHECK_SECONDS); memory writes, search and context are never affected.",
)
@requires(ADMIN)
def graph_extraction_patch(request: HttpRequest, payload: ExtractionSettingsIn) -> dict[str, Any]:
    workspace_id = request_workspace_id(request, payload.scope)
    with workspace_context(workspace_id):
        services.graph_settings_update(
            workspace_id=workspace_id, llm_daily_token_budget=payload.dailyTokenBudget
        )
        data = selectors.extraction_status(workspace_id=workspace_id)
    return success_envelope(request, data)


# --- fact recall, traversal, entities, communities, stats, clear, decay, settings -----------------------
CLEAR_CONFIRMATION = "delete entity graph"
MAX_RELATION_RATES = 50


@router.post(
    "/graph/facts",
    response=Envelope[FactsOut],
    summary="Facts about the entities a query (or one entity) reaches: BFS or spreading activation",
    description="Seeds come from the query's content words (stop words out, multi-word names whole; names "
    "and aliases over summaries, near spellings, the embedding when no word matches). `edgeTypes` and "
    "`direction` choose the facts walked; `at` reads the facts valid then. Unknown entity: 404 "
    "ENTITY_NOT_FOUND with the closest names in details.closest.",
)
@requires(READ)
def graph_facts(request: HttpRequest, payload: FactsIn) -> dict[str, Any]:
    workspace_id = request_workspace_id(request, payload.scope)
    scope = memory_scope(payload.scope)
    with workspace_context(workspace_id):
        data = facts_recall(
            workspace_id=workspace_id,
            scope=scope,
            query=payload.query,
            entity=payload.entity,
            max_hops=payload.maxHops,
            limit=payload.limit,
            at=payload.at,
            edge_classes=payload.edgeClasses,
            edge_types=payload.edgeTypes,
            direction=payload.direction,
            strategy=payload.strategy,
            embed=embed_query,
            lazy_commit=True,
        )
    return success_envelope(request, data)


@router.post(
    "/graph/traverse",
    response=Envelope[TraverseOut],
    summary="Walk the entity graph from one entity along typed edges, with the path to each node",
    description='maxHops <= 3, limit <= 100; `edgeTypes` are matched like relations ("works on" is '
    "works_on), `direction` out, in or both. Unknown start entity: 404 ENTITY_NOT_FOUND with the closest "
    "names "
    "in details.closest.",
)
@requires(READ)
def graph_traverse_route(request: HttpRequest, payload: TraverseIn) -> dict[str, Any]:
    workspace_id = request_workspace_id(request, payload.scope)
    scope = memory_scope(payload.scope)
    with workspace_context(workspace_id):
        data = graph_traverse(
            workspace_id=workspace_id,
            scope=scope,
            start_entity=payload.startEntity,
            edge_types=payload.edgeTypes,
            max_hops=payload.maxHops,
            limit=payload.limit,
            at=payload.at,
            direction=payload.direction,
            lazy_commit=True,
        )
    return success_envelope(request, data)


@router.post(
    "/graph/entities",
    response=Envelope[EntitiesOut],
    summary="Search entities (query), list them (pages) or show one with aliases and facts (entity)",
)
@requires(READ)
def graph_entities(request: HttpRequest, payload: EntitiesIn) -> dict[str, Any]:
    workspace_id = request_workspace_id(request, payload.scope)
    audience = audience_for(memory_scope(payload.scope))
    cursor_id = selectors.entities_cursor_id(payload.cursor)
    with workspace_context(workspace_id):
        if payload.entity:
            found = _entity(workspace_id=workspace_id, name=payload.entity, audience=audience)
            data = {
                "entities": [
                    selectors.entity_detail(
                        workspace_id=workspace_id, node_id=found.node_id, audience=audience
                    )
                ],
                "nextCursor": None,
            }
        else:
            data = selectors.entities_list(
                audience=audience,
                workspace_id=workspace_id,
                query=payload.query,
                entity_type=payload.type,
                limit=payload.limit,
                cursor_id=cursor_id,
            )
    return success_envelope(request, data)


def _entity(*, workspace_id: int, name: str, audience: Audience) -> Seed:
    """The entity a caller names (alias or name), else 404 ENTITY_NOT_FOUND with the closest it may see."""
    found = entity_lookup(workspace_id=workspace_id, name=name, audience=audience)
    if found is None:
        raise entity_not_found(workspace_id=workspace_id, name=name, audience=audience)
    return found


def _record_id(raw: str, *, field: str) -> int:
    if not selectors.ID_TEXT.fullmatch(raw) or int(raw) > selectors.BIGINT_MAX:
        raise ApiError(400, "INVALID_REQUEST", f"{field} must be an id as graph/entities returns it.")
    return int(raw)


@router.post(
    "/graph/entities/merge",
    response=Envelope[EntityMergeOut],
    summary="Merge entities into one: aliases, mentions and facts move to it, duplicate facts merge",
    description="Each entity in `entities` is folded into `into`; a merge record per entity keeps the "
    "history and what undoing it needs (graph/entities/split with mergeId). Names the caller's end user "
    "may not see are 404 ENTITY_NOT_FOUND.",
)
@requires(ADMIN)
def graph_entities_merge(request: HttpRequest, payload: EntityMergeIn) -> dict[str, Any]:
    workspace_id = request_workspace_id(request, payload.scope)
    audience = audience_for(memory_scope(payload.scope))
    with workspace_context(workspace_id):
        survivor = _entity(workspace_id=workspace_id, name=payload.into, audience=audience)
        merged = [
            _entity(workspace_id=workspace_id, name=name, audience=audience) for name in payload.entities
        ]
        ids = [m.node_id for m in merged]
        if survivor.node_id in ids or len(set(ids)) != len(ids):
            raise ApiError(
                400,
                "MERGE_SAME_ENTITY",
                "Each entity may be named once and not be the one merged into (aliases name the same "
                "entity).",
            )
        records = [
            services.entity_merge(workspace_id=workspace_id, survivor_id=survivor.node_id, merged_id=node_id)
            for node_id in ids
        ]
        entity = selectors.entity_detail(
            workspace_id=workspace_id, node_id=survivor.node_id, audience=audience
        )
    return success_envelope(request, {"entity": entity, "merges": records})


@router.post(
    "/graph/entities/split",
    response=Envelope[EntitySplitOut],
    summary="Split an entity: undo a merge into it, or move chosen aliases and facts to a new entity",
    description="With `mergeId`, the entity merged in comes back with its aliases, mentions and facts. With "
    "`name`, a new entity takes the `aliases` and `factIds` given (fact ids from graph/entities detail).",
)
@requires(ADMIN)
def graph_entities_split(request: HttpRequest, payload: EntitySplitIn) -> dict[str, Any]:
    workspace_id = request_workspace_id(request, payload.scope)
    audience = audience_for(memory_scope(payload.scope))
    with workspace_context(workspace_id):
        entity = _entity(workspace_id=workspace_id, name=payload.entity, audience=audience)
        if payload.mergeId is not None:
            merge_id = _record_id(payload.mergeId, field="mergeId")
            if not selectors.entity_merge_into(
                workspace_id=workspace_id, merge_id=merge_id, node_id=entity.node_id
            ):
                raise ApiError(404, "MERGE_NOT_FOUND", f"No merge {payload.mergeId} into {payload.entity!r}.")
            record = services.entity_merge_undo(workspace_id=workspace_id, merge_id=merge_id)
        else:
            record = services.entity_split(
                workspace_id=workspace_id,
                node_id=entity.node_id,
                name=payload.name or "",
                entity_type=payload.type,
                aliases=payload.aliases,
                fact_ids=[_record_id(raw, field="factIds") for raw in payload.factIds],
            )
        shown = selectors.entity_visible_ids(
            workspace_id=workspace_id,
            node_ids=[int(record["survivorId"]), int(record["mergedId"])],
            audience=audience,
        )
        entities = [
            selectors.entity_detail(workspace_id=workspace_id, node_id=node_id, audience=audience)
            for node_id in shown
        ]
    return success_envelope(request, {"entities": entities, "merge": record})


@router.post(
    "/graph/communities",
    response={200: Envelope[CommunitiesOut], 202: Envelope[JobAcceptedOut]},
    summary="Communities of entities (label propagation), largest first; refresh starts a background job",
    description="With refresh (admin): answers 202 with a jobId instead of the list. A worker runs "
    "detection, then the summaries (up to 200 model calls); jobs/status shows the phase (detect, summarize) "
    "with done and total, then the counts. A refresh already queued or running is answered with its own "
    "jobId.",
)
@requires(READ)
def graph_communities(request: HttpRequest, payload: CommunitiesIn) -> Any:
    # Listing is a read; running detection (refresh) is upkeep.
    workspace_id = request_workspace_id(request, payload.scope, at_least=ADMIN if payload.refresh else None)
    if payload.refresh:
        with workspace_context(workspace_id):
            job = graph_jobs.graph_job_start(
                workspace_id=workspace_id,
                kind=graph_jobs.COMMUNITIES_REFRESH_KIND,
                created_by=_caller_label(request),
            )
        return _job_accepted(request, job)
    with workspace_context(workspace_id):
        data = selectors.communities_list(
            workspace_id=workspace_id, limit=payload.limit, audience=audience_for(memory_scope(payload.scope))
        )
    return success_envelope(request, data)


@router.post(
    "/graph/backfill",
    response={202: Envelope[JobAcceptedOut]},
    summary="Run LLM extraction for the memories that never had it, as a background job",
    description="Memories written before a model was configured (or whose extraction was given up) get their "
    "relationships, entities and facts, up to `limit` per job, oldest first; injection-flagged memories are "
    "never sent to the model, and the workspace's daily token budget applies. Answers 202 with a jobId: "
    "jobs/status shows done and total (phase extract), then {memories, more}. A backfill already queued or "
    "running is answered with its own jobId. 409 LLM_NOT_CONFIGURED without a model.",
)
@requires(ADMIN)
def graph_backfill(request: HttpRequest, payload: BackfillIn) -> Any:
    workspace_id = request_workspace_id(request, payload.scope)
    graph_jobs.llm_required()
    with workspace_context(workspace_id):
        job = graph_jobs.graph_job_start(
            workspace_id=workspace_id,
            kind=graph_jobs.BACKFILL_KIND,
            params={"limit": payload.limit},
            created_by=_caller_label(request),
        )
    return _job_accepted(request, job)


def _caller_label(request: HttpRequest) -> str:
    caller: SdkCaller = request.auth  # type: ignore[attr-defined]
    return f"user:{caller.user.pk}"


def _job_accepted(request: HttpRequest, job: BackgroundJob) -> Status[dict[str, Any]]:
    return Status(
        202, success_envelope(request, {"jobId": str(job.id), "job": job_selectors.job_payload(job)})
    )


@router.post(
    "/graph/stats",
    response=Envelope[StatsOut],
    summary="Entity graph counts: entities by type, current/invalidated/decayed facts, last eviction",
)
@requires(READ)
def graph_stats(request: HttpRequest, payload: ScopedIn) -> dict[str, Any]:
    workspace_id = request_workspace_id(request, payload.scope)
    with workspace_context(workspace_id):
        data = selectors.entity_graph_stats(
            workspace_id=workspace_id, audience=audience_for(memory_scope(payload.scope))
        )
    return success_envelope(request, data)


@router.post(
    "/graph/clear",
    response=Envelope[ClearOut],
    summary='Delete the workspace\'s entity graph; needs confirm = "delete entity graph"',
    description="Entities, aliases, facts and communities go; memories and their mapping graph stay.",
)
@requires(ADMIN)
def graph_clear(request: HttpRequest, payload: ClearIn) -> dict[str, Any]:
    if payload.confirm != CLEAR_CONFIRMATION:
        raise ApiError(
            400,
            "CONFIRMATION_REQUIRED",
            f'Clearing the entity graph cannot be undone: send confirm = "{CLEAR_CONFIRMATION}".',
        )
    workspace_id = request_workspace_id(request, payload.scope)
    with workspace_context(workspace_id):
        data = upkeep.graph_clear(workspace_id=workspace_id)
    return success_envelope(request, data)


@router.post(
    "/graph/decay",
    response=Envelope[DecayOut],
    summary="Confidence decay: recompute now (decays retrieval counts) or set the rate of an edge type",
)
@requires(ADMIN)
def graph_decay(request: HttpRequest, payload: DecayIn) -> dict[str, Any]:
    workspace_id = request_workspace_id(request, payload.scope)
    decayed = 0
    with workspace_context(workspace_id):
        if payload.action == "set_rate":
            if payload.edgeType is None and payload.rate is None:
                raise ApiError(
                    400,
                    "INVALID_REQUEST",
                    "set_rate needs rate (per day, 0-10), and edgeType for one relation's rate.",
                )
            rates = selectors.graph_settings_get(workspace_id=workspace_id)["decayRates"]
            if payload.edgeType and payload.edgeType not in rates and len(rates) >= MAX_RELATION_RATES:
                raise ApiError(
                    400,
                    "TOO_MANY_DECAY_RATES",
                    f"At most {MAX_RELATION_RATES} relations may have their "
                    "own rate; remove one (rate null) first.",
                )
            services.relation_decay_set(
                workspace_id=workspace_id, edge_type=payload.edgeType, rate=payload.rate
            )
        else:
            decayed = upkeep.retrieval_counts_decay(workspace_id=workspace_id)
        data = {**upkeep.decay_summary(workspace_id=workspace_id), "retrievalCountsDecayed": decayed}
    return success_envelope(request, data)


@router.get(
    "/graph/settings",
    response=Envelope[GraphSettingsOut],
    summary="Graph reasoning settings: default recall strategy, decay rates, entity cap",
)
@requires(READ)
def graph_settings_get(request: HttpRequest, query: Query[ExtractionQuery]) -> dict[str, Any]:
    workspace_id = request_workspace_id(request, query.scope())
    with workspace_context(workspace_id):
        data = selectors.graph_settings_get(workspace_id=workspace_id)
    return success_envelope(request, data)


@router.patch(
    "/graph/settings",
    response=Envelope[GraphSettingsOut],
    summary="Change graph reasoning settings (only the fields sent)",
)
@requires(ADMIN)
def graph_settings_patch(request: HttpRequest, payload: GraphSettingsIn) -> dict[str, Any]:
    workspace_id = request_workspace_id(request, payload.scope)
    changes = {
        "recall_strategy": payload.recallStrategy,
        "decay_rate": payload.decayRate,
        "max_entities": payload.maxEntities,
    }
    with workspace_context(workspace_id):
        services.graph_reasoning_settings_update(
            workspace_id=workspace_id,
            changes={k: v for k, v in changes.items() if k in payload.model_fields_set or v is not None},
        )
        data = selectors.graph_settings_get(workspace_id=workspace_id)
    return success_envelope(request, data)

"""SDK routes memories/*: thin handlers — resolve the workspace, open its RLS transaction, call a service."""

from __future__ import annotations

import functools
import re
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from ninja import Query, Router, Status
from pydantic import TypeAdapter

from config.errors import ApiError, envelope_response, envelope_response_spliced, success_envelope
from config.schemas import Envelope, ScopeIn
from memories import context, pipeline, search, selectors, services
from memories.schemas import (
    AddIn,
    AddOut,
    BulkForgetIn,
    BulkForgetOut,
    ConsolidateIn,
    ConsolidateOut,
    ContextIn,
    ContextMemoryOut,
    ContextOut,
    EditIn,
    EditOut,
    ForgetIn,
    ForgetOut,
    ListIn,
    ListOut,
    MemorySettingsOut,
    MemorySettingsPatchIn,
    MemorySettingsQuery,
    SearchIn,
    SearchOut,
    TraceIn,
    TraceOut,
    VacuumIn,
    VacuumOut,
)
from memories.selectors import MemoryScope
from tenancy.auth import SdkCaller, SdkKeyAuth
from tenancy.rls import workspace_context
from tenancy.services import caller_workspace_id

router = Router(tags=["memories"], auth=SdkKeyAuth())

_IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")


def resolve_scope(
    request: HttpRequest, scope: ScopeIn, *, include_superseded: bool = False
) -> tuple[int, MemoryScope]:
    caller: SdkCaller = request.auth  # type: ignore[attr-defined]
    workspace_id = caller_workspace_id(
        user=caller.user,
        routing_mode=caller.routing_mode,
        active_org_id=caller.active_org_id,
        personal_workspace_id=caller.personal_workspace_id,
        tenant_id=scope.tenantId,
        project_id=scope.projectId,
    )
    request.cairn_workspace_id = workspace_id  # type: ignore[attr-defined]  # for the request log line
    return workspace_id, MemoryScope(
        user_id=scope.userId, project_id=scope.projectId, include_superseded=include_superseded
    )


def embedding_model_choice(requested: str | None) -> dict[str, str]:
    if requested:
        return {"embeddingModel": requested, "embeddingModelSource": "request"}
    return {"embeddingModel": settings.EMBEDDING_MODEL, "embeddingModelSource": "workspace_default"}


def _idempotency_key(request: HttpRequest) -> str | None:
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return None
    if not _IDEMPOTENCY_KEY.match(key):
        raise ApiError(
            400,
            "IDEMPOTENCY_KEY_INVALID",
            "Idempotency-Key must be 1–255 visible ASCII characters (a UUID works).",
        )
    return key


@router.post(
    "/memories/add",
    response={201: Envelope[AddOut], 200: Envelope[AddOut]},
    summary="Store a memory",
    description="Stores a memory and answers 201 at once. Send an Idempotency-Key header to make retries safe: the "
    "same key and body within 24 h replays the first answer (200, header Idempotent-Replayed: true); the same key "
    "with another body is 422 IDEMPOTENCY_KEY_REUSED. With admission control on (memories/settings) a memory that "
    "nearly repeats an existing one is not written: the answer is 200 with admitted false, the existing memory's "
    "id and the decision (reason NEAR_DUPLICATE or LOW_SCORE, score).",
)
def memories_add(request: HttpRequest, response: HttpResponse, payload: AddIn) -> Status[dict[str, Any]]:
    key = _idempotency_key(request)
    workspace_id, scope = resolve_scope(request, payload.scope)
    caller: SdkCaller = request.auth  # type: ignore[attr-defined]
    with workspace_context(workspace_id):
        claim = None
        if key is not None:
            claim = services.idempotency_claim(
                workspace_id=workspace_id,
                user_id=caller.user.pk,
                key=key,
                request_hash=services.request_fingerprint(payload.model_dump(mode="json")),
            )
            if claim.record_id is None:
                response["Idempotent-Replayed"] = "true"
                return Status(200, success_envelope(request, claim.replay_data))
        outcome = pipeline.memory_add_admitted_flow(
            workspace_id=workspace_id,
            scope=scope,
            content=payload.content,
            type=payload.type,
            layer=payload.layer,
            tags=payload.tags,
            paths=payload.paths,
            category=payload.category,
            metadata=payload.metadata,
            embedding_model=payload.embeddingModel,
        )
        status, data = add_outcome_data(workspace_id=workspace_id, outcome=outcome)
        if claim is not None and claim.record_id is not None:
            services.idempotency_complete(record_id=claim.record_id, status=status, data=data)
    return Status(status, success_envelope(request, data))


def add_outcome_data(*, workspace_id: int, outcome: pipeline.AddOutcome) -> tuple[int, dict[str, Any]]:
    """HTTP status and AddOut data of an add: 201 stored, or 200 with the existing memory admission kept instead
    (shared by the SDK API and the MCP tool)."""
    memory = outcome.memory
    if outcome.admitted:
        message, status = "Memory stored.", 201
        memory_out = selectors.memory_payload(memory, pipeline=selectors.just_queued_pipeline())
    else:
        reason = outcome.admission.reason if outcome.admission else "NOT_ADMITTED"
        message, status = f"Not stored ({reason}): memory {memory.id} already says this.", 200
        memory_out = selectors.memory_payloads(workspace_id=workspace_id, memories=[memory])[0]
    data = AddOut.model_validate(
        {
            "id": str(memory.id),
            "message": message,
            "memory": memory_out,
            "admitted": outcome.admitted,
            "admission": outcome.admission.payload() if outcome.admission else None,
            **embedding_model_choice(memory.embedding_model),
        }
    ).model_dump(mode="json")
    return status, data


@router.post("/memories/search", response=Envelope[SearchOut], summary="Search memories")
def memories_search(request: HttpRequest, payload: SearchIn) -> dict[str, Any]:
    workspace_id, scope = resolve_scope(request, payload.scope, include_superseded=payload.includeSuperseded)
    with workspace_context(workspace_id):
        weight = payload.importanceWeight
        if weight is None:
            weight = selectors.memory_settings_get(workspace_id=workspace_id).importance_weight
        outcome = search.memory_search(
            workspace_id=workspace_id,
            scope=scope,
            query=payload.query,
            type=payload.type,
            layer=payload.layer,
            limit=payload.limit,
            strategy=payload.strategy,
            importance_weight=weight,
        )
        memories = selectors.memory_payloads(workspace_id=workspace_id, memories=outcome.memories)
    return success_envelope(request, {"memories": memories, "count": len(memories), "trace": outcome.trace()})


@router.post(
    "/memories/list", response=Envelope[ListOut], summary="List memories, newest first, with cursors"
)
def memories_list(request: HttpRequest, payload: ListIn) -> dict[str, Any]:
    workspace_id, scope = resolve_scope(request, payload.scope, include_superseded=payload.includeSuperseded)
    with workspace_context(workspace_id):
        rows, next_cursor = selectors.memory_list(
            workspace_id=workspace_id,
            scope=scope,
            type=payload.type,
            layer=payload.layer,
            tag_substring=payload.tags,
            limit=payload.limit,
            cursor=payload.cursor,
        )
        memories = selectors.memory_payloads(workspace_id=workspace_id, memories=rows)
    return success_envelope(
        request, {"memories": memories, "count": len(memories), "nextCursor": next_cursor}
    )


_EDIT_FIELDS = {
    "content": "content",
    "type": "type",
    "layer": "layer",
    "tags": "tags",
    "paths": "paths",
    "category": "category",
    "metadata": "metadata",
    "embeddingModel": "embedding_model",
}


@router.post("/memories/edit", response=Envelope[EditOut], summary="Change a memory")
def memories_edit(request: HttpRequest, payload: EditIn) -> dict[str, Any]:
    workspace_id, scope = resolve_scope(request, payload.scope)
    changes = {
        field: getattr(payload, name)
        for name, field in _EDIT_FIELDS.items()
        if name in payload.model_fields_set and (getattr(payload, name) is not None or name == "metadata")
    }
    with workspace_context(workspace_id):
        memory = pipeline.memory_edit_flow(
            workspace_id=workspace_id, scope=scope, memory_id=payload.id, changes=changes
        )
        payload_out = selectors.memory_payloads(workspace_id=workspace_id, memories=[memory])[0]
    return success_envelope(
        request,
        {
            "id": str(memory.id),
            "updated": True,
            "message": "Memory updated.",
            "memory": payload_out,
            **embedding_model_choice(memory.embedding_model),
        },
    )


@router.post("/memories/forget", response=Envelope[ForgetOut], summary="Forget (soft-delete) a memory")
def memories_forget(request: HttpRequest, payload: ForgetIn) -> dict[str, Any]:
    workspace_id, scope = resolve_scope(request, payload.scope)
    with workspace_context(workspace_id):
        memory = pipeline.memory_forget_flow(workspace_id=workspace_id, scope=scope, memory_id=payload.id)
    return success_envelope(request, {"id": str(memory.id), "deleted": True, "message": "Memory forgotten."})


@router.post(
    "/memories/bulk-forget",
    response=Envelope[BulkForgetOut],
    summary="Forget many memories by filter",
    description="Soft-deletes in batches of 500, at most 10,000 per call (hasMore tells you to call again). "
    "dryRun counts and previews up to 1000 without deleting.",
)
def memories_bulk_forget(request: HttpRequest, payload: BulkForgetIn) -> dict[str, Any]:
    workspace_id, scope = resolve_scope(request, payload.scope)
    filters = services.BulkFilters(
        types=payload.filters.types,
        tags=payload.filters.tags,
        older_than_days=payload.filters.olderThanDays,
        pattern=payload.filters.pattern,
        project_id=payload.filters.projectId,
        all=bool(payload.filters.all),
    )
    with workspace_context(workspace_id):
        result = pipeline.memory_bulk_forget_flow(
            workspace_id=workspace_id, scope=scope, filters=filters, dry_run=payload.dryRun
        )
    return success_envelope(request, result)


@router.post(
    "/memories/vacuum",
    response=Envelope[VacuumOut],
    summary="Delete forgotten memories for good",
    description="Hard-deletes soft-deleted memories in the caller's write scope, at most 10,000 per call.",
)
def memories_vacuum(request: HttpRequest, payload: VacuumIn) -> dict[str, Any]:
    workspace_id, scope = resolve_scope(request, payload.scope)
    with workspace_context(workspace_id):
        purged = pipeline.memory_vacuum_flow(workspace_id=workspace_id, scope=scope)
    return success_envelope(request, {"purged": purged, "message": f"Purged {purged} forgotten memories."})


@router.post(
    "/memories/consolidate",
    response=Envelope[ConsolidateOut],
    summary="Supersede older memories that say the same thing as a newer one",
    description="Groups the caller's writable memories by (scope, project, user, type, upsert key) — the upsert key "
    "is the category, else the first line's prefix before a colon, else its first six words, normalised — and "
    "marks all but the newest of each group superseded_by it, with a supersedes edge in the graph. Superseded "
    "memories stay stored but leave search, list and context unless includeSuperseded is true. dryRun reports "
    "without changing anything. At most MEMORY_CONSOLIDATION_MAX_INPUT (5000) newest memories per call.",
)
def memories_consolidate(request: HttpRequest, payload: ConsolidateIn) -> dict[str, Any]:
    if not settings.MEMORY_CONSOLIDATION_ENABLED:
        raise ApiError(
            403,
            "CONSOLIDATION_DISABLED",
            "memories/consolidate is turned off on this server (MEMORY_CONSOLIDATION_ENABLED).",
        )
    if payload.globalOnly and not payload.includeGlobal:
        raise ApiError(400, "INVALID_REQUEST", "globalOnly needs includeGlobal; drop includeGlobal: false.")
    workspace_id, scope = resolve_scope(request, payload.scope)
    with workspace_context(workspace_id):
        result = pipeline.memory_consolidate_flow(
            workspace_id=workspace_id,
            scope=scope,
            types=payload.types,
            include_global=payload.includeGlobal,
            global_only=payload.globalOnly,
            dry_run=payload.dryRun,
            model=payload.model,
        )
    run = result.run
    verb = "would be" if payload.dryRun else "were"
    return success_envelope(
        request,
        {
            "runId": str(run.id) if run else None,
            "dryRun": payload.dryRun,
            "message": f"{len(result.superseded)} memories {verb} superseded in {len(result.winners)} groups.",
            "run": {
                "id": str(run.id) if run else None,
                "scope": "project" if scope.project_id and not payload.globalOnly else "global",
                "projectId": scope.project_id,
                "userId": scope.user_id,
                "inputCount": result.input_count,
                "mergedCount": len(result.winners),
                "supersededCount": len(result.superseded),
                "conflictedCount": result.conflicted_count,
                "model": payload.model,
                "createdAt": run.created_at if run else timezone.now(),
                "metadata": run.metadata
                if run
                else {
                    "types": payload.types,
                    "includeGlobal": payload.includeGlobal,
                    "globalOnly": payload.globalOnly,
                },
            },
            "winnerMemoryIds": [str(m) for m in result.winners],
            "supersededMemoryIds": [str(loser) for _, loser in result.superseded],
        },
    )


@router.get(
    "/memories/settings",
    response=Envelope[MemorySettingsOut],
    summary="The workspace's memory hygiene settings (credential scrubbing, admission, importance)",
)
def memories_settings_get(request: HttpRequest, query: Query[MemorySettingsQuery]) -> dict[str, Any]:
    workspace_id, _ = resolve_scope(request, query.scope())
    with workspace_context(workspace_id):
        data = selectors.memory_settings_payload(workspace_id=workspace_id)
    return success_envelope(request, data)


_SETTINGS_FIELDS = {
    "redactCredentials": "redact_credentials",
    "scrubAtRest": "scrub_at_rest",
    "admissionEnabled": "admission_enabled",
    "admissionThreshold": "admission_threshold",
    "importanceWeight": "importance_weight",
}
_NULLABLE_SETTINGS = {"admissionThreshold", "importanceWeight"}


@router.patch(
    "/memories/settings",
    response=Envelope[MemorySettingsOut],
    summary="Change the workspace's memory hygiene settings (only the fields sent)",
    description="redactCredentials, scrubAtRest and admissionEnabled are true/false; admissionThreshold "
    "and importanceWeight are 0–1, or null to go back to the server default.",
)
def memories_settings_patch(request: HttpRequest, payload: MemorySettingsPatchIn) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    for name, field in _SETTINGS_FIELDS.items():
        if name not in payload.model_fields_set:
            continue
        value = getattr(payload, name)
        if value is None and name not in _NULLABLE_SETTINGS:
            raise ApiError(
                400,
                "INVALID_REQUEST",
                f"{name} must be true or false, not null.",
                details={"issues": [{"field": name, "message": "must be true or false"}]},
            )
        changes[field] = value
    if not changes:
        raise ApiError(
            400,
            "INVALID_REQUEST",
            "Nothing to change: send at least one of " + ", ".join(_SETTINGS_FIELDS) + ".",
        )
    workspace_id, _ = resolve_scope(request, payload.scope)
    with workspace_context(workspace_id):
        services.memory_settings_update(workspace_id=workspace_id, changes=changes)
        data = selectors.memory_settings_payload(workspace_id=workspace_id)
    return success_envelope(request, data)


_CONTEXT_ALIASES = {"baseline": "lexical", "hybrid_graph": "hybrid"}


def _context_request(payload: ContextIn, *, endpoint: str) -> context.ContextRequest:
    strategy = _CONTEXT_ALIASES.get(payload.strategy, payload.strategy) if payload.strategy else None
    return context.ContextRequest(
        query=payload.query,
        limit=payload.limit,
        include_rules=payload.includeRules,
        mode=payload.mode,
        strategy=strategy,
        graph_depth=payload.graphDepth,
        graph_limit=payload.graphLimit,
        half_life_days=payload.halfLifeDays,
        mmr_lambda=payload.mmrLambda,
        importance_weight=payload.importanceWeight,
        include_superseded=payload.includeSuperseded,
        endpoint=endpoint,
    )


@router.post(
    "/context/get",
    response=Envelope[ContextOut],
    tags=["context"],
    summary="The memories (and rules, conflicts) to put in front of the next model call",
    description="Rules, then working and long-term tiers ranked by the strategy; with hybrid and the workspace's "
    "rollout in canary, graph expansion appends memories reached through the graph, each with its provenance in "
    "`graph`. Every call records one retrieval metric for the rollout quality gate.",
)
def context_get(request: HttpRequest, payload: ContextIn) -> HttpResponse:
    workspace_id, scope = resolve_scope(request, payload.scope)
    with workspace_context(workspace_id):
        data = context.context_get(
            workspace_id=workspace_id, scope=scope, request=_context_request(payload, endpoint="context/get")
        )
    data.pop("_graph_ids")
    data.pop("_tiers")
    rules: context.Rules = data.pop("_rules")
    if rules.rendered is None:
        adapter = _rules_adapter()
        rules.rendered = adapter.dump_json(adapter.validate_python(rules.payloads))
    return envelope_response_spliced(
        request, data, ContextOut, field="rules", rendered=rules.rendered, before="memories"
    )


@functools.cache
def _rules_adapter() -> TypeAdapter[list[ContextMemoryOut]]:
    return TypeAdapter(list[ContextMemoryOut])


@router.post(
    "/graph/trace",
    response=Envelope[TraceOut],
    tags=["graph"],
    summary="context/get with a per-memory account of where each result came from",
)
def graph_trace(request: HttpRequest, payload: TraceIn) -> HttpResponse:
    workspace_id, scope = resolve_scope(request, payload.scope)
    with workspace_context(workspace_id):
        data = context.context_get(
            workspace_id=workspace_id, scope=scope, request=_context_request(payload, endpoint="graph/trace")
        )
    graph_ids = {str(memory_id) for memory_id in data["_graph_ids"]}
    recall = [
        {
            "rank": rank,
            "memoryId": memory["id"],
            "layer": memory["layer"],
            "type": memory["type"],
            "scope": memory["scope"],
            "projectId": memory["projectId"],
            "source": "graph_expansion" if memory["id"] in graph_ids else "baseline",
            "graph": memory.get("graph"),
        }
        for rank, memory in enumerate(data["memories"], start=1)
    ]
    return envelope_response(
        request,
        {
            "mode": data["mode"],
            "includeRules": payload.includeRules,
            "query": data["query"],
            "strategy": {
                "requested": data["trace"]["requestedStrategy"],
                "applied": data["trace"]["strategy"],
            },
            "trace": data["trace"],
            "tiers": data["_tiers"],
            "recall": recall,
            "rules": data["rules"],
            "memories": data["memories"],
        },
        TraceOut,
    )

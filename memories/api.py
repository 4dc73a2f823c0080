"""SDK routes memories/*: thin handlers — resolve the workspace, open its RLS transaction, call a service."""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from ninja import Query, Router, Status

from config import tracing
from config.errors import ApiError, success_envelope
from config.schemas import Envelope
from memories import selectors, services, supersession
from memories.schemas import (
    AddIn,
    AddOut,
    BulkForgetIn,
    BulkForgetOut,
    ConsolidateIn,
    ConsolidateOut,
    DecisionsIn,
    DecisionsOut,
    EditIn,
    EditOut,
    ForgetIn,
    ForgetOut,
    ListIn,
    ListOut,
    MemorySettingsOut,
    MemorySettingsPatchIn,
    MemorySettingsQuery,
    ResolveIn,
    ResolveOut,
    VacuumIn,
    VacuumOut,
)
from memories.selectors import memory_scope
from pipeline import services as pipeline
from pipeline.outcomes import add_outcome_data, embedding_model_choice
from tenancy.access import request_workspace_id
from tenancy.auth import SdkCaller, SdkKeyAuth
from tenancy.policy import ADMIN, READ, WRITE, requires
from tenancy.rls import workspace_context

router = Router(tags=["memories"], auth=SdkKeyAuth())

_IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")


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
    description="Stores a memory and answers 201 at once. Send an Idempotency-Key header to make retries "
    "safe: the same key and body within 24 h replays the first answer (200, header Idempotent-Replayed: "
    "true); the same key with another body is 422 IDEMPOTENCY_KEY_REUSED. With admission control on "
    "(memories/settings) a memory that nearly repeats an existing one is not written: the answer is 200 with "
    "admitted false, the existing memory's id and the decision (reason NEAR_DUPLICATE or LOW_SCORE, score).",
)
@requires(WRITE)
def memories_add(request: HttpRequest, response: HttpResponse, payload: AddIn) -> Status[dict[str, Any]]:
    key = _idempotency_key(request)
    workspace_id = request_workspace_id(request, payload.scope)
    scope = memory_scope(payload.scope)
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
        with tracing.span("memory.add"):
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


@router.post(
    "/memories/list", response=Envelope[ListOut], summary="List memories, newest first, with cursors"
)
@requires(READ)
def memories_list(request: HttpRequest, payload: ListIn) -> dict[str, Any]:
    workspace_id = request_workspace_id(request, payload.scope)
    scope = memory_scope(payload.scope, include_superseded=payload.includeSuperseded)
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
@requires(WRITE)
def memories_edit(request: HttpRequest, payload: EditIn) -> dict[str, Any]:
    workspace_id = request_workspace_id(request, payload.scope)
    scope = memory_scope(payload.scope)
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
@requires(WRITE)
def memories_forget(request: HttpRequest, payload: ForgetIn) -> dict[str, Any]:
    workspace_id = request_workspace_id(request, payload.scope)
    scope = memory_scope(payload.scope)
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
@requires(WRITE)
def memories_bulk_forget(request: HttpRequest, payload: BulkForgetIn) -> dict[str, Any]:
    # With a userId it forgets that end user's own memories (write); without, the workspace's shared ones.
    workspace_id = request_workspace_id(
        request, payload.scope, at_least=None if payload.scope.userId else ADMIN
    )
    scope = memory_scope(payload.scope)
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
@requires(ADMIN)
def memories_vacuum(request: HttpRequest, payload: VacuumIn) -> dict[str, Any]:
    workspace_id = request_workspace_id(request, payload.scope)
    scope = memory_scope(payload.scope)
    with workspace_context(workspace_id):
        purged = pipeline.memory_vacuum_flow(workspace_id=workspace_id, scope=scope)
    return success_envelope(request, {"purged": purged, "message": f"Purged {purged} forgotten memories."})


@router.post(
    "/memories/consolidate",
    response=Envelope[ConsolidateOut],
    summary="Supersede older memories that say the same thing as a newer one",
    description="Groups the caller's writable memories by (scope, project, user, type, upsert key) — the "
    "upsert key is the category, else the first line's prefix before a colon, else its first six words, "
    "normalised — and marks all but the newest of each group superseded_by it, with a supersedes edge in the "
    "graph. Superseded memories stay stored but leave search, list and context unless includeSuperseded is "
    "true. dryRun reports without changing anything. At most MEMORY_CONSOLIDATION_MAX_INPUT (5000) newest "
    "memories per call.",
)
@requires(WRITE)
def memories_consolidate(request: HttpRequest, payload: ConsolidateIn) -> dict[str, Any]:
    if not settings.MEMORY_CONSOLIDATION_ENABLED:
        raise ApiError(
            403,
            "CONSOLIDATION_DISABLED",
            "memories/consolidate is turned off on this server (MEMORY_CONSOLIDATION_ENABLED).",
        )
    if payload.globalOnly and not payload.includeGlobal:
        raise ApiError(400, "INVALID_REQUEST", "globalOnly needs includeGlobal; drop includeGlobal: false.")
    workspace_id = request_workspace_id(
        request, payload.scope, at_least=None if payload.scope.userId else ADMIN
    )
    scope = memory_scope(payload.scope)
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
            "message": (
                f"{len(result.superseded)} memories {verb} superseded in {len(result.winners)} groups."
            ),
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
    summary="The workspace's memory hygiene and ranking settings (credential scrubbing, admission, "
    "importance, temporal decay, diversity)",
)
@requires(READ)
def memories_settings_get(request: HttpRequest, query: Query[MemorySettingsQuery]) -> dict[str, Any]:
    workspace_id = request_workspace_id(request, query.scope())
    with workspace_context(workspace_id):
        data = selectors.memory_settings_payload(workspace_id=workspace_id)
    return success_envelope(request, data)


_SETTINGS_FIELDS = {
    "redactCredentials": "redact_credentials",
    "scrubAtRest": "scrub_at_rest",
    "admissionEnabled": "admission_enabled",
    "admissionThreshold": "admission_threshold",
    "importanceWeight": "importance_weight",
    "halfLifeDays": "half_life_days",
    "mmrLambda": "mmr_lambda",
    "sessionsEnabled": "sessions_enabled",
    "proceduralEnabled": "procedural_enabled",
}
_NULLABLE_SETTINGS = {
    "admissionThreshold",
    "importanceWeight",
    "halfLifeDays",
    "mmrLambda",
    "sessionsEnabled",
    "proceduralEnabled",
}


@router.patch(
    "/memories/settings",
    response=Envelope[MemorySettingsOut],
    summary="Change the workspace's memory hygiene settings (only the fields sent)",
    description="redactCredentials, scrubAtRest and admissionEnabled are true/false; admissionThreshold, "
    "importanceWeight and mmrLambda are 0–1 and halfLifeDays 0–3650, or null to go back to the server "
    "default. halfLifeDays 0 turns temporal decay off; mmrLambda 1 turns MMR diversity off. sessionsEnabled "
    "and proceduralEnabled switch sessions/* and skills/files/promote on or off (null: the server default).",
)
@requires(ADMIN)
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
    workspace_id = request_workspace_id(request, payload.scope)
    with workspace_context(workspace_id):
        services.memory_settings_update(workspace_id=workspace_id, changes=changes)
        data = selectors.memory_settings_payload(workspace_id=workspace_id)
    return success_envelope(request, data)


@router.post(
    "/memories/resolve",
    response=Envelope[ResolveOut],
    summary="Decide which of two memories is current (or that both stand), or undo such a decision",
    description="Records who decided and when; the previous decision on the pair is reverted, not lost. "
    "supersedes marks otherMemoryId superseded by memoryId (it leaves search and context/get unless "
    "includeSuperseded) and ends the facts it alone supported that the current memory restates; "
    "not_conflict and revert undo that. Both memories must be the caller's to write (404 otherwise).",
)
@requires(WRITE)
def memories_resolve(request: HttpRequest, payload: ResolveIn) -> dict[str, Any]:
    workspace_id = request_workspace_id(request, payload.scope)
    caller: SdkCaller = request.auth  # type: ignore[attr-defined]
    with workspace_context(workspace_id):
        resolution = supersession.memory_resolve(
            workspace_id=workspace_id,
            scope=memory_scope(payload.scope),
            memory_id=payload.memoryId,
            other_memory_id=payload.otherMemoryId,
            action=payload.action,
            actor=f"user:{caller.user.pk}",
            note=payload.note,
        )
        data = supersession.resolution_answer(workspace_id=workspace_id, resolution=resolution)
    return success_envelope(request, data)


@router.post(
    "/memories/decisions",
    response=Envelope[DecisionsOut],
    summary="The decisions about which memory is current that involve one memory, newest first",
)
@requires(READ)
def memories_decisions(request: HttpRequest, payload: DecisionsIn) -> dict[str, Any]:
    workspace_id = request_workspace_id(request, payload.scope)
    scope = memory_scope(payload.scope, include_superseded=True)
    memory_id = selectors.parse_memory_id(payload.memoryId)
    with workspace_context(workspace_id):
        found = (
            selectors.memories_readable(workspace_id=workspace_id, scope=scope).filter(pk=memory_id).exists()
            if memory_id
            else False
        )
        if not found or memory_id is None:
            raise services.memory_not_found(payload.memoryId)
        decisions = selectors.supersession_decisions(
            workspace_id=workspace_id,
            memory_id=memory_id,
            include_reverted=payload.includeReverted,
            limit=payload.limit,
        )
    return success_envelope(request, {"decisions": [selectors.decision_payload(d) for d in decisions]})

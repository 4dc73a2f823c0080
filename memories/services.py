"""Writes on memories. Callers run inside tenancy.rls.workspace_context (one transaction, RLS set)."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connections, transaction
from django.db.models import Q
from django.utils import timezone

from config.errors import ApiError
from memories import hygiene, selectors
from memories.models import ConsolidationRun, IdempotencyRecord, Memory, MemorySettings
from memories.sanitizer import DETECTOR_VERSION, memory_injection_flags
from memories.scrubber import scrub_secrets
from memories.selectors import MemoryScope, like_escape, writable_q

BULK_BATCH_SIZE = 500
BULK_FORGET_MAX_PER_CALL = 10_000
BULK_DRY_RUN_PREVIEW_LIMIT = 1000
VACUUM_MAX_PER_CALL = 10_000


def default_layer(memory_type: str) -> str:
    return Memory.Layer.RULE if memory_type == Memory.Type.RULE else Memory.Layer.LONG_TERM


def working_expiry() -> Any:
    return timezone.now() + timedelta(hours=settings.WORKING_MEMORY_TTL_HOURS)


def memory_add(
    *,
    workspace_id: int,
    scope: MemoryScope,
    content: str,
    type: str = Memory.Type.NOTE,
    layer: str | None = None,
    tags: list[str] | None = None,
    paths: list[str] | None = None,
    category: str | None = None,
    metadata: dict[str, Any] | None = None,
    embedding_model: str | None = None,
    importance: float | None = None,
    scrub_at_rest: bool = False,
) -> Memory:
    """`importance` None: Zeph's write-time heuristic. `scrub_at_rest`: store the content with secrets
    replaced."""
    now = timezone.now()
    layer = layer or default_layer(type)
    if scrub_at_rest:
        content = scrub_secrets(content)
    if importance is None:
        importance = hygiene.importance_score(
            content=content, memory_type=type, role=hygiene.memory_role(metadata)
        )
    memory = Memory.objects.create(
        workspace_id=workspace_id,
        content=content,
        type=type,
        layer=layer,
        scope=Memory.Scope.PROJECT if scope.project_id else Memory.Scope.GLOBAL,
        project_id=scope.project_id,
        user_id=scope.user_id,
        tags=_dedupe(tags or []),
        paths=_dedupe(paths or []),
        category=category,
        metadata=metadata,
        embedding_model=embedding_model,
        expires_at=working_expiry() if layer == Memory.Layer.WORKING else None,
        injection_flags=memory_injection_flags(
            content=content, tags=tags, paths=paths, category=category, metadata=metadata
        ),
        injection_scan_version=DETECTOR_VERSION,
        importance=importance,
        created_at=now,
        updated_at=now,
    )
    return memory


def working_memory_compact(*, workspace_id: int, user_id: str | None) -> list[uuid.UUID]:
    """Forget a user's expired working memories and all but the newest N
    (WORKING_MEMORY_MAX_ITEMS_PER_USER)."""
    now = timezone.now()
    user_rule = "user_id = %s" if user_id else "user_id IS NULL"
    params: list[Any] = [
        now,
        workspace_id,
        *([user_id] if user_id else []),
        now,
        settings.WORKING_MEMORY_MAX_ITEMS_PER_USER,
    ]
    sql = f"""
        UPDATE memories SET deleted_at = %s
        WHERE id IN (
            SELECT id FROM (
                SELECT id, expires_at, row_number() OVER (ORDER BY created_at DESC, id DESC) AS position
                FROM memories
                WHERE workspace_id = %s AND {user_rule} AND layer = 'working' AND deleted_at IS NULL
            ) ranked
            WHERE ranked.expires_at <= %s OR ranked.position > %s
        )
        RETURNING id
    """
    with connections["app"].cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


def _dedupe(values: list[str]) -> list[str]:
    return list(dict.fromkeys(values))


_EDITABLE = ("content", "type", "layer", "tags", "paths", "category", "metadata", "embedding_model")


def memory_edit(
    *,
    workspace_id: int,
    scope: MemoryScope,
    memory_id: str,
    changes: dict[str, Any],
    scrub_at_rest: bool = False,
) -> Memory:
    """Apply the fields present in `changes`: a field sent replaces the stored one (metadata null clears
    it)."""
    unknown = set(changes) - set(_EDITABLE)
    if unknown:
        raise ValueError(f"not editable: {sorted(unknown)}")
    if not changes:
        raise ApiError(
            400,
            "INVALID_REQUEST",
            "Nothing to change: send at least one of content, type, layer, tags, paths, "
            "category, metadata or embeddingModel.",
        )
    memory = selectors.memory_get_writable(workspace_id=workspace_id, scope=scope, memory_id=memory_id)
    if memory is None:
        raise memory_not_found(memory_id)
    for field in ("content", "type", "tags", "paths", "category", "metadata", "embedding_model"):
        if field in changes:
            value = changes[field]
            if field in ("tags", "paths"):
                value = _dedupe(value or [])
            setattr(memory, field, value)
    if "layer" in changes and changes["layer"] is not None:
        memory.layer = changes["layer"]
    elif changes.get("type") == Memory.Type.RULE:
        memory.layer = Memory.Layer.RULE
    if "layer" in changes or changes.get("type") == Memory.Type.RULE:
        memory.expires_at = working_expiry() if memory.layer == Memory.Layer.WORKING else None
    if "content" in changes and scrub_at_rest:
        memory.content = scrub_secrets(memory.content)
    if changes.keys() & {"content", "tags", "paths", "category", "metadata"}:
        memory.injection_flags = memory_injection_flags(
            content=memory.content,
            tags=memory.tags,
            paths=memory.paths,
            category=memory.category,
            metadata=memory.metadata,
        )
        memory.injection_scan_version = DETECTOR_VERSION
    if "content" in changes or "type" in changes or "metadata" in changes:
        memory.importance = hygiene.importance_score(
            content=memory.content, memory_type=memory.type, role=hygiene.memory_role(memory.metadata)
        )
    memory.updated_at = timezone.now()
    memory.save()
    return memory


def memory_not_found(memory_id: str) -> ApiError:
    return ApiError(
        404, "MEMORY_NOT_FOUND", f"No memory {memory_id!r} in this scope.", details={"id": memory_id}
    )


def memory_forget(*, workspace_id: int, scope: MemoryScope, memory_id: str) -> Memory:
    memory = selectors.memory_get_writable(workspace_id=workspace_id, scope=scope, memory_id=memory_id)
    if memory is None:
        raise memory_not_found(memory_id)
    memory.deleted_at = timezone.now()
    memory.save(update_fields=["deleted_at"])
    return memory


# --- bulk forget and vacuum ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class BulkFilters:
    types: Sequence[str] | None = None
    tags: list[str] | None = None
    older_than_days: int | None = None
    pattern: str | None = None
    project_id: str | None = None
    all: bool = False


def bulk_filters_q(filters: BulkFilters) -> Q:
    narrowing = [filters.types, filters.tags, filters.older_than_days, filters.pattern]
    has_narrowing = any(value not in (None, []) for value in narrowing)
    if filters.all and (has_narrowing or filters.project_id):
        raise ApiError(
            400, "BULK_FORGET_INVALID_FILTERS", "filters.all must be the only filter; drop the others or all."
        )
    if not filters.all and not has_narrowing:
        raise ApiError(
            400,
            "BULK_FORGET_NO_FILTERS",
            "Give at least one of filters.types, tags, olderThanDays or pattern, or all: true alone "
            "(projectId alone is not enough).",
        )
    q = Q()
    if filters.types:
        q &= Q(type__in=filters.types)
    if filters.tags:
        q &= Q(tags__overlap=filters.tags)
    if filters.older_than_days:
        q &= Q(created_at__lt=timezone.now() - timedelta(days=filters.older_than_days))
    if filters.pattern:
        q &= Q(content__like=glob_to_like(filters.pattern))
    if filters.project_id:
        q &= Q(project_id=filters.project_id)
    return q


def glob_to_like(pattern: str) -> str:
    """`*` → any text (a run of stars is one), `?` → one character, everything else literal; matched against
    the whole content as a LIKE pattern (memories.lookups), whose cost is linear in the pattern's length."""
    parts: list[str] = []
    for char in pattern:
        if char == "*":
            if not parts or parts[-1] != "%":
                parts.append("%")
        elif char == "?":
            parts.append("_")
        else:
            parts.append(like_escape(char))
    return "".join(parts)


def memory_bulk_forget(
    *, workspace_id: int, scope: MemoryScope, filters: BulkFilters, dry_run: bool
) -> dict[str, Any]:
    matching = Memory.objects.filter(
        selectors.writable_q(scope),
        bulk_filters_q(filters),
        workspace_id=workspace_id,
        deleted_at__isnull=True,
    )
    if dry_run:
        total = matching.count()
        preview = matching.order_by("-created_at", "-id").values("id", "type", "content")[
            :BULK_DRY_RUN_PREVIEW_LIMIT
        ]
        return {
            "count": total,
            "memories": [
                {"id": str(row["id"]), "type": row["type"], "contentPreview": row["content"][:80]}
                for row in preview
            ],
            "message": f"{total} memories would be forgotten.",
        }
    forgotten: list[str] = []
    now = timezone.now()
    while len(forgotten) < BULK_FORGET_MAX_PER_CALL:
        batch = list(matching.order_by("created_at", "id").values_list("id", flat=True)[:BULK_BATCH_SIZE])
        if not batch:
            break
        Memory.objects.filter(workspace_id=workspace_id, pk__in=batch).update(deleted_at=now)
        forgotten.extend(str(memory_id) for memory_id in batch)
    has_more = len(forgotten) >= BULK_FORGET_MAX_PER_CALL and matching.exists()
    message = f"Forgot {len(forgotten)} memories."
    if has_more:
        message += f" More match; call again (at most {BULK_FORGET_MAX_PER_CALL} per call)."
    return {"count": len(forgotten), "ids": forgotten, "hasMore": has_more, "message": message}


def memory_vacuum(
    *, workspace_id: int, scope: MemoryScope, before_delete: Callable[[list[uuid.UUID]], None] | None = None
) -> int:
    """Delete forgotten memories for good, in batches, within the caller's write scope."""
    purged = 0
    forgotten = Memory.objects.filter(
        selectors.writable_q(scope), workspace_id=workspace_id, deleted_at__isnull=False
    )
    while purged < VACUUM_MAX_PER_CALL:
        batch = list(forgotten.values_list("id", flat=True)[:BULK_BATCH_SIZE])
        if not batch:
            break
        if before_delete is not None:
            before_delete(batch)
        Memory.objects.filter(workspace_id=workspace_id, pk__in=batch).delete()
        purged += len(batch)
    return purged


# --- idempotency --------------------------------------------------------------------------------------------


def request_fingerprint(body: Any) -> str:
    return hashlib.sha256(
        json.dumps(body, sort_keys=True, separators=(",", ":"), default=str).encode()
    ).hexdigest()


@dataclass(frozen=True)
class IdempotencyClaim:
    record_id: int | None
    replay_status: int | None = None
    replay_data: Any = None


_CLAIM_SQL = """
INSERT INTO idempotency_records (workspace_id, user_id, key, request_hash, created_at, expires_at)
VALUES (%s, %s, %s, %s, now(), now() + make_interval(hours => %s))
ON CONFLICT (workspace_id, user_id, key) DO UPDATE
    SET request_hash = EXCLUDED.request_hash, created_at = EXCLUDED.created_at,
        expires_at = EXCLUDED.expires_at, response_status = NULL, response_data = NULL
    WHERE idempotency_records.expires_at <= now()
RETURNING id
"""


def idempotency_claim(*, workspace_id: int, user_id: int, key: str, request_hash: str) -> IdempotencyClaim:
    """Claim `key` for this request, or return the first response to replay.

    The claim is an insert in the caller's transaction: a concurrent request with the same key waits on the
    unique index until the first commits, then finds its stored response instead of writing a duplicate.
    """
    with connections["app"].cursor() as cursor:
        cursor.execute(_CLAIM_SQL, [workspace_id, user_id, key, request_hash, settings.IDEMPOTENCY_TTL_HOURS])
        row = cursor.fetchone()
    if row is not None:
        return IdempotencyClaim(record_id=row[0])
    record = IdempotencyRecord.objects.get(workspace_id=workspace_id, user_id=user_id, key=key)
    if record.request_hash != request_hash:
        raise ApiError(
            422,
            "IDEMPOTENCY_KEY_REUSED",
            "This Idempotency-Key was already used with a different request body in the last "
            f"{settings.IDEMPOTENCY_TTL_HOURS} h. Use a new key for a new request.",
            details={"idempotencyKey": key},
        )
    return IdempotencyClaim(
        record_id=None, replay_status=record.response_status, replay_data=record.response_data
    )


def idempotency_complete(*, record_id: int, status: int, data: Any) -> None:
    IdempotencyRecord.objects.filter(pk=record_id).update(response_status=status, response_data=data)


# --- hygiene: settings, admission counters, consolidation ---------------------------------------------------

_SETTINGS_FIELDS = (
    "redact_credentials",
    "scrub_at_rest",
    "admission_enabled",
    "admission_threshold",
    "importance_weight",
    "half_life_days",
    "mmr_lambda",
)


def memory_settings_update(*, workspace_id: int, changes: dict[str, Any]) -> MemorySettings:
    """Apply the present fields; None for admission_threshold, importance_weight, half_life_days or
    mmr_lambda means the server default."""
    unknown = set(changes) - set(_SETTINGS_FIELDS)
    if unknown:
        raise ValueError(f"not a memory setting: {sorted(unknown)}")
    row = MemorySettings.objects.select_for_update().filter(workspace_id=workspace_id).first()
    if row is None:
        row = MemorySettings(workspace_id=workspace_id)
    for field, value in changes.items():
        setattr(row, field, value)
    row.updated_at = timezone.now()
    row.save()
    # Now, and again at commit: a request of this process reading between the two would cache the old row.
    selectors.memory_settings_forget(workspace_id=workspace_id)
    transaction.on_commit(lambda: selectors.memory_settings_forget(workspace_id=workspace_id), using="app")
    return row


def admission_count_record(*, workspace_id: int, admitted: bool, reason: str) -> None:
    with connections["app"].cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO admission_counts (workspace_id, admitted, reason, count, last_at)
            VALUES (%s, %s, %s, 1, now())
            ON CONFLICT (workspace_id, admitted, reason) DO UPDATE
                SET count = admission_counts.count + 1, last_at = now()
            """,
            [workspace_id, admitted, reason],
        )


@dataclass(frozen=True)
class ConsolidationResult:
    run: ConsolidationRun | None
    input_count: int
    winners: list[uuid.UUID]
    superseded: list[tuple[uuid.UUID, uuid.UUID]]  # (winner, loser)
    conflicted_count: int


def memory_consolidate(
    *,
    workspace_id: int,
    scope: MemoryScope,
    types: Sequence[str] | None,
    include_global: bool,
    global_only: bool,
    dry_run: bool,
    model: str | None,
) -> ConsolidationResult:
    """memories.sh consolidation: group by (scope, project, user, type, upsert key); the newest wins, the
    others get superseded_by. Works on the caller's writable memories (its own, or the shared ones without a
    userId), at most MEMORY_CONSOLIDATION_MAX_INPUT of the newest per call."""
    candidates = Memory.objects.filter(
        writable_q(scope), workspace_id=workspace_id, deleted_at__isnull=True, superseded_by__isnull=True
    ).filter(Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()))
    if global_only:
        candidates = candidates.filter(scope=Memory.Scope.GLOBAL)
    elif scope.project_id:
        projects = Q(scope=Memory.Scope.PROJECT, project_id=scope.project_id)
        if include_global:
            projects |= Q(scope=Memory.Scope.GLOBAL)
        candidates = candidates.filter(projects)
    else:
        candidates = candidates.filter(scope=Memory.Scope.GLOBAL)
    if types:
        candidates = candidates.filter(type__in=types)
    rows = list(
        candidates.order_by("-created_at", "-id").values(
            "id", "scope", "project_id", "user_id", "type", "category", "content", "created_at"
        )[: settings.MEMORY_CONSOLIDATION_MAX_INPUT]
    )
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for row in rows:  # newest first, so each group's first row is its winner
        key = (
            row["scope"],
            row["project_id"],
            row["user_id"],
            row["type"],
            hygiene.upsert_key(content=row["content"], category=row["category"]),
        )
        groups.setdefault(key, []).append(row)
    winners: list[uuid.UUID] = []
    superseded: list[tuple[uuid.UUID, uuid.UUID]] = []
    conflicted = 0
    for members in groups.values():
        if len(members) < 2:
            continue
        winner = members[0]
        winners.append(winner["id"])
        for loser in members[1:]:
            superseded.append((winner["id"], loser["id"]))
            # Same key, different text: the newer memory changed the value (not a plain repeat).
            if " ".join(loser["content"].split()) != " ".join(winner["content"].split()):
                conflicted += 1
    if dry_run:
        return ConsolidationResult(None, len(rows), winners, superseded, conflicted)
    now = timezone.now()
    by_winner: dict[uuid.UUID, list[uuid.UUID]] = {}
    for winner_id, loser_id in superseded:
        by_winner.setdefault(winner_id, []).append(loser_id)
    for winner_id, loser_ids in by_winner.items():
        Memory.objects.filter(workspace_id=workspace_id, pk__in=loser_ids).update(
            superseded_by=winner_id, updated_at=now
        )
    run = ConsolidationRun.objects.create(
        workspace_id=workspace_id,
        user_id=scope.user_id,
        project_id=scope.project_id,
        input_count=len(rows),
        merged_count=len(winners),
        superseded_count=len(superseded),
        conflicted_count=conflicted,
        model=model,
        metadata={"types": types, "includeGlobal": include_global, "globalOnly": global_only},
        created_at=now,
    )
    return ConsolidationResult(run, len(rows), winners, superseded, conflicted)

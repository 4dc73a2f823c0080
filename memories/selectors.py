"""Reads on memories. Callers run inside tenancy.rls.workspace_context; the explicit workspace filter is kept
anyway so the planner uses the workspace indexes (RLS is the backstop, not the filter)."""

from __future__ import annotations

import base64
import binascii
import functools
import json
import logging
import math
import re
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, cast

from django.conf import settings
from django.db import connections
from django.db.models import F, Q, QuerySet, signals
from django.db.models.base import ModelState
from django.db.models.fields.related_descriptors import ForeignKeyDeferredAttribute
from django.db.models.query_utils import DeferredAttribute
from django.utils import timezone

from config.errors import ApiError
from config.prepared import prepared_cursor
from config.schemas import JSON_MAX_DEPTH, ScopeIn
from memories.models import Memory, PipelineJob, SkillFile

logger = logging.getLogger("cairn.memories")

# The model's columns on alias m, for reads that build models from raw rows. Never `m.*`: that would also
# carry search_tsv (the generated lexemes, kilobytes per memory) into every row.
_MEMORY_FIELDS = Memory._meta.concrete_fields
MEMORY_COLUMNS = ", ".join(f"m.{field.column}" for field in _MEMORY_FIELDS)


@dataclass(frozen=True)
class MemoryScope:
    """userId / projectId of a call: filters inside the workspace, never an authorisation boundary."""

    user_id: str | None = None
    project_id: str | None = None
    # Reads leave out memories consolidation superseded unless the caller asks for them (includeSuperseded).
    include_superseded: bool = False
    # Every memory of the workspace, whatever its userId or projectId: for the workspace's own people (the
    # dashboard), who may see all of it. memory_scope() never sets it, so no SDK request can reach it. Reads
    # only: writable_q refuses it. Forgotten and expired memories stay out (superseded ones unless
    # include_superseded).
    workspace_wide: bool = False

    def __post_init__(self) -> None:
        if self.workspace_wide and (self.user_id is not None or self.project_id is not None):
            raise ValueError("a workspace-wide scope names no userId or projectId")


def memory_scope(scope: ScopeIn, *, include_superseded: bool = False) -> MemoryScope:
    """The scope of an SDK request: its userId and projectId, never workspace-wide."""
    return MemoryScope(
        user_id=scope.userId, project_id=scope.projectId, include_superseded=include_superseded
    )


def parse_memory_id(raw: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(raw)
    except ValueError:
        return None


def readable_q(scope: MemoryScope) -> Q:
    """The read rule: shared + this user's; global + this project's (every user and project when the scope
    is workspace-wide); live; not expired (and not superseded, unless the scope asks for superseded memories
    too). read_rule is the same rule as SQL; tests/retrieval/test_read_rule.py holds them equal."""
    if scope.workspace_wide:
        users, projects = Q(), Q()
    else:
        users = Q(user_id__isnull=True)
        if scope.user_id:
            users |= Q(user_id=scope.user_id)
        projects = Q(scope=Memory.Scope.GLOBAL)
        if scope.project_id:
            projects |= Q(scope=Memory.Scope.PROJECT, project_id=scope.project_id)
    live = Q(deleted_at__isnull=True) & (Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()))
    current = Q() if scope.include_superseded else Q(superseded_by__isnull=True)
    return users & projects & live & current


def writable_q(scope: MemoryScope) -> Q:
    """The write rule: exactly this user's memories, or the shared ones when no userId. A workspace-wide
    scope is for reading: writing through one would touch every user's memories."""
    if scope.workspace_wide:
        raise ValueError("a workspace-wide scope is for reads only")
    return Q(user_id=scope.user_id) if scope.user_id else Q(user_id__isnull=True)


# --- the read rule as SQL -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadRule:
    """The read rule of one scope as SQL conditions on one table alias, its values put into the params it was
    built with. `users` holds one condition per user_id value the scope sees (shared rows, then the user's
    own): OR them (user_sql), or give each a UNION branch of its own so each is an index condition; empty for
    a workspace-wide scope. `others` are the rest (workspace, project, live, current), ANDed."""

    users: tuple[str, ...]
    others: tuple[str, ...]

    @property
    def user_sql(self) -> str:
        if not self.users:
            return "TRUE"
        return self.users[0] if len(self.users) == 1 else "(" + " OR ".join(self.users) + ")"

    @property
    def others_sql(self) -> str:
        return " AND ".join(self.others) if self.others else "TRUE"

    def sql(self) -> str:
        return " AND ".join([*self.others, self.user_sql])


def read_rule(
    scope: MemoryScope,
    params: dict[str, Any],
    *,
    alias: str = "m",
    embeddings: bool = False,
    workspace: bool = True,
    owner: str | None = None,
) -> ReadRule:
    """readable_q as SQL: the one place every raw statement takes "the memories this caller may read" from
    (BM25, substring and web-search statements, session neighbours, loads by id, rules, graph expansion,
    vector search).

    The workspace is %(workspace_id)s (`workspace=False`: the statement pins it itself, e.g. as a literal for
    a partial index); the user and project go into params as user_id / project_id. `embeddings`: the alias is
    memory_embeddings, which carries copies of user_id, scope, project_id and expires_at but no deleted_at or
    superseded_by (a forgotten memory's vector is deleted with it; callers load the memories through the
    whole rule). `owner`: instead of the scope's values, those of another row of the statement (alias
    `owner`), i.e. what that memory's own user and project may read (the similarity step)."""
    a = alias
    others: list[str] = []
    if workspace:
        others.append(f"{a}.workspace_id = %(workspace_id)s")
    users: tuple[str, ...]
    project = f"({a}.scope = 'global' OR ({a}.scope = 'project' AND {a}.project_id = {{}}))"
    if owner is not None:
        users = (f"{a}.user_id IS NULL", f"{a}.user_id = {owner}.user_id")
        others.append(project.format(f"{owner}.project_id"))
    elif scope.workspace_wide:
        users = ()
    else:
        users = (f"{a}.user_id IS NULL",)
        if scope.user_id:
            params["user_id"] = scope.user_id
            users += (f"{a}.user_id = %(user_id)s",)
        if scope.project_id:
            params["project_id"] = scope.project_id
            others.append(project.format("%(project_id)s"))
        else:
            others.append(f"{a}.scope = 'global'")
    if not embeddings:
        others.append(f"{a}.deleted_at IS NULL")
    others.append(f"({a}.expires_at IS NULL OR {a}.expires_at > now())")
    if not embeddings and not scope.include_superseded:
        others.append(f"{a}.superseded_by IS NULL")
    return ReadRule(users, tuple(others))


def memories_readable(*, workspace_id: int, scope: MemoryScope) -> QuerySet[Memory]:
    return Memory.objects.filter(readable_q(scope), workspace_id=workspace_id)


def memory_get_writable(*, workspace_id: int, scope: MemoryScope, memory_id: str) -> Memory | None:
    parsed = parse_memory_id(memory_id)
    if parsed is None:
        return None
    return (
        Memory.objects.filter(
            writable_q(scope), workspace_id=workspace_id, pk=parsed, deleted_at__isnull=True
        )
        .select_for_update()
        .first()
    )


# --- list with cursors --------------------------------------------------------------------------------------


def encode_cursor(memory: Memory) -> str:
    raw = json.dumps([memory.created_at.isoformat(), str(memory.id)]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        created_at, memory_id = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if not isinstance(created_at, str) or not isinstance(memory_id, str):
            raise TypeError("cursor parts must be strings")
        moment = datetime.fromisoformat(created_at)
        if moment.tzinfo is None:
            raise ValueError("cursor time has no time zone")
        return moment, uuid.UUID(memory_id)
    except (ValueError, TypeError, binascii.Error, json.JSONDecodeError):
        raise ApiError(
            400,
            "INVALID_CURSOR",
            "cursor is not one this API returned; pass nextCursor from the previous page.",
        ) from None


def memory_list(
    *,
    workspace_id: int,
    scope: MemoryScope,
    type: str | None = None,
    layer: str | None = None,
    tag_substring: str | None = None,
    limit: int = 20,
    cursor: str | None = None,
) -> tuple[list[Memory], str | None]:
    queryset = memories_readable(workspace_id=workspace_id, scope=scope)
    if type:
        queryset = queryset.filter(type=type)
    if layer:
        queryset = queryset.filter(layer=layer)
    if tag_substring:
        queryset = queryset.extra(
            where=["array_to_string(tags, ',') LIKE %s"], params=[f"%{like_escape(tag_substring)}%"]
        )
    if cursor:
        created_at, memory_id = decode_cursor(cursor)
        queryset = queryset.filter(Q(created_at__lt=created_at) | Q(created_at=created_at, id__lt=memory_id))
    rows = list(queryset.order_by("-created_at", "-id")[: limit + 1])
    next_cursor = encode_cursor(rows[limit - 1]) if len(rows) > limit else None
    return rows[:limit], next_cursor


def like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def type_layer_sql(params: dict[str, Any], *, type: str | None, layer: str | None) -> str:
    """The optional type and layer filters on `m`, their values put into params."""
    extra = ""
    if type:
        params["type"] = type
        extra += " AND m.type = %(type)s"
    if layer:
        params["layer"] = layer
        extra += " AND m.layer = %(layer)s"
    return extra


def memories_from_sql(sql: str, params: dict[str, Any], *, prepared: bool = False) -> list[Memory]:
    """Models from a statement that selects MEMORY_COLUMNS first; any further columns become attributes by
    name (lexical_rank, distance, …). Memory.objects.raw with less per-row work: the column-to-field mapping
    and the converters are worked out once per process, not on every statement. `prepared` runs it as a
    prepared statement (generic plan, config.prepared): only for statements whose generic plan is as good as a
    custom one."""
    connection = connections["app"]
    with prepared_cursor() if prepared else connection.cursor() as cursor:
        cursor.execute(sql, params)
        # The names of the columns after the model's, from the result itself: cursor.description would build a
        # Column (and look up its type) for each of the ~20 model columns too, on every statement.
        result = cursor.cursor.pgresult
        extra = [result.fname(index).decode() for index in range(len(_MEMORY_FIELDS), result.nfields)]
        rows = cursor.fetchall()
    converters = _memory_converters()
    names = _MEMORY_ATTNAMES + tuple(extra)
    build = _memory_from_values if _plain_memory_fields() else _memory_from_db
    memories = []
    for row in rows:
        values = list(row)
        for index, functions, expression in converters:
            for function in functions:
                values[index] = function(values[index], expression, connection)
        memories.append(build(names, values))
    return memories


_MEMORY_ATTNAMES = tuple(field.attname for field in _MEMORY_FIELDS)


def _memory_from_values(names: tuple[str, ...], values: list[Any]) -> Memory:
    """A loaded Memory as Model.from_db makes it, without Model.__init__'s per-field descriptor calls and
    signals (a tenth of context/get's Python time for ~100 rows): only valid while _plain_memory_fields()
    holds."""
    memory = Memory.__new__(Memory)
    memory.__dict__.update(zip(names, values, strict=True))
    state = ModelState()
    state.adding, state.db = False, "app"
    memory._state = state
    return memory


def _memory_from_db(names: tuple[str, ...], values: list[Any]) -> Memory:
    memory = Memory.from_db("app", _MEMORY_ATTNAMES, values[: len(_MEMORY_FIELDS)])
    for name, value in zip(names[len(_MEMORY_FIELDS) :], values[len(_MEMORY_FIELDS) :], strict=True):
        setattr(memory, name, value)
    return memory


@functools.cache
def _plain_memory_fields() -> bool:
    """Whether setting a loaded Memory's attributes directly is what Model.__init__ would do: every field
    stores its value under its attname unchanged (no custom descriptor) and nothing listens to Memory's init
    signals."""
    plain = (DeferredAttribute, ForeignKeyDeferredAttribute)
    return (
        all(type(Memory.__dict__.get(field.attname)) in plain for field in _MEMORY_FIELDS)
        and not signals.pre_init.has_listeners(Memory)
        and not signals.post_init.has_listeners(Memory)
    )


@functools.cache
def _memory_converters() -> list[tuple[int, list[Any], Any]]:
    """As the ORM's compiler finds them for each column (the database backend's, then the field's): e.g. the
    JSON decoding of metadata."""
    connection = connections["app"]
    found = []
    for index, field in enumerate(_MEMORY_FIELDS):
        column = field.get_col(Memory._meta.db_table)
        functions = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
        if functions:
            found.append((index, functions, column))
    return found


def readable_sql(scope: MemoryScope, params: dict[str, Any]) -> str:
    """readable_q as SQL on alias m (its values put into params; the workspace is %(workspace_id)s). The hot
    reads of context/get use it: building and compiling the ORM's filter cost more CPU than the statements."""
    return read_rule(scope, params).sql()


def memories_readable_by_ids(
    *,
    workspace_id: int,
    scope: MemoryScope,
    ids: list[uuid.UUID],
    condition: str = "",
    condition_params: dict[str, Any] | None = None,
    annotation: str = "",
) -> dict[uuid.UUID, Memory]:
    """The readable memories among `ids`, by id. `condition` adds SQL on m (`AND …`, its values named in
    `condition_params`); `annotation` adds one select expression (`<sql> AS <name>`), read back as an
    attribute."""
    if not ids:
        return {}
    params: dict[str, Any] = {**(condition_params or {}), "workspace_id": workspace_id, "ids": list(ids)}
    extra = f", {annotation}" if annotation else ""
    sql = (
        f"SELECT {MEMORY_COLUMNS}{extra} FROM memories m "
        f"WHERE m.id = ANY(%(ids)s::uuid[]) AND {readable_sql(scope, params)} {condition}"
    )
    # Prepared: an id lookup plans the same whatever the ids (0.5 of its 1 ms of PostgreSQL CPU was planning).
    return {memory.id: memory for memory in memories_from_sql(sql, params, prepared=True)}


_STATUS_ORDER = ("dead_letter", "processing", "queued", "succeeded")


def pipeline_status(*, workspace_id: int, memory_ids: list[uuid.UUID]) -> dict[uuid.UUID, dict[str, Any]]:
    """Per memory: its pipeline steps and an overall status (the worst step wins)."""
    if not memory_ids:
        return {}
    steps: dict[uuid.UUID, dict[str, Any]] = {}
    rows = PipelineJob.objects.filter(workspace_id=workspace_id, memory_id__in=memory_ids).values_list(
        "memory_id", "kind", "status", "attempts", "last_error_code"
    )
    for memory_id, kind, status, attempts, error_code in rows:
        steps.setdefault(memory_id, {})[kind] = {
            "status": status,
            "attempts": attempts,
            "lastErrorCode": error_code,
        }
    return {
        memory_id: {
            "status": next(s for s in _STATUS_ORDER if any(step["status"] == s for step in by_kind.values())),
            "steps": by_kind,
        }
        for memory_id, by_kind in steps.items()
    }


def just_queued_pipeline() -> dict[str, Any]:
    """The pipeline of a memory written a moment ago, known without asking the database."""
    return {
        "status": "queued",
        "steps": {"embed": {"status": "queued", "attempts": 0, "lastErrorCode": None}},
    }


def memory_payloads(*, workspace_id: int, memories: list[Memory]) -> list[dict[str, Any]]:
    statuses = pipeline_status(workspace_id=workspace_id, memory_ids=[memory.id for memory in memories])
    return [memory_payload(memory, pipeline=statuses.get(memory.id)) for memory in memories]


def metadata_servable(value: Any) -> bool:
    """Whether stored metadata can be answered as it is: an object at most JSON_MAX_DEPTH levels deep with
    finite numbers (what memories/add accepts today; rows older than the rule may not be). A loop over the
    containers only, so flat metadata, the usual kind, costs one pass over its values."""
    if not isinstance(value, dict):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        for child in item.values() if isinstance(item, dict) else item:
            if isinstance(child, float):
                if not math.isfinite(child):
                    return False
            elif isinstance(child, dict | list):
                if depth >= JSON_MAX_DEPTH:
                    return False
                stack.append((child, depth + 1))
    return True


def _repaired(value: Any, depth: int) -> Any:
    if isinstance(value, dict | list):
        if depth > JSON_MAX_DEPTH:
            return None
        if isinstance(value, dict):
            return {key: _repaired(child, depth + 1) for key, child in value.items()}
        return [_repaired(child, depth + 1) for child in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def metadata_repaired(value: Any) -> dict[str, Any] | None:
    """Stored metadata cut to what can be answered: containers below JSON_MAX_DEPTH and numbers that are not
    finite become null; anything but an object becomes null. The recursion stops at JSON_MAX_DEPTH levels."""
    return _repaired(value, 1) if isinstance(value, dict) else None


def memory_payload(memory: Memory, *, pipeline: dict[str, Any] | None = None) -> dict[str, Any]:
    """A memory as the API answers it. A row stored before today's write rules (metadata too deep to
    serialise, a number that is not finite) is answered repaired and logged with its id, never a 500 for the
    whole answer; graph/status counts such rows (unreadable_rows)."""
    metadata = memory.metadata
    if metadata is not None and not metadata_servable(metadata):
        logger.warning(
            "memory %s: stored metadata cannot be served as stored (deeper than %s levels, not finite, or "
            "not an object); answered repaired",
            memory.id,
            JSON_MAX_DEPTH,
        )
        metadata = metadata_repaired(metadata)
    importance = float(memory.importance)
    if not math.isfinite(importance):
        logger.warning("memory %s: stored importance %s is not finite; answered 0.5", memory.id, importance)
        importance = 0.5
    return {
        "id": str(memory.id),
        "content": memory.content,
        "type": memory.type,
        "layer": memory.layer,
        "expiresAt": memory.expires_at,
        "scope": memory.scope,
        "projectId": memory.project_id,
        "tags": list(memory.tags or []),
        "paths": list(memory.paths or []),
        "category": memory.category,
        "metadata": metadata,
        "createdAt": memory.created_at,
        "updatedAt": memory.updated_at,
        "injectionFlags": list(memory.injection_flags or []),
        "importance": round(importance, 4),
        "supersededBy": str(memory.superseded_by) if memory.superseded_by else None,
        "conversation": conversation_payload(memory),
        "pipeline": pipeline,
    }


def conversation_payload(memory: Memory) -> dict[str, Any] | None:
    """A turn's (or a session summary's) place in its session; None for every other memory."""
    if memory.session_id is None:
        return None
    return {
        "sessionId": str(memory.session_id),
        "kind": memory.turn_kind,
        "turnIndex": memory.turn_index,
        "role": memory.turn_role,
        "speaker": memory.speaker,
        "saidAt": memory.said_at,
    }


# Rows a read cannot serve as stored: timestamps outside what Python's datetime holds in UTC (a read that
# loads one fails), metadata deeper than JSON_MAX_DEPTH or not an object, numbers that are not finite (reads
# answer those repaired). The write rules keep new ones out and migration memories.0010 repaired the old;
# this finds any written around them (by hand, by an old server).
_UNREADABLE_SQL = f"""
SELECT
  (SELECT count(*) FROM (SELECT 1 FROM memories m WHERE m.workspace_id = %(ws)s AND (
       m.created_at < %(low)s OR m.created_at > %(high)s
       OR m.updated_at < %(low)s OR m.updated_at > %(high)s
       OR m.expires_at < %(low)s OR m.expires_at > %(high)s
       OR m.deleted_at < %(low)s OR m.deleted_at > %(high)s
       OR NOT (m.importance BETWEEN -1e308 AND 1e308)
       OR (m.metadata IS NOT NULL AND (jsonb_typeof(m.metadata) NOT IN ('object', 'null')
           OR m.metadata @? '$.**{{{JSON_MAX_DEPTH}}} ? (@.type() == "object" || @.type() == "array")')))
     LIMIT %(cap)s) bad),
  (SELECT count(*) FROM (SELECT 1 FROM graph_edges e WHERE e.workspace_id = %(ws)s
       AND NOT (e.weight BETWEEN -1e308 AND 1e308 AND e.confidence BETWEEN -1e308 AND 1e308)
     LIMIT %(cap)s) bad)
"""
UNREADABLE_CAP = 10_000
# A scan of the workspace's memories and edges (~0.13 s at 100k memories and 1M edges): graph/status reuses a
# count this long per process.
UNREADABLE_CACHE_SECONDS = 300
_UNREADABLE_CACHE: dict[int, tuple[float, dict[str, int]]] = {}


def unreadable_rows(*, workspace_id: int, fresh: bool = False) -> dict[str, int]:
    """How many of the workspace's rows reads cannot serve as stored, per table (at most UNREADABLE_CAP
    each), for graph/status's health."""
    cached = _UNREADABLE_CACHE.get(workspace_id)
    if not fresh and cached is not None and cached[0] > time.monotonic():
        return cached[1]
    with connections["app"].cursor() as cursor:
        cursor.execute(
            _UNREADABLE_SQL,
            {
                "ws": workspace_id,
                "low": datetime.min.replace(tzinfo=UTC),
                "high": datetime.max.replace(tzinfo=UTC),
                "cap": UNREADABLE_CAP,
            },
        )
        memories, edges = cursor.fetchone()
    counts = {"memories": int(memories), "graphEdges": int(edges)}
    if len(_UNREADABLE_CACHE) >= 10_000:
        _UNREADABLE_CACHE.clear()
    _UNREADABLE_CACHE[workspace_id] = (time.monotonic() + UNREADABLE_CACHE_SECONDS, counts)
    return counts


def unreadable_rows_forget(*, workspace_id: int | None = None) -> None:
    """Drop this process's count (after a repair); other processes recount within UNREADABLE_CACHE_SECONDS."""
    if workspace_id is None:
        _UNREADABLE_CACHE.clear()
    else:
        _UNREADABLE_CACHE.pop(workspace_id, None)


def pipeline_counts(*, workspace_id: int) -> dict[str, Any]:
    with connections["app"].cursor() as cursor:
        cursor.execute(
            """
            SELECT
              count(*) FILTER (WHERE status = 'queued'),
              count(*) FILTER (WHERE status = 'processing'),
              count(*) FILTER (WHERE status = 'succeeded'),
              count(*) FILTER (WHERE status = 'dead_letter'),
              extract(epoch FROM now() - min(created_at) FILTER (WHERE status = 'queued'))
            FROM pipeline_jobs WHERE workspace_id = %s
            """,
            [workspace_id],
        )
        queued, processing, succeeded, dead, oldest = cursor.fetchone()
    return {
        "queued": queued,
        "processing": processing,
        "succeeded": succeeded,
        "deadLetter": dead,
        "oldestQueuedAgeSeconds": round(float(oldest), 1) if oldest is not None else None,
    }


def recent_pipeline_errors(*, workspace_id: int, limit: int = 20) -> list[dict[str, Any]]:
    """Latest failures: job errors (with their step) and mapping errors, newest first."""
    with connections["app"].cursor() as cursor:
        cursor.execute(
            """
            (SELECT last_error_code, last_error_message, 'pipeline:' || kind, memory_id, updated_at
             FROM pipeline_jobs WHERE workspace_id = %(ws)s AND last_error_code IS NOT NULL
             ORDER BY updated_at DESC LIMIT %(limit)s)
            UNION ALL
            (SELECT code, message, stage, memory_id, created_at FROM pipeline_errors
             WHERE workspace_id = %(ws)s ORDER BY created_at DESC LIMIT %(limit)s)
            ORDER BY 5 DESC LIMIT %(limit)s
            """,
            {"ws": workspace_id, "limit": limit},
        )
        return [
            {
                "code": code,
                "message": message,
                "source": source,
                "memoryId": str(memory_id) if memory_id else None,
                "timestamp": at,
            }
            for code, message, source, memory_id, at in cursor.fetchall()
        ]


# --- session neighbours -------------------------------------------------------------------------------------

_SESSION_NEIGHBOURS_SQL = """
SELECT n.*, a.id AS anchor_id
FROM memories a
CROSS JOIN LATERAL (
    (SELECT {MEMORY_COLUMNS}, row_number() OVER (ORDER BY m.turn_index DESC) AS distance
     FROM memories m
     WHERE {readable} AND m.session_id = a.session_id AND m.turn_index < a.turn_index {extra}
     ORDER BY m.turn_index DESC LIMIT %(span)s)
    UNION ALL
    (SELECT {MEMORY_COLUMNS}, row_number() OVER (ORDER BY m.turn_index) AS distance FROM memories m
     WHERE {readable} AND m.session_id = a.session_id AND m.turn_index > a.turn_index {extra}
     ORDER BY m.turn_index LIMIT %(span)s)
) n
WHERE a.workspace_id = %(workspace_id)s AND a.id = ANY(%(ids)s) AND a.session_id IS NOT NULL
  AND a.turn_index IS NOT NULL
""".replace("{MEMORY_COLUMNS}", MEMORY_COLUMNS)


class _SessionNeighbourColumns(Protocol):
    """The columns _SESSION_NEIGHBOURS_SQL selects after a memory's own (set as attributes by
    memories_from_sql)."""

    anchor_id: uuid.UUID
    distance: int


def session_neighbours(
    *,
    workspace_id: int,
    scope: MemoryScope,
    memory_ids: list[uuid.UUID],
    type: str | None,
    layer: str | None,
    span: int = 1,
) -> list[tuple[uuid.UUID, Memory, int]]:
    """(memory id, neighbour, distance) for the `span` readable turns before and the `span` after each given
    turn in its session (same session, turn order; distance 1 = right next to it). Memories that are not
    turns have no neighbours. One query; each lookup is a short range scan of memories_ws_session_turns."""
    if not memory_ids or span < 1:
        return []
    params: dict[str, Any] = {"workspace_id": workspace_id, "ids": list(memory_ids), "span": span}
    extra = type_layer_sql(params, type=type, layer=layer)
    sql = _SESSION_NEIGHBOURS_SQL.format(readable=read_rule(scope, params).sql(), extra=extra)
    neighbours = []
    for row in memories_from_sql(sql, params):
        columns = cast(_SessionNeighbourColumns, row)
        neighbours.append((columns.anchor_id, row, int(columns.distance)))
    return neighbours


# --- hygiene settings and admission counters ----------------------------------------------------------------


@dataclass(frozen=True)
class HygieneSettings:
    redact_credentials: bool
    scrub_at_rest: bool
    admission_enabled: bool
    admission_threshold: float
    importance_weight: float
    half_life_days: float  # 0: no temporal decay
    mmr_lambda: float  # 1: no MMR diversity
    sessions_enabled: bool = True
    procedural_enabled: bool = True


def memory_settings_get(*, workspace_id: int) -> HygieneSettings:
    """The workspace's effective settings: its row where set, else the server defaults (config.settings)."""
    from memories.models import MemorySettings

    row = MemorySettings.objects.filter(workspace_id=workspace_id).first()
    return HygieneSettings(
        redact_credentials=row.redact_credentials if row else settings.MEMORY_REDACT_CREDENTIALS,
        scrub_at_rest=row.scrub_at_rest if row else False,
        admission_enabled=row.admission_enabled if row else False,
        admission_threshold=(
            row.admission_threshold
            if row and row.admission_threshold is not None
            else settings.MEMORY_ADMISSION_THRESHOLD
        ),
        importance_weight=(
            row.importance_weight
            if row and row.importance_weight is not None
            else settings.MEMORY_IMPORTANCE_WEIGHT
        ),
        half_life_days=(
            row.half_life_days if row and row.half_life_days is not None else settings.SEARCH_HALF_LIFE_DAYS
        ),
        mmr_lambda=row.mmr_lambda if row and row.mmr_lambda is not None else settings.SEARCH_MMR_LAMBDA,
        sessions_enabled=(
            row.sessions_enabled
            if row and row.sessions_enabled is not None
            else settings.MEMORY_SESSION_ENABLED
        ),
        procedural_enabled=(
            row.procedural_enabled
            if row and row.procedural_enabled is not None
            else settings.MEMORY_PROCEDURAL_ENABLED
        ),
    )


# workspace → (monotonic expiry, settings), for context/get (CONTEXT_SETTINGS_CACHE_SECONDS).
_SETTINGS_CACHE: dict[int, tuple[float, HygieneSettings]] = {}
_SETTINGS_CACHE_MAX = 10_000


def memory_settings_cached(*, workspace_id: int) -> HygieneSettings:
    """memory_settings_get, remembered per process for CONTEXT_SETTINGS_CACHE_SECONDS: context/get reads them
    on every call. memory_settings_update forgets this process's copy; other processes see a change within the
    TTL."""
    ttl = settings.CONTEXT_SETTINGS_CACHE_SECONDS
    cached = _SETTINGS_CACHE.get(workspace_id)
    if ttl > 0 and cached is not None and cached[0] > time.monotonic():
        return cached[1]
    value = memory_settings_get(workspace_id=workspace_id)
    if ttl > 0:
        if len(_SETTINGS_CACHE) >= _SETTINGS_CACHE_MAX:
            _SETTINGS_CACHE.clear()
        _SETTINGS_CACHE[workspace_id] = (time.monotonic() + ttl, value)
    return value


def memory_settings_forget(*, workspace_id: int | None = None) -> None:
    if workspace_id is None:
        _SETTINGS_CACHE.clear()
    else:
        _SETTINGS_CACHE.pop(workspace_id, None)


def memory_settings_payload(*, workspace_id: int) -> dict[str, Any]:
    effective = memory_settings_get(workspace_id=workspace_id)
    return {
        "redactCredentials": effective.redact_credentials,
        "scrubAtRest": effective.scrub_at_rest,
        "admissionEnabled": effective.admission_enabled,
        "admissionThreshold": effective.admission_threshold,
        "admissionFastPathMargin": settings.MEMORY_ADMISSION_FAST_PATH_MARGIN,
        "admissionDuplicateCosine": settings.MEMORY_ADMISSION_DUPLICATE_COSINE,
        "importanceWeight": effective.importance_weight,
        "halfLifeDays": effective.half_life_days,
        "mmrLambda": effective.mmr_lambda,
        "sessionsEnabled": effective.sessions_enabled,
        "proceduralEnabled": effective.procedural_enabled,
    }


def admission_status(*, workspace_id: int) -> dict[str, Any]:
    """What graph/status shows of admission control: on/off and the decisions counted so far."""
    from memories.models import AdmissionCount

    rows = list(
        AdmissionCount.objects.filter(workspace_id=workspace_id).values("admitted", "reason", "count")
    )
    return {
        "enabled": memory_settings_get(workspace_id=workspace_id).admission_enabled,
        "admitted": sum(r["count"] for r in rows if r["admitted"]),
        "rejected": sum(r["count"] for r in rows if not r["admitted"]),
        "byReason": {r["reason"]: r["count"] for r in sorted(rows, key=lambda r: r["reason"])},
    }


# --- sessions and skill files: whose they are ---------------------------------------------------------------


def owner_readable_q(scope: MemoryScope) -> Q:
    """The read rule of memories for rows that carry the same owner columns (sessions, skill files): shared +
    this user's; global + this project's."""
    users = Q(user_id__isnull=True)
    if scope.user_id:
        users |= Q(user_id=scope.user_id)
    projects = Q(scope=Memory.Scope.GLOBAL)
    if scope.project_id:
        projects |= Q(scope=Memory.Scope.PROJECT, project_id=scope.project_id)
    return users & projects


def owner_exact_q(scope: MemoryScope) -> Q:
    """Exactly the scope's owner (its userId and projectId, or their absence): what a write may touch."""
    if scope.workspace_wide:
        raise ValueError("a workspace-wide scope is for reads only")
    users = Q(user_id=scope.user_id) if scope.user_id else Q(user_id__isnull=True)
    projects = Q(project_id=scope.project_id) if scope.project_id else Q(project_id__isnull=True)
    return users & projects


def skill_file_payload(row: SkillFile) -> dict[str, Any]:
    return {
        "id": str(row.id),
        "path": row.path,
        "content": row.content,
        "scope": row.scope,
        "projectId": row.project_id,
        "userId": row.user_id,
        "procedureKey": row.procedure_key,
        "sourceSessionId": str(row.source_session_id) if row.source_session_id else None,
        "sourceSnapshotId": str(row.source_snapshot_id) if row.source_snapshot_id else None,
        "usageCount": row.usage_count,
        "lastUsedAt": row.last_used_at,
        "createdAt": row.created_at,
        "updatedAt": row.updated_at,
    }


_SKILL_WORD = re.compile(r"[^\W_]{3,}")
# Words too common to say which file a query is about.
_SKILL_STOP_WORDS = frozenset(
    [
        "the",
        "and",
        "for",
        "with",
        "that",
        "this",
        "what",
        "when",
        "where",
        "which",
        "how",
        "why",
        "who",
        "are",
        "was",
        "were",
        "has",
        "have",
        "had",
        "not",
        "but",
        "you",
        "your",
        "our",
        "can",
        "does",
        "did",
        "into",
        "from",
        "about",
        "after",
        "before",
        "then",
        "than",
        "them",
        "they",
        "there",
        "their",
        "its",
        "it's",
        "use",
        "using",
    ]
)
# Skill files a context/get query is matched against (a workspace holds few; the newest are looked at).
SKILL_FILES_SCANNED = 500


def skill_files_for_context(
    *, workspace_id: int, scope: MemoryScope, query: str | None, limit: int
) -> list[SkillFile]:
    """The skill files context/get returns: those whose path or text holds a word of the query (the path's
    words count double), best first; without a query, the most recently changed. Marked used."""
    rows = list(
        SkillFile.objects.filter(owner_readable_q(scope), workspace_id=workspace_id).order_by(
            "-updated_at", "-id"
        )[:SKILL_FILES_SCANNED]
    )
    if query:
        words = {w for w in _SKILL_WORD.findall(query.casefold()) if w not in _SKILL_STOP_WORDS}
        scored = []
        for position, row in enumerate(rows):
            in_path = words & set(_SKILL_WORD.findall(row.path.casefold()))
            in_text = words & set(_SKILL_WORD.findall(row.content.casefold()))
            score = 2 * len(in_path) + len(in_text)
            if score:
                scored.append((-score, position, row))
        rows = [row for _, _, row in sorted(scored, key=lambda item: item[:2])]
    chosen = rows[:limit]
    if chosen:
        SkillFile.objects.filter(workspace_id=workspace_id, id__in=[row.id for row in chosen]).update(
            usage_count=F("usage_count") + 1, last_used_at=timezone.now()
        )
    return chosen


# --- supersession decisions ---------------------------------------------------------------------------------


def decision_payload(decision: Any) -> dict[str, Any]:
    return {
        "id": decision.id,
        "newerMemoryId": str(decision.newer_id),
        "olderMemoryId": str(decision.older_id),
        "decision": decision.decision,
        "origin": decision.origin,
        "rule": decision.rule,
        "model": decision.model,
        "confidence": decision.confidence,
        "evidence": decision.evidence,
        "actor": decision.actor,
        "createdAt": decision.created_at,
        "revertedAt": decision.reverted_at,
        "revertedBy": decision.reverted_by,
    }


def supersession_decisions(
    *, workspace_id: int, memory_id: uuid.UUID, include_reverted: bool, limit: int
) -> list[Any]:
    """The decisions about a memory (either side), newest first."""
    from memories.models import SupersessionDecision

    decisions = SupersessionDecision.objects.filter(
        Q(newer_id=memory_id) | Q(older_id=memory_id), workspace_id=workspace_id
    )
    if not include_reverted:
        decisions = decisions.filter(reverted_at__isnull=True)
    return list(decisions.order_by("-created_at", "-id")[:limit])

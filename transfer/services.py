"""Workspace import: one transaction in the target workspace, ids remapped, existing rows skipped.

Running the same file twice changes nothing the second time: memories keep their id when imported back into
the workspace they came from and otherwise get an id derived from (target workspace, source id); graph rows
are found again by their natural keys. Any bad line aborts the whole import (nothing half-imported). Every
reference in the file must point at a record of the same file, so a file cannot reach rows of another
workspace; row-level security backs that up.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, cast, overload

from django.conf import settings
from django.db import connections
from psycopg.types.json import Jsonb

from config.errors import ApiError
from pipeline import jobs
from tenancy.rls import workspace_context
from transfer.export import FORMAT, VERSION

_NAMESPACE = uuid.UUID("5b0f3c1e-8d1a-4f57-9a40-5d1b6f0e2c11")
_MEMORY_TYPES = {"rule", "decision", "fact", "note", "skill"}
_LAYERS = {"rule", "working", "long_term"}
_SCOPES = {"global", "project"}
_ROLES = {"self", "type", "scope", "subject", "category", "tag", "mentions"}
_EDGE_CLASSES = {"semantic", "temporal", "causal", "entity"}
_ORIGINS = {"mapping", "similarity", "llm_pairwise", "llm_semantic", "llm_entity", "manual", "consolidation"}
_KINDS = {
    "rollout",
    "retrieval_policy",
    "graph_settings",
    "memory_settings",
    "memory",
    "embedding",
    "community",
    "node",
    "alias",
    "edge",
    "link",
    "trailer",
}


class ImportFileError(ApiError):
    def __init__(self, line: int, message: str) -> None:
        super().__init__(
            422,
            "IMPORT_FILE_INVALID",
            f"Line {line}: {message} Nothing was imported.",
            details={"line": line},
        )


@dataclass
class ImportReport:
    created: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    embed_jobs_queued: int = 0

    def count(self, kind: str, created: bool) -> None:
        bucket = self.created if created else self.skipped
        bucket[kind] = bucket.get(kind, 0) + 1

    def as_dict(self) -> dict[str, Any]:
        return {"created": self.created, "skipped": self.skipped, "embedJobsQueued": self.embed_jobs_queued}


@dataclass
class _State:
    workspace_id: int
    same_workspace: bool
    memories: dict[str, uuid.UUID] = field(default_factory=dict)
    created_memories: dict[uuid.UUID, str | None] = field(default_factory=dict)  # new id → embedding model
    embedded: set[uuid.UUID] = field(default_factory=set)
    nodes: dict[int, int] = field(default_factory=dict)
    communities: dict[int, int] = field(default_factory=dict)
    edges: dict[int, int] = field(default_factory=dict)
    supersessions: list[tuple[int, int]] = field(default_factory=list)  # (new edge id, source superseding id)
    # (new memory id, source id of the memory that superseded it in consolidation)
    memory_supersessions: list[tuple[uuid.UUID, str]] = field(default_factory=list)
    seen: dict[str, int] = field(default_factory=dict)


def _lines(source: Iterable[bytes | str]) -> Iterable[tuple[int, dict[str, Any]]]:
    max_lines, max_bytes = settings.EXPORT_IMPORT_MAX_LINES, settings.EXPORT_IMPORT_MAX_LINE_BYTES
    number = 0
    for raw in source:
        number += 1
        if number > max_lines + 2:  # header and trailer do not count
            raise ImportFileError(
                number, f"the file has more than {max_lines} records (EXPORT_IMPORT_MAX_LINES)."
            )
        if len(raw) > max_bytes:
            raise ImportFileError(
                number, f"the line is longer than {max_bytes} bytes (EXPORT_IMPORT_MAX_LINE_BYTES)."
            )
        text = raw.decode("utf-8", errors="strict") if isinstance(raw, bytes) else raw
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except ValueError:
            raise ImportFileError(number, "not valid JSON; each line must be one JSON object.") from None
        if not isinstance(record, dict):
            raise ImportFileError(number, "each line must be a JSON object.")
        yield number, record


@overload
def _str(
    record: dict[str, Any], key: str, line: int, *, max_len: int, optional: Literal[False] = False
) -> str: ...
@overload
def _str(record: dict[str, Any], key: str, line: int, *, max_len: int, optional: bool) -> str | None: ...
def _str(record: dict[str, Any], key: str, line: int, *, max_len: int, optional: bool = False) -> str | None:
    value = record.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or (not optional and not value) or len(value) > max_len:
        raise ImportFileError(line, f"'{key}' must be a string of at most {max_len} characters.")
    return value


@overload
def _int(record: dict[str, Any], key: str, line: int, *, optional: Literal[False] = False) -> int: ...
@overload
def _int(record: dict[str, Any], key: str, line: int, *, optional: bool) -> int | None: ...
def _int(record: dict[str, Any], key: str, line: int, *, optional: bool = False) -> int | None:
    value = record.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise ImportFileError(line, f"'{key}' must be an integer.")
    return value


def _time(record: dict[str, Any], key: str, line: int, *, optional: bool = True) -> datetime | None:
    value = record.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ImportFileError(line, f"'{key}' must be an ISO 8601 timestamp.")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ImportFileError(line, f"'{key}' must be an ISO 8601 timestamp.") from None
    if parsed.tzinfo is None:
        raise ImportFileError(line, f"'{key}' must carry a time zone.")
    return parsed


def _choice(record: dict[str, Any], key: str, line: int, choices: set[str]) -> str:
    value = record.get(key)
    if value not in choices:
        raise ImportFileError(line, f"'{key}' must be one of {', '.join(sorted(choices))}.")
    return value


def _str_list(record: dict[str, Any], key: str, line: int) -> list[str]:
    value = record.get(key) or []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value) or len(value) > 1000:
        raise ImportFileError(line, f"'{key}' must be a list of at most 1000 strings.")
    return value


def _vector(record: dict[str, Any], key: str, line: int, dimension: int | None = None) -> str | None:
    value = record.get(key)
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or not value
        or len(value) > 16_000
        or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in value)
    ):
        raise ImportFileError(line, f"'{key}' must be a non-empty list of numbers.")
    if dimension is not None and len(value) != dimension:
        raise ImportFileError(line, f"'{key}' has {len(value)} numbers but 'dimension' says {dimension}.")
    return "[" + ",".join(repr(float(x)) for x in value) + "]"


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


def _memory_ref(state: _State, record: dict[str, Any], key: str, line: int) -> uuid.UUID:
    source = record.get(key)
    mapped = state.memories.get(source) if isinstance(source, str) else None
    if mapped is None:
        raise ImportFileError(line, f"'{key}' names a memory that is not in this file.")
    return mapped


def _node_ref(state: _State, record: dict[str, Any], key: str, line: int) -> int:
    source = record.get(key)
    mapped = state.nodes.get(source) if isinstance(source, int) else None
    if mapped is None:
        raise ImportFileError(line, f"'{key}' names a graph node that is not in this file.")
    return mapped


def remap_edge_key(key: str, *, nodes: dict[int, int], memories: dict[str, uuid.UUID]) -> str:
    """Edge keys embed node ids (and for mapping edges a memory id); rebuild them with the new ids."""
    parts = key.split(":")
    try:
        if parts[0] == "m" and len(parts) >= 5:
            memory = memories.get(parts[1])
            if memory is None:
                return key
            return ":".join(
                ["m", str(memory), *parts[2:-2], str(nodes[int(parts[-2])]), str(nodes[int(parts[-1])])]
            )
        if parts[0] in ("r", "c") and len(parts) >= 4:  # relationship and consolidation edges
            return ":".join([*parts[:-2], str(nodes[int(parts[-2])]), str(nodes[int(parts[-1])])])
        if parts[0] == "f" and len(parts) >= 4:
            return ":".join(["f", str(nodes[int(parts[1])]), str(nodes[int(parts[2])]), *parts[3:]])
    except (KeyError, ValueError):
        return key
    return key


def workspace_import(*, workspace_id: int, lines: Iterable[bytes | str]) -> ImportReport:
    """Import an export file into `workspace_id`, all or nothing; returns what was created and what
    skipped."""
    report = ImportReport()
    stream = iter(_lines(lines))
    first = next(stream, None)
    if first is None:
        raise ImportFileError(1, "the file is empty; expected a header line from workspace_export.")
    line, header = first
    if header.get("kind") != "header" or header.get("format") != FORMAT:
        raise ImportFileError(line, f"the first line must be the header of a {FORMAT} file.")
    if header.get("version") != VERSION:
        raise ImportFileError(
            line,
            f"version {header.get('version')!r} is not supported; this server reads "
            f"version {VERSION}. Export again with this server's version.",
        )
    state = _State(workspace_id=workspace_id, same_workspace=header.get("sourceWorkspaceId") == workspace_id)
    trailer: dict[str, Any] | None = None
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        for line, record in stream:
            if trailer is not None:
                raise ImportFileError(line, "a line follows the trailer.")
            kind = record.get("kind")
            if kind not in _KINDS:
                raise ImportFileError(line, f"unknown record kind {kind!r}.")
            if kind == "trailer":
                trailer = record
                continue
            state.seen[kind] = state.seen.get(kind, 0) + 1
            created = _IMPORTERS[kind](cursor, state, record, line)
            report.count(kind, created)
        if trailer is None:
            raise ImportFileError(
                line, "the file ends without its trailer line: it was cut short. Export it again."
            )
        if trailer.get("counts") != state.seen:
            raise ImportFileError(
                line, f"the trailer counts {trailer.get('counts')} but the file holds {state.seen}."
            )
        _finish(cursor, state)
        missing = [mid for mid, model in state.created_memories.items() if mid not in state.embedded]
        for model in {state.created_memories[mid] for mid in missing}:
            group = [mid for mid in missing if state.created_memories[mid] == model]
            report.embed_jobs_queued += len(
                jobs.jobs_enqueue(
                    workspace_id=workspace_id, memory_ids=group, kind=jobs.Kind.EMBED, model=model
                )
            )
    return report


def _finish(cursor: Any, state: _State) -> None:
    for edge_id, source_superseding in state.supersessions:
        target = state.edges.get(source_superseding)
        if target is not None:
            cursor.execute("UPDATE graph_edges SET superseded_by_id = %s WHERE id = %s", [target, edge_id])
    for memory_id, source_winner in state.memory_supersessions:
        winner = state.memories.get(source_winner)
        if winner is not None:
            cursor.execute(
                "UPDATE memories SET superseded_by = %s WHERE id = %s AND workspace_id = %s",
                [winner, memory_id, state.workspace_id],
            )


def _import_setting(table: str, columns: dict[str, Any]) -> Any:
    def run(cursor: Any, state: _State, record: dict[str, Any], line: int) -> bool:
        values = {column: getter(record, line) for column, getter in columns.items()}
        names = ", ".join(values)
        cursor.execute(
            f"INSERT INTO {table} (workspace_id, {names}, updated_at) "
            f"VALUES (%s, {', '.join(['%s'] * len(values))}, now()) ON CONFLICT (workspace_id) DO NOTHING",
            [state.workspace_id, *values.values()],
        )
        return cursor.rowcount == 1

    return run


def _rate(value: Any, key: str, line: int) -> float | None:
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 10:
        raise ImportFileError(line, f"'{key}' must be a decay rate per day from 0 to 10.")
    return float(value)


def _object(record: dict[str, Any], key: str, line: int) -> dict[str, Any]:
    value = record.get(key) or {}
    if not isinstance(value, dict) or len(value) > 200:
        raise ImportFileError(line, f"'{key}' must be an object of at most 200 entries.")
    return value


def _bool(key: str) -> Any:
    def get(record: dict[str, Any], line: int) -> bool:
        if not isinstance(record.get(key), bool):
            raise ImportFileError(line, f"'{key}' must be true or false.")
        return record[key]

    return get


def _fraction(record: dict[str, Any], key: str, line: int, *, default: float | None) -> float | None:
    """A number in [0, 1]; absent or null → default (files from before the field existed carry none)."""
    value = record.get(key)
    if value is None:
        return default
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 1:
        raise ImportFileError(line, f"'{key}' must be a number from 0 to 1.")
    return float(value)


def _import_memory(cursor: Any, state: _State, record: dict[str, Any], line: int) -> bool:
    source = _str(record, "id", line, max_len=36)
    try:
        uuid.UUID(source)
    except ValueError:
        raise ImportFileError(line, "'id' must be a UUID.") from None
    if source in state.memories:
        raise ImportFileError(line, f"memory {source} appears twice.")
    new_id = (
        uuid.UUID(source)
        if state.same_workspace
        else uuid.uuid5(_NAMESPACE, f"{state.workspace_id}:{source}")
    )
    metadata = record.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise ImportFileError(line, "'metadata' must be an object or null.")
    created_at = _time(record, "createdAt", line, optional=False)
    values = [
        new_id,
        state.workspace_id,
        _str(record, "content", line, max_len=1_000_000),
        _choice(record, "type", line, _MEMORY_TYPES),
        _choice(record, "layer", line, _LAYERS),
        _choice(record, "scope", line, _SCOPES),
        _str(record, "projectId", line, max_len=240, optional=True),
        _str(record, "userId", line, max_len=120, optional=True),
        _str_list(record, "tags", line),
        _str_list(record, "paths", line),
        _str(record, "category", line, max_len=120, optional=True),
        _json(metadata),
        _str(record, "embeddingModel", line, max_len=160, optional=True),
        [flag[:40] for flag in _str_list(record, "injectionFlags", line)],
        _time(record, "expiresAt", line),
        created_at,
        _time(record, "updatedAt", line) or created_at,
        _time(record, "deletedAt", line),
        _fraction(record, "importance", line, default=0.5),
    ]
    superseded_by = _str(record, "supersededBy", line, max_len=36, optional=True)
    cursor.execute(
        """
        INSERT INTO memories (id, workspace_id, content, type, layer, scope, project_id, user_id, tags, paths,
                              category, metadata, embedding_model, injection_flags, expires_at, created_at,
                              updated_at, deleted_at, importance)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s, %s, %s)
        ON CONFLICT (id) DO NOTHING
        """,
        values,
    )
    created = cursor.rowcount == 1
    if not created:
        # The id exists: fine if it is this workspace's (a second run), never if it is another's (RLS hides
        # it).
        cursor.execute(
            "SELECT 1 FROM memories WHERE id = %s AND workspace_id = %s", [new_id, state.workspace_id]
        )
        if cursor.fetchone() is None:
            raise ImportFileError(
                line,
                f"memory {source} belongs to another workspace; import into the workspace "
                "it was exported from, or into a new one.",
            )
    else:
        if superseded_by:
            state.memory_supersessions.append((new_id, superseded_by))
        embedding_model = cast(str | None, values[12])  # the embeddingModel field
        state.created_memories[new_id] = embedding_model if record.get("deletedAt") is None else None
        if record.get("deletedAt") is not None:
            state.embedded.add(new_id)  # a forgotten memory needs no embedding
    state.memories[source] = new_id
    return created


def _import_embedding(cursor: Any, state: _State, record: dict[str, Any], line: int) -> bool:
    memory_id = _memory_ref(state, record, "memoryId", line)
    dimension = _int(record, "dimension", line)
    vector = _vector(record, "vector", line, dimension)
    if vector is None:
        raise ImportFileError(line, "'vector' is required.")
    cursor.execute(
        """
        INSERT INTO memory_embeddings (workspace_id, memory_id, model, dimension, embedding, content_sha256,
                                       user_id, scope, project_id, expires_at, created_at, updated_at)
        SELECT workspace_id, id, %s, %s, %s::vector, %s, user_id, scope, project_id, expires_at, now(), now()
        FROM memories WHERE id = %s AND workspace_id = %s
        ON CONFLICT (memory_id, model) DO NOTHING
        """,
        [
            _str(record, "model", line, max_len=160),
            dimension,
            vector,
            _str(record, "contentSha256", line, max_len=64),
            memory_id,
            state.workspace_id,
        ],
    )
    state.embedded.add(memory_id)
    return cursor.rowcount == 1


def _import_community(cursor: Any, state: _State, record: dict[str, Any], line: int) -> bool:
    source = _int(record, "id", line)
    members = record.get("memberNodeIds") or []
    if (
        not isinstance(members, list)
        or not all(isinstance(m, int) for m in members)
        or len(members) > 100_000
    ):
        raise ImportFileError(line, "'memberNodeIds' must be a list of node ids.")
    name = _str(record, "name", line, max_len=300)
    cursor.execute(
        """
        INSERT INTO graph_communities (workspace_id, name, summary, fingerprint, created_at, updated_at)
        VALUES (%s, %s, %s, %s, now(), now()) ON CONFLICT (workspace_id, name) DO NOTHING RETURNING id
        """,
        [
            state.workspace_id,
            name,
            _str(record, "summary", line, max_len=100_000, optional=True) or "",
            _str(record, "fingerprint", line, max_len=64),
        ],
    )
    row = cursor.fetchone()
    if row is None:
        cursor.execute(
            "SELECT id FROM graph_communities WHERE workspace_id = %s AND name = %s",
            [state.workspace_id, name],
        )
        state.communities[source] = cursor.fetchone()[0]
        return False
    state.communities[source] = row[0]
    return True


def _import_node(cursor: Any, state: _State, record: dict[str, Any], line: int) -> bool:
    source = _int(record, "id", line)
    node_type = _str(record, "nodeType", line, max_len=32)
    key = _str(record, "nodeKey", line, max_len=600)
    if node_type == "memory":
        key = str(_memory_ref(state, {"nodeKey": key}, "nodeKey", line))
    community_source = _int(record, "communityId", line, optional=True)
    community = state.communities.get(community_source) if community_source is not None else None
    if community_source is not None and community is None:
        raise ImportFileError(line, "'communityId' names a community that is not in this file.")
    metadata = record.get("metadata")  # any JSON value, as the producers store it
    mention_count = _int(record, "mentionCount", line, optional=True) or 0
    cursor.execute(
        """
        INSERT INTO graph_nodes (workspace_id, node_type, node_key, label, metadata, summary, embedding,
                                 embedding_model, first_seen_at, last_seen_at, mention_count, created_at,
                                 updated_at)
        VALUES (%s, %s, %s, %s, %s::jsonb, %s, %s::vector, %s, %s, %s, %s, now(), now())
        ON CONFLICT (workspace_id, node_type, node_key) DO NOTHING RETURNING id
        """,
        [
            state.workspace_id,
            node_type,
            key,
            _str(record, "label", line, max_len=300),
            _json(metadata),
            _str(record, "summary", line, max_len=100_000, optional=True),
            _vector(record, "embedding", line),
            _str(record, "embeddingModel", line, max_len=160, optional=True),
            _time(record, "firstSeenAt", line),
            _time(record, "lastSeenAt", line),
            mention_count,
        ],
    )
    row = cursor.fetchone()
    if row is None:
        cursor.execute(
            "SELECT id FROM graph_nodes WHERE workspace_id = %s AND node_type = %s AND node_key = %s",
            [state.workspace_id, node_type, key],
        )
        state.nodes[source] = cursor.fetchone()[0]
        return False
    state.nodes[source] = row[0]
    if community is not None:
        # Membership is a row of its own; an entity that was already here keeps its community.
        cursor.execute(
            "INSERT INTO graph_community_members (workspace_id, node_id, community_id) VALUES (%s, %s, %s)",
            [state.workspace_id, row[0], community],
        )
    return True


def _import_alias(cursor: Any, state: _State, record: dict[str, Any], line: int) -> bool:
    cursor.execute(
        "INSERT INTO graph_entity_aliases (workspace_id, node_id, alias, created_at) "
        "VALUES (%s, %s, %s, now()) ON CONFLICT DO NOTHING",
        [
            state.workspace_id,
            _node_ref(state, record, "nodeId", line),
            _str(record, "alias", line, max_len=600),
        ],
    )
    return cursor.rowcount == 1


def _import_edge(cursor: Any, state: _State, record: dict[str, Any], line: int) -> bool:
    source = _int(record, "id", line)
    from_node, to_node = (
        _node_ref(state, record, "fromNodeId", line),
        _node_ref(state, record, "toNodeId", line),
    )
    key = remap_edge_key(
        _str(record, "edgeKey", line, max_len=200), nodes=state.nodes, memories=state.memories
    )
    evidence = record.get("evidenceMemoryId")
    evidence_id = state.memories.get(evidence) if isinstance(evidence, str) else None
    expired_at = _time(record, "expiredAt", line)
    weight, confidence = record.get("weight", 1.0), record.get("confidence", 1.0)
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (weight, confidence)):
        raise ImportFileError(line, "'weight' and 'confidence' must be numbers.")
    metadata = record.get("metadata")
    if expired_at is not None:
        # Invalidated facts are history, outside the unique key: one with the same key and end is the same
        # row.
        cursor.execute(
            "SELECT id FROM graph_edges WHERE workspace_id = %s AND edge_key = %s AND expired_at = %s",
            [state.workspace_id, key, expired_at],
        )
        row = cursor.fetchone()
        if row is not None:
            state.edges[source] = row[0]
            return False
    cursor.execute(
        """
        INSERT INTO graph_edges (workspace_id, edge_key, from_node_id, to_node_id, edge_type, edge_class,
                                 weight, confidence, fact, evidence_memory_id, evidence_text, origin,
                                 valid_from, valid_to, created_at, updated_at, expired_at, expires_at,
                                 last_observed_at, retrieval_count, metadata)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, coalesce(%s, now()), now(), %s, %s,
                %s, 0, %s::jsonb)
        ON CONFLICT (workspace_id, edge_key) WHERE expired_at IS NULL DO NOTHING RETURNING id
        """,
        [
            state.workspace_id,
            key,
            from_node,
            to_node,
            _str(record, "edgeType", line, max_len=128),
            _choice(record, "edgeClass", line, _EDGE_CLASSES),
            float(weight),
            float(confidence),
            _str(record, "fact", line, max_len=100_000, optional=True),
            evidence_id,
            _str(record, "evidenceText", line, max_len=100_000, optional=True),
            _choice(record, "origin", line, _ORIGINS),
            _time(record, "validFrom", line),
            _time(record, "validTo", line),
            _time(record, "createdAt", line),
            expired_at,
            _time(record, "expiresAt", line),
            _time(record, "lastObservedAt", line),
            _json(metadata),
        ],
    )
    row = cursor.fetchone()
    if row is None:
        cursor.execute(
            "SELECT id FROM graph_edges WHERE workspace_id = %s AND edge_key = %s AND expired_at IS NULL",
            [state.workspace_id, key],
        )
        state.edges[source] = cursor.fetchone()[0]
        return False
    state.edges[source] = row[0]
    superseding = _int(record, "supersededById", line, optional=True)
    if superseding is not None:
        state.supersessions.append((row[0], superseding))
    return True


def _import_link(cursor: Any, state: _State, record: dict[str, Any], line: int) -> bool:
    cursor.execute(
        "INSERT INTO memory_node_links (workspace_id, memory_id, node_id, role, created_at) "
        "VALUES (%s, %s, %s, %s, now()) ON CONFLICT DO NOTHING",
        [
            state.workspace_id,
            _memory_ref(state, record, "memoryId", line),
            _node_ref(state, record, "nodeId", line),
            _choice(record, "role", line, _ROLES),
        ],
    )
    return cursor.rowcount == 1


_IMPORTERS = {
    "rollout": _import_setting(
        "rollout_configs",
        {
            "mode": lambda r, line: _choice(r, "mode", line, {"off", "shadow", "canary"}),
            "autopilot_enabled": _bool("autopilotEnabled"),
        },
    ),
    "retrieval_policy": _import_setting(
        "retrieval_policies",
        {
            "default_strategy": lambda r, line: _choice(r, "defaultStrategy", line, {"lexical", "hybrid"}),
            "default_autopilot_enabled": _bool("autopilotEnabled"),
            "ready_window_streak": lambda r, line: 0,
        },
    ),
    "graph_settings": _import_setting(
        "graph_settings",
        {
            "llm_daily_token_budget": lambda r, line: _int(r, "llmDailyTokenBudget", line, optional=True),
            "recall_strategy": lambda r, line: (
                _choice(r, "recallStrategy", line, {"bfs", "spreading"})
                if r.get("recallStrategy") is not None
                else "bfs"
            ),
            "decay_rate": lambda r, line: _rate(r.get("decayRate"), "decayRate", line),
            "decay_rates": lambda r, line: Jsonb(
                {k: _rate(v, f"decayRates.{k}", line) for k, v in _object(r, "decayRates", line).items()}
            ),
            "max_entities": lambda r, line: _int(r, "maxEntities", line, optional=True),
        },
    ),
    "memory_settings": _import_setting(
        "memory_settings",
        {
            "redact_credentials": _bool("redactCredentials"),
            "scrub_at_rest": _bool("scrubAtRest"),
            "admission_enabled": _bool("admissionEnabled"),
            "admission_threshold": lambda r, line: _fraction(r, "admissionThreshold", line, default=None),
            "importance_weight": lambda r, line: _fraction(r, "importanceWeight", line, default=None),
        },
    ),
    "memory": _import_memory,
    "embedding": _import_embedding,
    "community": _import_community,
    "node": _import_node,
    "alias": _import_alias,
    "edge": _import_edge,
    "link": _import_link,
}

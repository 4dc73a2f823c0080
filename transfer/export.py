"""Workspace export: a versioned JSON Lines stream read from one consistent snapshot of one workspace.

Line 1 is a header (format, version, what is inside), the last line a trailer with the count of each record
kind; an importer that does not find the trailer knows the file was cut. Records carry the source ids; the
importer remaps them. Order matters to the importer: memories before what points at them, nodes before edges
and links.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from django.db import connections, transaction

from memories.repair import json_cut
from memories.selectors import metadata_repaired, metadata_servable
from tenancy.rls import workspace_context

logger = logging.getLogger("cairn.transfer")

FORMAT = "cairn.workspace-export"
# 2 adds fact_evidence records (every memory that supports an entity fact). Version 1 files still import: a
# fact's recorded source becomes its evidence.
VERSION = 2
READABLE_VERSIONS = frozenset({1, 2})
BATCH = 500


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _jsonb(value: Any) -> Any:
    """A jsonb column as its JSON value: Django's raw cursor hands jsonb back as text, which written out as is
    would become a JSON string holding JSON, one level deeper on every export and import."""
    return json.loads(value) if isinstance(value, str) else value


def _memory_metadata(value: Any, *, memory_id: Any) -> Any:
    """A memory's metadata as today's rules accept it back (a row stored before them is exported repaired)."""
    metadata = _jsonb(value)
    if metadata is None or metadata_servable(metadata):
        return metadata
    logger.warning("export: memory %s has metadata the write rules refuse; exported repaired", memory_id)
    return metadata_repaired(metadata)


def _object(value: Any) -> dict[str, Any]:
    return _jsonb(value) or {}


def _finite(value: Any, *, what: str, row_id: Any) -> float:
    """A stored float as a JSON number: a NaN or Infinity (a row written before imports and models were
    checked) is exported as 0 and logged, so the line stays JSON and the importer's rules accept it."""
    number = float(value)
    if math.isfinite(number):
        return number
    logger.warning("export: %s of row %s is %s; exported as 0", what, row_id, number)
    return 0.0


def _vector(value: Any) -> list[float] | None:
    return None if value is None else [float(x) for x in value]


def _rows(sql: str, params: list[Any]) -> Iterator[dict[str, Any]]:
    # A named (server-side) cursor: a large workspace streams in batches instead of loading into memory.
    with connections["app"].chunked_cursor() as cursor:
        # On psycopg's cursor itself: Django's CursorWrapper keeps attribute writes to itself, which would
        # leave the server-side cursor fetching its default 100 rows per round trip.
        cursor.cursor.itersize = BATCH
        cursor.execute(sql, params)
        columns = [col[0] for col in cursor.description]
        for row in cursor:
            yield dict(zip(columns, row, strict=True))


def workspace_export_count(*, workspace_id: int) -> int:
    """Roughly how many lines an export will have (for a progress bar)."""
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute(
            """
            SELECT (SELECT count(*) FROM memories WHERE workspace_id = %(ws)s)
                 + (SELECT count(*) FROM graph_nodes WHERE workspace_id = %(ws)s)
                 + (SELECT count(*) FROM graph_edges WHERE workspace_id = %(ws)s)
                 + (SELECT count(*) FROM memory_node_links WHERE workspace_id = %(ws)s)
                 + (SELECT count(*) FROM graph_entity_aliases WHERE workspace_id = %(ws)s)
                 + (SELECT count(*) FROM graph_communities WHERE workspace_id = %(ws)s)
                 + (SELECT count(*) FROM graph_fact_evidence WHERE workspace_id = %(ws)s)
            """,
            {"ws": workspace_id},
        )
        return int(cursor.fetchone()[0])


def _conversation(row: dict[str, Any]) -> dict[str, Any] | None:
    """A turn's (or a session summary's) place in its session; None for any other memory. Snapshots are not
    exported: a session's transcript is taken again from its turns."""
    if row["session_id"] is None:
        return None
    return {
        "sessionId": str(row["session_id"]),
        "kind": row["turn_kind"],
        "turnIndex": row["turn_index"],
        "role": row["turn_role"],
        "speaker": row["speaker"],
        "saidAt": _iso(row["said_at"]),
    }


def workspace_export_records(*, workspace_id: int, include_embeddings: bool) -> Iterator[dict[str, Any]]:
    """Every record of the workspace, header and trailer included, from one REPEATABLE READ snapshot."""
    counts: dict[str, int] = {}

    def emit(kind: str, record: dict[str, Any]) -> dict[str, Any]:
        counts[kind] = counts.get(kind, 0) + 1
        return {"kind": kind, **record}

    ws = [workspace_id]
    nested = connections["app"].in_atomic_block  # inside a caller's transaction (a test) its snapshot applies
    with transaction.atomic(using="app"):
        if not nested:
            with connections["app"].cursor() as cursor:
                # Edges written while the export runs must not point at nodes the stream has already passed.
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        with workspace_context(workspace_id):
            yield {
                "kind": "header",
                "format": FORMAT,
                "version": VERSION,
                "exportedAt": datetime.now(UTC).isoformat(),
                "sourceWorkspaceId": workspace_id,
                "includesEmbeddings": include_embeddings,
            }
            for row in _rows(
                "SELECT mode, autopilot_enabled FROM rollout_configs WHERE workspace_id = %s", ws
            ):
                yield emit("rollout", {"mode": row["mode"], "autopilotEnabled": row["autopilot_enabled"]})
            for row in _rows(
                "SELECT default_strategy, default_autopilot_enabled FROM retrieval_policies "
                "WHERE workspace_id = %s",
                ws,
            ):
                yield emit(
                    "retrieval_policy",
                    {
                        "defaultStrategy": row["default_strategy"],
                        "autopilotEnabled": row["default_autopilot_enabled"],
                    },
                )
            for row in _rows(
                "SELECT llm_daily_token_budget, recall_strategy, decay_rate, decay_rates, max_entities "
                "FROM graph_settings WHERE workspace_id = %s",
                ws,
            ):
                yield emit(
                    "graph_settings",
                    {
                        "llmDailyTokenBudget": row["llm_daily_token_budget"],
                        "recallStrategy": row["recall_strategy"],
                        "decayRate": row["decay_rate"],
                        "decayRates": _object(row["decay_rates"]),
                        "maxEntities": row["max_entities"],
                    },
                )
            for row in _rows(
                "SELECT redact_credentials, scrub_at_rest, admission_enabled, admission_threshold, "
                "importance_weight, half_life_days, mmr_lambda FROM memory_settings WHERE workspace_id = %s",
                ws,
            ):
                yield emit(
                    "memory_settings",
                    {
                        "redactCredentials": row["redact_credentials"],
                        "scrubAtRest": row["scrub_at_rest"],
                        "admissionEnabled": row["admission_enabled"],
                        "admissionThreshold": row["admission_threshold"],
                        "importanceWeight": row["importance_weight"],
                        "halfLifeDays": row["half_life_days"],
                        "mmrLambda": row["mmr_lambda"],
                    },
                )
            for row in _rows(
                """SELECT id, content, type, layer, scope, project_id, user_id, tags, paths, category,
                          metadata, embedding_model, injection_flags, expires_at, created_at, updated_at,
                          deleted_at, importance, superseded_by, session_id, turn_kind, turn_index, turn_role,
                          speaker, said_at
                   FROM memories WHERE workspace_id = %s ORDER BY created_at, id""",
                ws,
            ):
                yield emit(
                    "memory",
                    {
                        "id": str(row["id"]),
                        "content": row["content"],
                        "type": row["type"],
                        "layer": row["layer"],
                        "scope": row["scope"],
                        "projectId": row["project_id"],
                        "userId": row["user_id"],
                        "tags": row["tags"],
                        "paths": row["paths"],
                        "category": row["category"],
                        "metadata": _memory_metadata(row["metadata"], memory_id=row["id"]),
                        "embeddingModel": row["embedding_model"],
                        "injectionFlags": row["injection_flags"],
                        "expiresAt": _iso(row["expires_at"]),
                        "createdAt": _iso(row["created_at"]),
                        "updatedAt": _iso(row["updated_at"]),
                        "deletedAt": _iso(row["deleted_at"]),
                        "importance": _finite(row["importance"], what="importance", row_id=row["id"]),
                        "supersededBy": str(row["superseded_by"]) if row["superseded_by"] else None,
                        "conversation": _conversation(row),
                    },
                )
            for row in _rows(
                """SELECT id, scope, project_id, user_id, client, title, status, metadata, turn_count,
                          token_count, next_turn_index, summary_memory_id, started_at, last_activity_at,
                          ended_at
                   FROM memory_sessions WHERE workspace_id = %s ORDER BY started_at, id""",
                ws,
            ):
                yield emit(
                    "session",
                    {
                        "id": str(row["id"]),
                        "scope": row["scope"],
                        "projectId": row["project_id"],
                        "userId": row["user_id"],
                        "client": row["client"],
                        "title": row["title"],
                        "status": row["status"],
                        "metadata": _memory_metadata(row["metadata"], memory_id=row["id"]),
                        "turnCount": row["turn_count"],
                        "tokenCount": row["token_count"],
                        "nextTurnIndex": row["next_turn_index"],
                        "summaryMemoryId": str(row["summary_memory_id"])
                        if row["summary_memory_id"]
                        else None,
                        "startedAt": _iso(row["started_at"]),
                        "lastActivityAt": _iso(row["last_activity_at"]),
                        "endedAt": _iso(row["ended_at"]),
                    },
                )
            for row in _rows(
                """SELECT scope, project_id, user_id, path, content, procedure_key, source_session_id,
                          usage_count, last_used_at, created_at, updated_at
                   FROM skill_files WHERE workspace_id = %s ORDER BY created_at, id""",
                ws,
            ):
                yield emit(
                    "skill_file",
                    {
                        "scope": row["scope"],
                        "projectId": row["project_id"],
                        "userId": row["user_id"],
                        "path": row["path"],
                        "content": row["content"],
                        "procedureKey": row["procedure_key"],
                        "sourceSessionId": str(row["source_session_id"])
                        if row["source_session_id"]
                        else None,
                        "usageCount": row["usage_count"],
                        "lastUsedAt": _iso(row["last_used_at"]),
                        "createdAt": _iso(row["created_at"]),
                        "updatedAt": _iso(row["updated_at"]),
                    },
                )
            if include_embeddings:
                for row in _rows(
                    "SELECT memory_id, model, dimension, embedding::text AS v, content_sha256 "
                    "FROM memory_embeddings WHERE workspace_id = %s ORDER BY id",
                    ws,
                ):
                    yield emit(
                        "embedding",
                        {
                            "memoryId": str(row["memory_id"]),
                            "model": row["model"],
                            "dimension": row["dimension"],
                            "vector": json.loads(row["v"]),
                            "contentSha256": row["content_sha256"],
                        },
                    )
            centroid_column = "c.centroid::text" if include_embeddings else "NULL::text"
            for row in _rows(
                f"SELECT c.id, c.name, c.summary, c.fingerprint, {centroid_column} AS centroid, "
                "c.centroid_model, ARRAY(SELECT m.node_id "
                "FROM graph_community_members m WHERE m.workspace_id = %s "
                "AND m.community_id = c.id ORDER BY m.node_id) AS member_node_ids "
                "FROM graph_communities c WHERE c.workspace_id = %s ORDER BY c.id",
                # The workspace named for both tables: a correlated c.workspace_id would send the subquery to
                # every shard on Citus.
                ws * 2,
            ):
                yield emit(
                    "community",
                    {
                        "id": row["id"],
                        "name": row["name"],
                        "summary": row["summary"],
                        "memberNodeIds": row["member_node_ids"],
                        "fingerprint": row["fingerprint"],
                        "centroid": json.loads(row["centroid"]) if row["centroid"] else None,
                        "centroidModel": row["centroid_model"] if row["centroid"] else None,
                    },
                )
            embedding_column = "embedding::text" if include_embeddings else "NULL::text"
            for row in _rows(
                f"""SELECT id, node_type, node_key, label, metadata, summary, {embedding_column} AS v,
                           embedding_model, first_seen_at, last_seen_at, mention_count, confidence,
                           m.community_id
                    FROM graph_nodes n
                    LEFT JOIN graph_community_members m
                        ON m.workspace_id = n.workspace_id AND m.node_id = n.id
                    WHERE n.workspace_id = %s ORDER BY id""",
                ws,
            ):
                yield emit(
                    "node",
                    {
                        "id": row["id"],
                        "nodeType": row["node_type"],
                        "nodeKey": row["node_key"],
                        "label": row["label"],
                        "metadata": json_cut(_jsonb(row["metadata"])),
                        "summary": row["summary"],
                        "embedding": json.loads(row["v"]) if row["v"] else None,
                        "embeddingModel": row["embedding_model"] if row["v"] else None,
                        "firstSeenAt": _iso(row["first_seen_at"]),
                        "lastSeenAt": _iso(row["last_seen_at"]),
                        "mentionCount": row["mention_count"],
                        "confidence": None
                        if row["confidence"] is None
                        else _finite(row["confidence"], what="confidence", row_id=row["id"]),
                        "communityId": row["community_id"],
                    },
                )
            for row in _rows(
                "SELECT node_id, alias FROM graph_entity_aliases WHERE workspace_id = %s ORDER BY id", ws
            ):
                yield emit("alias", {"nodeId": row["node_id"], "alias": row["alias"]})
            for row in _rows(
                """SELECT id, edge_key, from_node_id, to_node_id, edge_type, edge_class, weight, confidence,
                          fact, evidence_memory_id, evidence_text, origin, valid_from, valid_to, created_at,
                          expired_at, expires_at, last_observed_at, superseded_by_id, metadata
                   FROM graph_edges WHERE workspace_id = %s ORDER BY id""",
                ws,
            ):
                yield emit(
                    "edge",
                    {
                        "id": row["id"],
                        "edgeKey": row["edge_key"],
                        "fromNodeId": row["from_node_id"],
                        "toNodeId": row["to_node_id"],
                        "edgeType": row["edge_type"],
                        "edgeClass": row["edge_class"],
                        "weight": _finite(row["weight"], what="weight", row_id=row["id"]),
                        "confidence": _finite(row["confidence"], what="confidence", row_id=row["id"]),
                        "fact": row["fact"],
                        "evidenceMemoryId": str(row["evidence_memory_id"])
                        if row["evidence_memory_id"]
                        else None,
                        "evidenceText": row["evidence_text"],
                        "origin": row["origin"],
                        "validFrom": _iso(row["valid_from"]),
                        "validTo": _iso(row["valid_to"]),
                        "createdAt": _iso(row["created_at"]),
                        "expiredAt": _iso(row["expired_at"]),
                        "expiresAt": _iso(row["expires_at"]),
                        "lastObservedAt": _iso(row["last_observed_at"]),
                        "supersededById": row["superseded_by_id"],
                        "metadata": json_cut(_jsonb(row["metadata"])),
                    },
                )
            for row in _rows(
                """SELECT edge_id, memory_id, evidence_text, created_at FROM graph_fact_evidence
                   WHERE workspace_id = %s ORDER BY id""",
                ws,
            ):
                # The memory's end user is not exported: the importer reads it from the imported memory.
                yield emit(
                    "fact_evidence",
                    {
                        "edgeId": row["edge_id"],
                        "memoryId": str(row["memory_id"]),
                        "evidenceText": row["evidence_text"],
                        "createdAt": _iso(row["created_at"]),
                    },
                )
            for row in _rows(
                "SELECT memory_id, node_id, role FROM memory_node_links WHERE workspace_id = %s ORDER BY id",
                ws,
            ):
                yield emit(
                    "link", {"memoryId": str(row["memory_id"]), "nodeId": row["node_id"], "role": row["role"]}
                )
            yield {"kind": "trailer", "counts": counts}


def workspace_export_lines(*, workspace_id: int, include_embeddings: bool) -> Iterator[bytes]:
    for record in workspace_export_records(workspace_id=workspace_id, include_embeddings=include_embeddings):
        line = json.dumps(record, separators=(",", ":"), ensure_ascii=False, default=str, allow_nan=False)
        yield (line + "\n").encode()

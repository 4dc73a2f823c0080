"""Vector storage and scoped nearest-neighbour search in pgvector.

Access path per workspace size (measured in bench/vector_search.py):
- small workspaces (≤ VECTOR_EXACT_MAX_ROWS vectors of one dimension): an exact scan of the workspace's rows
  through the (workspace_id, model) btree — exact recall, a few milliseconds;
- large workspaces: a partial HNSW index per (workspace, dimension), built in the background once the workspace
  crosses the threshold, queried with pgvector's iterative scan so the scope filters (user, project, expiry) never
  starve the result, then re-ranked exactly.
The scope columns are copied onto memory_embeddings so the filter runs inside the index scan instead of after a
join. Every vector records its model and dimension; searches filter on the model, so models are never mixed.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from django.conf import settings
from django.db import connections

logger = logging.getLogger("cairn.vectors")


@dataclass(frozen=True)
class VectorScope:
    """The read scope of memories-sh.md §1.3, applied to copied columns of memory_embeddings."""

    user_id: str | None
    project_id: str | None


def vector_literal(vector: np.ndarray) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def content_hash(content: str) -> str:
    return hashlib.sha256(content.encode()).hexdigest()


@dataclass(frozen=True)
class EmbeddingRow:
    memory_id: uuid.UUID
    user_id: str | None
    scope: str
    project_id: str | None
    expires_at: datetime | None
    content_sha256: str
    vector: np.ndarray


def embeddings_store(*, workspace_id: int, model: str, rows: list[EmbeddingRow]) -> None:
    """Insert or replace one vector per (memory, model). Idempotent."""
    if not rows:
        return
    dimension = int(rows[0].vector.shape[0])
    with connections["app"].cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO memory_embeddings (workspace_id, memory_id, model, dimension, embedding, content_sha256,
                user_id, scope, project_id, expires_at, created_at, updated_at)
            SELECT %s, memory_id, %s, %s, embedding::vector, content_sha256, user_id, scope, project_id, expires_at,
                now(), now()
            FROM unnest(%s::uuid[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::timestamptz[])
                AS r(memory_id, embedding, content_sha256, user_id, scope, project_id, expires_at)
            ON CONFLICT (memory_id, model) DO UPDATE SET
                embedding = EXCLUDED.embedding, dimension = EXCLUDED.dimension,
                content_sha256 = EXCLUDED.content_sha256, user_id = EXCLUDED.user_id, scope = EXCLUDED.scope,
                project_id = EXCLUDED.project_id, expires_at = EXCLUDED.expires_at, updated_at = now()
            """,
            [
                workspace_id,
                model,
                dimension,
                [row.memory_id for row in rows],
                [vector_literal(row.vector) for row in rows],
                [row.content_sha256 for row in rows],
                [row.user_id for row in rows],
                [row.scope for row in rows],
                [row.project_id for row in rows],
                [row.expires_at for row in rows],
            ],
        )


def stored_vector(*, workspace_id: int, memory_id: uuid.UUID, model: str) -> np.ndarray | None:
    with connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT embedding::text FROM memory_embeddings WHERE workspace_id = %s AND memory_id = %s AND model = %s",
            [workspace_id, memory_id, model],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    return np.asarray([float(x) for x in row[0].strip("[]").split(",")], dtype=np.float32)


def embeddings_delete(*, workspace_id: int, memory_ids: list[uuid.UUID]) -> None:
    with connections["app"].cursor() as cursor:
        cursor.execute(
            "DELETE FROM memory_embeddings WHERE workspace_id = %s AND memory_id = ANY(%s)", [workspace_id, memory_ids]
        )


def embeddings_update_expiry(*, workspace_id: int, memory_id: uuid.UUID, expires_at: datetime | None) -> None:
    with connections["app"].cursor() as cursor:
        cursor.execute(
            "UPDATE memory_embeddings SET expires_at = %s WHERE workspace_id = %s AND memory_id = %s",
            [expires_at, workspace_id, memory_id],
        )


# --- search ---------------------------------------------------------------------------------------------------


def hnsw_index_name(workspace_id: int, dimension: int) -> str:
    return f"memory_embeddings_hnsw_w{int(workspace_id)}_d{int(dimension)}"


def hnsw_index_ready(*, workspace_id: int, dimension: int) -> bool:
    with connections["app"].cursor() as cursor:
        cursor.execute(
            """
            SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid
            WHERE c.relname = %s
            """,
            [hnsw_index_name(workspace_id, dimension)],
        )
        row = cursor.fetchone()
    return bool(row and row[0])


def _scope_filter(scope: VectorScope, params: list[object]) -> str:
    clauses = ["(e.expires_at IS NULL OR e.expires_at > now())"]
    if scope.user_id:
        clauses.append("(e.user_id IS NULL OR e.user_id = %s)")
        params.append(scope.user_id)
    else:
        clauses.append("e.user_id IS NULL")
    if scope.project_id:
        clauses.append("(e.scope = 'global' OR (e.scope = 'project' AND e.project_id = %s))")
        params.append(scope.project_id)
    else:
        clauses.append("e.scope = 'global'")
    return " AND ".join(clauses)


def nearest(
    *,
    workspace_id: int,
    model: str,
    query: np.ndarray,
    scope: VectorScope,
    limit: int,
    exclude: uuid.UUID | None = None,
) -> list[tuple[uuid.UUID, float]]:
    """The `limit` memories closest to `query` (cosine similarity, best first) within the read scope."""
    dimension = int(query.shape[0])
    literal = vector_literal(query)
    params: list[object] = []
    where = _scope_filter(scope, params)
    if exclude is not None:
        where += " AND e.memory_id <> %s"
        params.append(exclude)
    # Integers are formatted into the SQL on purpose: the planner can only match a partial index against
    # literal predicates (and a typed cast needs a literal dimension).
    workspace_sql, dimension_sql = int(workspace_id), int(dimension)
    with connections["app"].cursor() as cursor:
        if hnsw_index_ready(workspace_id=workspace_id, dimension=dimension):
            cursor.execute("SELECT set_config('hnsw.ef_search', %s, true)", [str(settings.VECTOR_HNSW_EF_SEARCH)])
            cursor.execute("SELECT set_config('hnsw.iterative_scan', 'strict_order', true)")
            cursor.execute("SELECT set_config('hnsw.max_scan_tuples', %s, true)", [str(settings.VECTOR_HNSW_MAX_SCAN)])
            sql = f"""
                SELECT e.memory_id, 1 - ((e.embedding::vector({dimension_sql})) <=> %s::vector({dimension_sql}))
                FROM memory_embeddings e
                WHERE e.workspace_id = {workspace_sql} AND e.dimension = {dimension_sql} AND e.model = %s AND {where}
                ORDER BY (e.embedding::vector({dimension_sql})) <=> %s::vector({dimension_sql})
                LIMIT %s
            """
        else:
            sql = f"""
                SELECT e.memory_id, 1 - (e.embedding <=> %s::vector)
                FROM memory_embeddings e
                WHERE e.workspace_id = {workspace_sql} AND e.dimension = {dimension_sql} AND e.model = %s AND {where}
                ORDER BY e.embedding <=> %s::vector
                LIMIT %s
            """
        cursor.execute(sql, [literal, model, *params, literal, limit])
        return [(row[0], float(row[1])) for row in cursor.fetchall()]


def workspace_vector_count(*, workspace_id: int, dimension: int) -> int:
    with connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM memory_embeddings WHERE workspace_id = %s AND dimension = %s",
            [workspace_id, dimension],
        )
        return int(cursor.fetchone()[0])


def hnsw_index_ensure(*, workspace_id: int, dimension: int) -> bool:
    """Build the workspace's partial HNSW index (as the owner: DDL), without blocking writes. Safe to repeat."""
    name = hnsw_index_name(workspace_id, dimension)
    owner = connections["default"]
    owner.ensure_connection()
    with owner.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(hashtext(%s))", [name])
        if not cursor.fetchone()[0]:
            return False  # another worker is building it
        try:
            cursor.execute(
                "SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid WHERE c.relname = %s",
                [name],
            )
            row = cursor.fetchone()
            if row and row[0]:
                return True
            if row and not row[0]:
                cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")  # a failed earlier build
            cursor.execute(f"SET maintenance_work_mem = '{int(settings.VECTOR_INDEX_BUILD_MEMORY_MB)}MB'")
            cursor.execute(
                f"""
                CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON memory_embeddings
                USING hnsw ((embedding::vector({int(dimension)})) vector_cosine_ops)
                WITH (m = 16, ef_construction = 128)
                WHERE workspace_id = {int(workspace_id)} AND dimension = {int(dimension)}
                """
            )
            logger.info("built %s", name)
            return True
        finally:
            cursor.execute("SELECT pg_advisory_unlock(hashtext(%s))", [name])


def vector_state(*, workspace_id: int, model: str) -> tuple[int, str]:
    """How many vectors of `model` the workspace has and which access path searches take."""
    with connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT dimension, count(*) FROM memory_embeddings WHERE workspace_id = %s AND model = %s GROUP BY 1",
            [workspace_id, model],
        )
        rows = cursor.fetchall()
    count = sum(row[1] for row in rows)
    indexed = any(hnsw_index_ready(workspace_id=workspace_id, dimension=row[0]) for row in rows)
    return count, "hnsw" if indexed else "exact"


def neighbours_of_memories(
    *, workspace_id: int, model: str, memory_ids: list[uuid.UUID], limit: int
) -> dict[uuid.UUID, list[tuple[uuid.UUID, float]]]:
    """Nearest neighbours of many stored memories in one query, each within its own read scope.

    A memory's read scope (memories-sh.md §1.3) is taken from its own columns: shared memories plus its user's,
    global memories plus its project's. Used by the similarity step, which handles a whole batch at once.
    """
    if not memory_ids:
        return {}
    result: dict[uuid.UUID, list[tuple[uuid.UUID, float]]] = {memory_id: [] for memory_id in memory_ids}
    with connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT dimension FROM memory_embeddings WHERE workspace_id = %s AND model = %s "
            "AND memory_id = ANY(%s)",
            [workspace_id, model, memory_ids],
        )
        dimensions = [row[0] for row in cursor.fetchall()]
        for dimension in dimensions:
            workspace_sql, dimension_sql = int(workspace_id), int(dimension)
            if hnsw_index_ready(workspace_id=workspace_id, dimension=dimension):
                cursor.execute("SELECT set_config('hnsw.ef_search', %s, true)", [str(settings.VECTOR_HNSW_EF_SEARCH)])
                cursor.execute("SELECT set_config('hnsw.iterative_scan', 'strict_order', true)")
                cursor.execute("SELECT set_config('hnsw.max_scan_tuples', %s, true)",
                               [str(settings.VECTOR_HNSW_MAX_SCAN)])
                distance = f"(e.embedding::vector({dimension_sql})) <=> (q.embedding::vector({dimension_sql}))"
            else:
                distance = "e.embedding <=> q.embedding"
            cursor.execute(
                f"""
                SELECT q.memory_id, n.memory_id, n.score
                FROM memory_embeddings q
                CROSS JOIN LATERAL (
                    SELECT e.memory_id, 1 - ({distance}) AS score
                    FROM memory_embeddings e
                    WHERE e.workspace_id = {workspace_sql} AND e.dimension = {dimension_sql} AND e.model = %(model)s
                      AND e.memory_id <> q.memory_id
                      AND (e.expires_at IS NULL OR e.expires_at > now())
                      AND (e.user_id IS NULL OR e.user_id = q.user_id)
                      AND (e.scope = 'global' OR (e.scope = 'project' AND e.project_id = q.project_id))
                    ORDER BY {distance}
                    LIMIT %(limit)s
                ) n
                WHERE q.workspace_id = {workspace_sql} AND q.dimension = {dimension_sql} AND q.model = %(model)s
                  AND q.memory_id = ANY(%(ids)s)
                ORDER BY q.memory_id, n.score DESC
                """,
                {"model": model, "limit": limit, "ids": memory_ids},
            )
            for source, neighbour, score in cursor.fetchall():
                result[source].append((neighbour, float(score)))
    return result

"""Vector storage and scoped nearest-neighbour search in pgvector.

Access paths (measured in bench/vector_search.py, see bench/README.md):
- small workspaces (≤ VECTOR_EXACT_MAX_ROWS vectors of one dimension): an exact scan of the workspace's rows
  through the (workspace_id, model) btree — exact recall, about 1.3 µs per row;
- large workspaces get two partial indexes per (workspace, dimension), built in the background once the
  workspace crosses the threshold:
  - an HNSW index over the vectors cast to halfvec, queried with pgvector's iterative scan so the scope
    filters (user, project, expiry) never starve the result; its candidates are re-ranked with the stored
    float4 vectors;
  - a btree on user_id: when the read scope leaves at most VECTOR_EXACT_MAX_SCOPED_ROWS rows visible (an end
    user's own memories in a big tenant), those rows are found through it and scanned exactly instead.
The scope columns are copied onto memory_embeddings so the filter runs inside the index scan instead of after
a join. Every vector records its model and dimension; searches filter on the model, so models are never
mixed.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connections
from django.db.backends.utils import CursorWrapper

from config.prepared import prepared_cursor
from memories.selectors import MemoryScope, ReadRule, read_rule

logger = logging.getLogger("cairn.vectors")


@dataclass(frozen=True)
class VectorScope:
    """The read scope of memories (shared + the user's, global + the project's, not expired; every user's and
    project's when workspace-wide), applied to the copied columns of memory_embeddings through the read rule
    (memories.selectors.read_rule)."""

    user_id: str | None
    project_id: str | None
    workspace_wide: bool = False

    def memory_scope(self) -> MemoryScope:
        return MemoryScope(
            user_id=self.user_id, project_id=self.project_id, workspace_wide=self.workspace_wide
        )


def vector_literal(vector: np.ndarray) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


@functools.lru_cache(maxsize=512)
def _query_literal(data: bytes, dtype: str) -> str:
    """vector_literal of a query vector, remembered: search caches query vectors per text (an agent repeats
    its questions), and formatting 384 floats costs more than the lookup."""
    return vector_literal(np.frombuffer(data, dtype=np.dtype(dtype)))


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
            INSERT INTO memory_embeddings (workspace_id, memory_id, model, dimension, embedding,
                content_sha256, user_id, scope, project_id, expires_at, created_at, updated_at)
            SELECT %s, memory_id, %s, %s, embedding::vector, content_sha256, user_id, scope, project_id,
                expires_at, now(), now()
            FROM unnest(%s::uuid[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[],
                        %s::timestamptz[])
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


def embeddings_delete(*, workspace_id: int, memory_ids: list[uuid.UUID]) -> None:
    with connections["app"].cursor() as cursor:
        cursor.execute(
            "DELETE FROM memory_embeddings WHERE workspace_id = %s AND memory_id = ANY(%s)",
            [workspace_id, memory_ids],
        )


def embeddings_update_expiry(*, workspace_id: int, memory_id: uuid.UUID, expires_at: datetime | None) -> None:
    with connections["app"].cursor() as cursor:
        cursor.execute(
            "UPDATE memory_embeddings SET expires_at = %s WHERE workspace_id = %s AND memory_id = %s",
            [expires_at, workspace_id, memory_id],
        )


# --- search -------------------------------------------------------------------------------------------------


def hnsw_index_name(workspace_id: int, dimension: int) -> str:
    # "hnswh": the halfvec index. The float4 one had the name without the "h"; a new name means an index built
    # to the old definition (which searches no longer use) is never taken for a ready one. hnsw_index_ensure
    # drops it.
    return f"memory_embeddings_hnswh_w{int(workspace_id)}_d{int(dimension)}"


def users_index_name(workspace_id: int, dimension: int) -> str:
    return f"memory_embeddings_users_w{int(workspace_id)}_d{int(dimension)}"


def _legacy_hnsw_index_name(workspace_id: int, dimension: int) -> str:
    return f"memory_embeddings_hnsw_w{int(workspace_id)}_d{int(dimension)}"


def hnsw_order(dimension: int, left: str, right: str) -> str:
    """The distance the HNSW index is built on; an ORDER BY must spell it exactly like this to use the index.

    halfvec halves the index (a 100k-vector 384-d index takes 112 MiB instead of 195 MiB), so twice as much of
    it stays in shared buffers, and raises pgvector's HNSW limit from 2,000 to 4,000 dimensions. Embeddings
    are L2-normalised (retrieval.embeddings), so every component fits half precision; the ~1e-3 relative
    rounding only decides which candidates are fetched, and callers rank those with the full float4 vectors.
    """
    return f"({left}::halfvec({int(dimension)})) <=> ({right}::halfvec({int(dimension)}))"


def hnsw_index_ready(*, workspace_id: int, dimension: int) -> bool:
    """Whether the workspace's search indexes (HNSW and user btree, see hnsw_index_ensure) are built and
    valid."""
    names = [hnsw_index_name(workspace_id, dimension), users_index_name(workspace_id, dimension)]
    with connections["app"].cursor() as cursor:
        cursor.execute(
            """
            SELECT count(*) FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid
            WHERE c.relname = ANY(%s) AND i.indisvalid
            """,
            [names],
        )
        return cursor.fetchone()[0] == len(names)


# (workspace, dimension) → (monotonic expiry, ready): searches trust the catalogue's answer this long. Either
# way a stale answer costs speed, never results: a search planned for a dropped index scans, and a workspace
# whose index was just built keeps its exact scan up to a minute longer. The builder (pipeline,
# hnsw_index_ensure) always asks the catalogue.
_INDEX_READY: dict[tuple[int, int], tuple[float, bool]] = {}
INDEX_READY_SECONDS = 60.0


def _hnsw_index_ready_for_search(*, workspace_id: int, dimension: int) -> bool:
    key = (workspace_id, dimension)
    cached = _INDEX_READY.get(key)
    if cached is not None and cached[0] > time.monotonic():
        return cached[1]
    ready = hnsw_index_ready(workspace_id=workspace_id, dimension=dimension)
    if len(_INDEX_READY) > 100_000:
        _INDEX_READY.clear()
    _INDEX_READY[key] = (time.monotonic() + INDEX_READY_SECONDS, ready)
    return ready


def _read_rule(scope: VectorScope, params: dict[str, Any]) -> ReadRule:
    """The read rule on memory_embeddings e (the workspace is pinned by the statement, as a literal)."""
    return read_rule(scope.memory_scope(), params, alias="e", embeddings=True, workspace=False)


def _user_conditions(rule: ReadRule) -> tuple[str, ...]:
    """One condition per user_id value the scope sees (a workspace-wide scope: one that holds for all)."""
    return rule.users or ("TRUE",)


def _scope_filter(rule: ReadRule, *, exclude: bool) -> str:
    """The read rule except its users (see _user_conditions), and the memory to leave out (%(exclude)s)."""
    return rule.others_sql + (" AND e.memory_id <> %(exclude)s" if exclude else "")


def _indexed_search_setup(
    cursor: CursorWrapper, *, workspace_id: int, dimension: int, scope: VectorScope
) -> int:
    """Set this transaction's search parameters and count the rows the scope can see, in one round trip.

    The count stops at VECTOR_EXACT_MAX_SCOPED_ROWS + 1 (the caller only needs to know whether it is over) and
    reads only the user btree, as index-only scans; it ignores the model, project and expiry filters, so it
    can only overstate, which sends a search to the HNSW index, never to an exact scan that is too big.
    """
    bound = int(settings.VECTOR_EXACT_MAX_SCOPED_ROWS) + 1
    key = (workspace_id, dimension, scope.user_id, scope.workspace_wide)
    known_over = _SCOPE_OVER_BOUND.get(key, 0.0) > time.monotonic()
    if known_over and getattr(cursor.db, "cairn_hnsw_session", False):
        # Nothing to count, and this connection carries the search parameters for its whole session
        # (search_settings_ensure): no round trip. The planner setting below only matters to the exact scans;
        # the HNSW scan this leads to is never parallel.
        return bound
    rows = f"e.workspace_id = {int(workspace_id)} AND e.dimension = {int(dimension)}"
    params: dict[str, Any] = {
        "ef_search": str(settings.VECTOR_HNSW_EF_SEARCH),
        "max_scan": str(settings.VECTOR_HNSW_MAX_SCAN),
    }
    counts = " + ".join(
        f"(SELECT count(*) FROM (SELECT 1 FROM memory_embeddings e WHERE {rows} AND {user} LIMIT {bound}) s)"
        for user in _user_conditions(_read_rule(scope, params))
    )
    cursor.execute(
        f"""
        SELECT set_config('hnsw.ef_search', %(ef_search)s, true),
               set_config('hnsw.iterative_scan', 'strict_order', true),
               set_config('hnsw.max_scan_tuples', %(max_scan)s, true),
               -- The planner sees user_id statistics of the whole table, not of this workspace, and may
               -- expect most of the workspace where a scope sees a few rows; a parallel plan would then only
               -- add the start-up of its workers.
               set_config('max_parallel_workers_per_gather', '0', true),
               {bound if known_over else counts}
        """,
        params,
    )
    visible = int(cursor.fetchone()[-1])
    if visible >= bound and not known_over:
        # A scope over the bound stays over it for a while (it only shrinks by deletions), so its count is
        # skipped for INDEX_READY_SECONDS: a stale answer sends a scope that just fell under the bound to the
        # HNSW scan, which still answers (at 5 % of 100k rows as fast as the exact scan). Under the bound it
        # is counted on every search: it may grow past it at any moment.
        if len(_SCOPE_OVER_BOUND) > 100_000:
            _SCOPE_OVER_BOUND.clear()
        _SCOPE_OVER_BOUND[key] = time.monotonic() + INDEX_READY_SECONDS
    return visible


def search_settings_ensure(sender: object, connection: Any, **kwargs: object) -> None:
    """The HNSW search parameters for the runtime connection's whole session, set once on connect.

    Every HNSW search sets the same values (ef_search, strict-order iterative scan, the scan bound); as
    session settings, a search of a wide scope whose size is already known needs no set-up round trip
    (_indexed_search_setup). Only with GRAPH_PREPARED_STATEMENTS, which already assumes one server session per
    connection: behind a pooler in transaction mode the per-search settings stay the only ones."""
    if (
        connection.alias != "app"
        or connection.vendor != "postgresql"
        or not settings.GRAPH_PREPARED_STATEMENTS
    ):
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('hnsw.ef_search', %s, false),"
            " set_config('hnsw.iterative_scan', 'strict_order', false),"
            " set_config('hnsw.max_scan_tuples', %s, false)",
            [str(settings.VECTOR_HNSW_EF_SEARCH), str(settings.VECTOR_HNSW_MAX_SCAN)],
        )
    connection.cairn_hnsw_session = True


# (workspace, dimension, user) → until when its scope is known to see more than VECTOR_EXACT_MAX_SCOPED_ROWS
# rows.
_SCOPE_OVER_BOUND: dict[tuple[int, int, str | None, bool], float] = {}


@dataclass(frozen=True)
class NearestStatement:
    """A nearest-neighbour search as SQL: it selects memory_id and similarity (cosine), best first, and orders
    by `distance`, which it selects too. `prepared`: whether it may run prepared (config.prepared)."""

    sql: str
    params: dict[str, Any]
    prepared: bool


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
    statement = nearest_statement(
        workspace_id=workspace_id, model=model, query=query, scope=scope, limit=limit, exclude=exclude
    )
    with prepared_cursor() if statement.prepared else connections["app"].cursor() as cursor:
        cursor.execute(statement.sql, statement.params)
        return [(row[0], float(row[1])) for row in cursor.fetchall()]


def nearest_statement(
    *,
    workspace_id: int,
    model: str,
    query: np.ndarray,
    scope: VectorScope,
    limit: int,
    exclude: uuid.UUID | None = None,
    with_vectors: bool = False,
) -> NearestStatement:
    """The search nearest() runs, for a caller that builds on it (context/get loads the memories in the same
    statement). Choosing the access path may take a round trip of its own (_indexed_search_setup).
    `with_vectors`: it also selects each neighbour's `embedding` (MMR compares the candidates with each other;
    the rows are read for their distance anyway, so this spares a statement).

    Every path picks at most `limit` candidates in a subquery and ranks them by their exact float4 distance,
    computed once per row: the exact scans order by it directly, the HNSW scan orders by the halfvec distance.
    """
    dimension = int(query.shape[0])
    params: dict[str, Any] = {
        "query": _query_literal(query.tobytes(), query.dtype.str),
        "model": model,
        "exclude": exclude,
        "limit": limit,
    }
    # Integers are formatted into the SQL on purpose: the planner can only match a partial index against
    # literal predicates (and a typed cast needs a literal dimension).
    rows = f"e.workspace_id = {int(workspace_id)} AND e.dimension = {int(dimension)} AND e.model = %(model)s"
    rule = _read_rule(scope, params)
    scope_filter = _scope_filter(rule, exclude=exclude is not None)
    vector, vector_out = (", e.embedding", ", embedding") if with_vectors else ("", "")
    distance = "e.embedding <=> %(query)s::vector"
    with connections["app"].cursor() as cursor:
        indexed = _hnsw_index_ready_for_search(workspace_id=workspace_id, dimension=dimension)
        visible = (
            _indexed_search_setup(cursor, workspace_id=workspace_id, dimension=dimension, scope=scope)
            if indexed
            else None
        )
        if visible is None:  # small workspace: every row through the (workspace_id, model, dimension) btree
            candidates = f"""
                SELECT e.memory_id, {distance} AS distance{vector} FROM memory_embeddings e
                WHERE {rows} AND {rule.user_sql} AND {scope_filter}
                ORDER BY distance LIMIT %(limit)s
            """
        elif visible <= settings.VECTOR_EXACT_MAX_SCOPED_ROWS:
            # A narrow scope in a large workspace (an end user's memories in a big tenant): the HNSW scan
            # would fetch and discard other users' rows one heap page at a time (about a hundred per hit when
            # 1 % is visible) and still miss some. One branch per user value, so each is an index condition on
            # the user btree; as a single OR the planner may scan the whole workspace instead.
            branches = " UNION ALL ".join(
                f"SELECT e.memory_id, {distance} AS distance{vector} FROM memory_embeddings e "
                f"WHERE {rows} AND {user} AND {scope_filter}"
                for user in _user_conditions(rule)
            )
            candidates = (
                f"SELECT memory_id, distance{vector_out} FROM ({branches}) visible "
                "ORDER BY distance LIMIT %(limit)s"
            )
        else:
            candidates = f"""
                SELECT e.memory_id, {distance} AS distance{vector} FROM memory_embeddings e
                WHERE {rows} AND {rule.user_sql} AND {scope_filter}
                ORDER BY {hnsw_order(dimension, "e.embedding", "%(query)s")} LIMIT %(limit)s
            """
    # A large workspace's search runs prepared: the workspace and dimension are literals in the text (partial
    # indexes), so its generic plan is the custom one, without planning on every search (0.7 of its ~4.5 ms of
    # PostgreSQL CPU on the 100k bench). Large workspaces are few. A small workspace's is planned each time:
    # with its workspace in the text, every small workspace would prepare a statement of its own, and past
    # psycopg's 100 per connection a busy server would plan, evict and deallocate (a round trip of its own) on
    # most searches; bound instead, the generic plan cannot know the workspace is small and may scan the whole
    # table.
    return NearestStatement(
        f"SELECT memory_id, 1 - distance AS similarity, distance{vector_out} FROM ({candidates}) candidates "
        "ORDER BY distance",
        params,
        prepared=visible is not None,
    )


def workspace_vector_count(*, workspace_id: int, dimension: int) -> int:
    with connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM memory_embeddings WHERE workspace_id = %s AND dimension = %s",
            [workspace_id, dimension],
        )
        return int(cursor.fetchone()[0])


def hnsw_index_ensure(*, workspace_id: int, dimension: int) -> bool:
    """Build the workspace's search indexes (as the owner: DDL), without blocking writes. Safe to repeat.

    Both are partial indexes on the workspace's rows of one dimension: the user btree (seconds) and the HNSW
    index over the halfvec cast (about a minute per 100k rows on two cores). ef_construction = 256 rather than
    128: the (parallel) builds with 128 in bench/vector_search.py left some rows unreachable, so a few queries
    in a hundred missed a neighbour at any ef_search, and some found none; 256 costs about 20 % more build
    time. m = 24 or 32 did not do better than m = 16 and makes the index bigger and searches slower.
    """
    name = hnsw_index_name(workspace_id, dimension)
    rows = f"workspace_id = {int(workspace_id)} AND dimension = {int(dimension)}"
    indexes = [
        (users_index_name(workspace_id, dimension), f"(user_id) WHERE {rows}"),
        (
            name,
            f"USING hnsw ((embedding::halfvec({int(dimension)})) halfvec_cosine_ops) "
            f"WITH (m = 16, ef_construction = 256) WHERE {rows}",
        ),
    ]
    owner = connections["default"]
    owner.ensure_connection()
    with owner.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(hashtext(%s))", [name])
        if not cursor.fetchone()[0]:
            return False  # another worker is building it
        try:
            cursor.execute(f"SET maintenance_work_mem = '{int(settings.VECTOR_INDEX_BUILD_MEMORY_MB)}MB'")
            for index, definition in indexes:
                cursor.execute(
                    "SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
                    "WHERE c.relname = %s",
                    [index],
                )
                row = cursor.fetchone()
                if row and row[0]:
                    continue
                if row:
                    cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index}")  # a failed earlier build
                cursor.execute(
                    f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {index} ON memory_embeddings {definition}"
                )
                logger.info("built %s", index)
            # The float4 HNSW index of earlier versions: searches no longer use it, writes would still pay for
            # it.
            cursor.execute(
                f"DROP INDEX CONCURRENTLY IF EXISTS {_legacy_hnsw_index_name(workspace_id, dimension)}"
            )
            return True
        finally:
            cursor.execute("SELECT pg_advisory_unlock(hashtext(%s))", [name])


def vector_state(*, workspace_id: int, model: str) -> tuple[int, str]:
    """How many vectors of `model` the workspace has and which access path searches take."""
    with connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT dimension, count(*) FROM memory_embeddings "
            "WHERE workspace_id = %s AND model = %s GROUP BY 1",
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

    A memory's read scope is taken from its own columns: shared memories plus its user's, global memories
    plus its project's. Used by the similarity step, which handles a whole batch at
    once.
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
                cursor.execute(
                    "SELECT set_config('hnsw.ef_search', %s, true)", [str(settings.VECTOR_HNSW_EF_SEARCH)]
                )
                cursor.execute("SELECT set_config('hnsw.iterative_scan', 'strict_order', true)")
                cursor.execute(
                    "SELECT set_config('hnsw.max_scan_tuples', %s, true)",
                    [str(settings.VECTOR_HNSW_MAX_SCAN)],
                )
                order = hnsw_order(dimension_sql, "e.embedding", "q.embedding")
            else:
                order = "e.embedding <=> q.embedding"
            owner_rule = read_rule(MemoryScope(), {}, alias="e", embeddings=True, workspace=False, owner="q")
            cursor.execute(
                f"""
                SELECT q.memory_id, n.memory_id, n.score
                FROM memory_embeddings q
                CROSS JOIN LATERAL (
                    SELECT e.memory_id, 1 - (e.embedding <=> q.embedding) AS score
                    FROM memory_embeddings e
                    WHERE e.workspace_id = {workspace_sql} AND e.dimension = {dimension_sql}
                      AND e.model = %(model)s
                      AND e.memory_id <> q.memory_id
                      AND {owner_rule.sql()}
                    ORDER BY {order}
                    LIMIT %(limit)s
                ) n
                WHERE q.workspace_id = {workspace_sql} AND q.dimension = {dimension_sql}
                  AND q.model = %(model)s
                  AND q.memory_id = ANY(%(ids)s)
                ORDER BY q.memory_id, n.score DESC
                """,
                {"model": model, "limit": limit, "ids": memory_ids},
            )
            for source, neighbour, score in cursor.fetchall():
                result[source].append((neighbour, float(score)))
    return result


def stored_vectors(
    *, workspace_id: int, memory_ids: list[uuid.UUID], model: str
) -> dict[uuid.UUID, np.ndarray]:
    """Stored vectors of several memories (MMR needs the candidates' vectors), read in pgvector's binary form
    (vector_send: a 4-byte header, then big-endian float4s): parsing the text form of 40 vectors of 384
    floats took longer than the statement."""
    if not memory_ids:
        return {}
    # Prepared: a lookup by ids plans the same whatever the ids, and planning was a third of its time.
    with prepared_cursor() as cursor:
        cursor.execute(
            "SELECT memory_id, vector_send(embedding) FROM memory_embeddings "
            "WHERE workspace_id = %s AND model = %s AND memory_id = ANY(%s::uuid[])",
            [workspace_id, model, list(memory_ids)],
        )
        return {memory_id: vector_from_binary(data) for memory_id, data in cursor.fetchall()}


def vector_from_binary(data: bytes | memoryview) -> np.ndarray:
    """A vector from pgvector's binary form (vector_send): a 4-byte header, then big-endian float4s."""
    return np.frombuffer(bytes(data), dtype=">f4", offset=4).astype(np.float32)


# (workspace, model) → until when the workspace is known to hold vectors of the model.
_HAS_VECTORS: dict[tuple[int, str], float] = {}


def workspace_has_vectors(*, workspace_id: int, model: str) -> bool:
    """Whether the workspace holds any vector of `model` (an index probe on memory_embeddings_ws_model). A yes
    is remembered for INDEX_READY_SECONDS (a workspace rarely loses all its vectors, and a stale yes only
    costs a query embedding that finds nothing); a no is asked again on every call, so a workspace's first
    vectors count at once."""
    key = (workspace_id, model)
    if _HAS_VECTORS.get(key, 0.0) > time.monotonic():
        return True
    with connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM memory_embeddings WHERE workspace_id = %s AND model = %s)",
            [workspace_id, model],
        )
        found = bool(cursor.fetchone()[0])
    if found:
        if len(_HAS_VECTORS) > 100_000:
            _HAS_VECTORS.clear()
        _HAS_VECTORS[key] = time.monotonic() + INDEX_READY_SECONDS
    return found

"""Nearest entities by vector: an exact scan for most workspaces, an HNSW index for large ones.

Entity vectors live in graph_nodes.embedding, a `vector` column of no fixed dimension (each embedding model
has its own), so an HNSW index needs an expression of fixed dimension and a predicate that keeps other
dimensions out. As for memory vectors (retrieval/vectors.py), each workspace gets its own partial index per
dimension once it holds more than GRAPH_ENTITY_VECTOR_EXACT_MAX_ROWS entity vectors of that dimension: an
index shared by all workspaces would have to wade through every other tenant's entities before the workspace
filter let one through, and a small workspace's exact scan (through the partial b-tree graph_nodes_embedded,
about 1 µs per vector) is faster than any index anyway. The index is over the vectors cast to halfvec (half
the size; the candidates' cosines are computed again from the stored float4 vectors), built by the owner role
without blocking writes, from the hourly graph upkeep.

Call inside the workspace's RLS context.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.conf import settings
from django.db import connections

logger = logging.getLogger("cairn.graph.vectors")

# (workspace, dimension) → (monotonic expiry, ready). A stale answer costs speed, never results: a search
# planned for a dropped index scans exactly, and a just-built index is used up to a minute later.
_INDEX_READY: dict[tuple[int, int], tuple[float, bool]] = {}
INDEX_READY_SECONDS = 60.0


def vector_literal(vector: Any) -> str:
    return "[" + ",".join(f"{float(x):.7g}" for x in list(vector)) + "]"


def entity_index_name(workspace_id: int, dimension: int) -> str:
    return f"graph_nodes_hnswh_w{int(workspace_id)}_d{int(dimension)}"


def _rows(workspace_id: int, dimension: int, alias: str = "") -> str:
    """The partial index's predicate, with the workspace and dimension as literals: the planner can only match
    a partial index against constants."""
    a = f"{alias}." if alias else ""
    return (
        f"{a}workspace_id = {int(workspace_id)} AND {a}embedding IS NOT NULL "
        f"AND vector_dims({a}embedding) = {int(dimension)}"
    )


def entity_index_ready(*, workspace_id: int, dimension: int, cached: bool = True) -> bool:
    key = (workspace_id, dimension)
    hit = _INDEX_READY.get(key)
    if cached and hit is not None and hit[0] > time.monotonic():
        return hit[1]
    with connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
            "WHERE c.relname = %s AND i.indisvalid)",
            [entity_index_name(workspace_id, dimension)],
        )
        ready = bool(cursor.fetchone()[0])
    if len(_INDEX_READY) > 100_000:
        _INDEX_READY.clear()
    _INDEX_READY[key] = (time.monotonic() + INDEX_READY_SECONDS, ready)
    return ready


def entity_vector_counts(*, workspace_id: int) -> dict[int, int]:
    """Entity vectors per dimension (through the partial b-tree of vector-carrying nodes)."""
    with connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT vector_dims(embedding), count(*) FROM graph_nodes "
            "WHERE workspace_id = %s AND embedding IS NOT NULL GROUP BY 1",
            [workspace_id],
        )
        return {int(dimension): int(count) for dimension, count in cursor.fetchall()}


def entity_index_ensure(*, workspace_id: int, dimension: int) -> bool:
    """Build the workspace's entity HNSW index of one dimension (as the owner: DDL), without blocking writes.
    Safe to repeat; False when another process is building it."""
    if not 1 <= int(dimension) <= 4000:  # halfvec's HNSW limit
        return False
    name = entity_index_name(workspace_id, dimension)
    owner = connections["default"]
    owner.ensure_connection()
    with owner.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(hashtext(%s))", [name])
        if not cursor.fetchone()[0]:
            return False
        try:
            cursor.execute(
                "SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
                "WHERE c.relname = %s",
                [name],
            )
            row = cursor.fetchone()
            if row and row[0]:
                return True
            if row:
                cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")  # a failed earlier build
            cursor.execute(f"SET maintenance_work_mem = '{int(settings.VECTOR_INDEX_BUILD_MEMORY_MB)}MB'")
            cursor.execute(
                f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON graph_nodes "
                f"USING hnsw ((embedding::halfvec({int(dimension)})) halfvec_cosine_ops) "
                f"WITH (m = 16, ef_construction = 256) WHERE {_rows(workspace_id, dimension)}"
            )
            logger.info("built %s", name)
            _INDEX_READY.pop((workspace_id, dimension), None)
            return True
        finally:
            cursor.execute("SELECT pg_advisory_unlock(hashtext(%s))", [name])


def entity_indexes_ensure(*, workspace_id: int, counts: dict[int, int]) -> list[int]:
    """The dimensions whose entity vectors outgrew the exact scan and now have their index (upkeep), from the
    counts of entity_vector_counts. Never inside a transaction that wrote graph_nodes: the concurrent build
    would wait for it."""
    built = []
    for dimension, count in sorted(counts.items()):
        if count > settings.GRAPH_ENTITY_VECTOR_EXACT_MAX_ROWS and entity_index_ensure(
            workspace_id=workspace_id, dimension=dimension
        ):
            built.append(dimension)
    return built


def nearest_entities(
    cursor: Any,
    *,
    workspace_id: int,
    vector: Any,
    model: str,
    where: str,
    params: dict[str, Any],
    limit: int,
) -> list[tuple[int, str, float]]:
    """(id, canonical name, cosine) of the `limit` entities nearest to `vector` among those of `model` that
    satisfy `where` (on alias n, with %(name)s parameters from `params`), nearest first."""
    dimension = len(list(vector))
    literal = vector_literal(vector)
    values = {**params, "v": literal, "model": model, "limit": int(limit)}
    rows = _rows(workspace_id, dimension, "n")
    if entity_index_ready(workspace_id=workspace_id, dimension=dimension):
        # The index orders by the halfvec distance; strict-order iterative scans keep going until `limit` rows
        # pass the filters (model, type, who may see them), within hnsw.max_scan_tuples.
        cursor.execute(
            "SELECT set_config('hnsw.ef_search', %s, true), "
            "set_config('hnsw.iterative_scan', 'strict_order', true), "
            "set_config('hnsw.max_scan_tuples', %s, true)",
            [str(settings.VECTOR_HNSW_EF_SEARCH), str(settings.VECTOR_HNSW_MAX_SCAN)],
        )
        order = f"(n.embedding::halfvec({dimension})) <=> (%(v)s::halfvec({dimension}))"
    else:
        order = "n.embedding <=> %(v)s::vector"
    cursor.execute(
        f"""
        SELECT n.id, n.node_key, 1 - (n.embedding <=> %(v)s::vector) FROM graph_nodes n
        WHERE {rows} AND n.embedding_model = %(model)s AND {where}
        ORDER BY {order} LIMIT %(limit)s
        """,
        values,
    )
    return [(int(node_id), key, float(cosine)) for node_id, key, cosine in cursor.fetchall()]

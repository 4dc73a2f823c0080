"""Nearest entities by vector (graphsvc.vectors): an exact scan until a workspace's entity vectors of one
dimension outgrow GRAPH_ENTITY_VECTOR_EXACT_MAX_ROWS, then the workspace's own partial HNSW index, built by
the hourly upkeep; both find the same entities, and each workspace only its own."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connections

from graphsvc import upkeep, vectors
from tenancy.rls import workspace_context
from tests.graphsvc.graph_builder import GraphBuilder

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
DIMENSION = 8


def unit(seed: int) -> np.ndarray:
    vector = np.random.default_rng(seed).normal(size=DIMENSION).astype(np.float32)
    return vector / np.linalg.norm(vector)


def with_vectors(workspace_id: int, count: int, *, offset: int = 0) -> GraphBuilder:
    g = GraphBuilder(workspace_id)
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        for i in range(count):
            node = g.entity(f"Service {offset + i}", type="tool")
            cursor.execute(
                "UPDATE graph_nodes SET embedding = %s::vector, embedding_model = 'fake' WHERE id = %s",
                [vectors.vector_literal(unit(offset + i)), node],
            )
    return g


def nearest(workspace_id: int, query: np.ndarray) -> list[tuple[int, str, float]]:
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        return vectors.nearest_entities(
            cursor,
            workspace_id=workspace_id,
            vector=query,
            model="fake",
            where="n.node_type = %(type)s",
            params={"type": "tool"},
            limit=3,
        )


def plan(workspace_id: int, query: np.ndarray) -> str:
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        # A handful of rows sorts cheaper than any index scan; with sorting priced out, the plan shows whether
        # the workspace's HNSW index serves this query's shape (its predicate matched, its distance spelt).
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        literal = vectors.vector_literal(query)
        cursor.execute(
            f"EXPLAIN SELECT n.id FROM graph_nodes n WHERE n.workspace_id = {workspace_id} "
            f"AND n.embedding IS NOT NULL AND vector_dims(n.embedding) = {DIMENSION} "
            "AND n.embedding_model = 'fake' "
            f"ORDER BY (n.embedding::halfvec({DIMENSION})) <=> ('{literal}'::halfvec({DIMENSION})) LIMIT 3"
        )
        return "\n".join(row[0] for row in cursor.fetchall())


def test_it_indexes_a_workspace_whose_entity_vectors_outgrow_the_exact_scan(personas, alice_ws, settings):
    settings.GRAPH_ENTITY_VECTOR_EXACT_MAX_ROWS = 20
    with_vectors(alice_ws, 30)
    other = personas.acme.id
    with_vectors(other, 5, offset=100)
    query = unit(7)
    exact = nearest(alice_ws, query)
    assert exact[0][1] == "service 7" and exact[0][2] == pytest.approx(1.0, abs=1e-5)
    assert not vectors.entity_index_ready(workspace_id=alice_ws, dimension=DIMENSION, cached=False)

    ran = upkeep.graph_upkeep_run(workspace_id=alice_ws, force=True)
    assert ran["entityIndexes"] == [DIMENSION]
    assert upkeep.graph_upkeep_run(workspace_id=other, force=True)["entityIndexes"] == []  # 5 vectors: exact
    name = vectors.entity_index_name(alice_ws, DIMENSION)
    assert vectors.entity_index_ready(workspace_id=alice_ws, dimension=DIMENSION, cached=False)
    assert name in plan(alice_ws, query)
    # The same entities, with their exact cosines (computed again from the stored vectors).
    assert nearest(alice_ws, query) == exact
    # The index covers this workspace only; the other one's entities are never candidates here.
    assert all(
        key.startswith("service ") and int(key.split()[1]) < 100 for _, key, _ in nearest(alice_ws, unit(101))
    )
    assert vectors.entity_index_ensure(workspace_id=alice_ws, dimension=DIMENSION)  # repeatable

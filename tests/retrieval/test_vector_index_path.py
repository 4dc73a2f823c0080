"""The indexed vector path of a large workspace (HNSW + user btree), built for real with low thresholds: wide
scopes go through the HNSW index and are counted once a minute at most; narrow scopes are counted on every
search and scanned exactly, so a scope that grows past the bound is noticed at once."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memories.models import Memory
from retrieval import vectors
from tenancy.rls import workspace_context
from tests.memories.helpers import personal_workspace_id

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

DIMENSION = 8
MODEL = "test/index-path"


def _add(
    ws: int, rng: np.random.Generator, *, user_id: str | None, count: int
) -> dict[uuid.UUID, np.ndarray]:
    now = timezone.now()
    added: dict[uuid.UUID, np.ndarray] = {}
    with workspace_context(ws):
        for i in range(count):
            memory = Memory.objects.create(
                workspace_id=ws,
                content=f"memory {user_id} {i}",
                user_id=user_id,
                created_at=now,
                updated_at=now,
            )
            vector = rng.normal(size=DIMENSION).astype(np.float32)
            added[memory.id] = vector / np.linalg.norm(vector)
        vectors.embeddings_store(
            workspace_id=ws,
            model=MODEL,
            rows=[
                vectors.EmbeddingRow(
                    memory_id=memory_id,
                    user_id=user_id,
                    scope="global",
                    project_id=None,
                    expires_at=None,
                    content_sha256="",
                    vector=vector,
                )
                for memory_id, vector in added.items()
            ],
        )
    return added


def _search(ws: int, query: np.ndarray, user_id: str | None) -> tuple[list[uuid.UUID], str]:
    """Nearest ids and the SQL of the search's set-up statement."""
    with workspace_context(ws), CaptureQueriesContext(connections["app"]) as captured:
        found = vectors.nearest(
            workspace_id=ws,
            model=MODEL,
            query=query,
            scope=vectors.VectorScope(user_id=user_id, project_id=None),
            limit=3,
        )
    setup = next((q["sql"] for q in captured.captured_queries if "hnsw.ef_search" in q["sql"]), "")
    return [memory_id for memory_id, _ in found], setup


@pytest.fixture
def indexed_workspace(personas, settings):
    settings.VECTOR_EXACT_MAX_ROWS = 10
    settings.VECTOR_EXACT_MAX_SCOPED_ROWS = 5
    ws = personal_workspace_id(personas.alice)
    vectors._INDEX_READY.clear()
    vectors._SCOPE_OVER_BOUND.clear()
    yield ws
    vectors._INDEX_READY.clear()
    vectors._SCOPE_OVER_BOUND.clear()
    with connections["default"].cursor() as cursor:
        for name in (vectors.hnsw_index_name(ws, DIMENSION), vectors.users_index_name(ws, DIMENSION)):
            cursor.execute(f"DROP INDEX IF EXISTS {name}")


def test_it_counts_a_wide_scope_once_and_a_narrow_one_every_time(indexed_workspace):
    ws = indexed_workspace
    rng = np.random.default_rng(7)
    shared = _add(ws, rng, user_id=None, count=3)
    bobs = _add(ws, rng, user_id="bob", count=20)
    assert vectors.hnsw_index_ensure(workspace_id=ws, dimension=DIMENSION)

    # bob sees 23 rows (> 5): the HNSW index, counted the first time only.
    target = next(iter(bobs))
    found, setup = _search(ws, bobs[target], "bob")
    assert found[0] == target and "count(*)" in setup
    found, setup = _search(ws, bobs[target], "bob")
    # Nothing to count: no set-up statement at all; the connection keeps the search parameters per session.
    assert found[0] == target and setup == ""
    with workspace_context(ws), connections["app"].cursor() as cursor:
        cursor.execute("SELECT current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan')")
        assert cursor.fetchone() == ("400", "strict_order")

    # The shared scope sees 3 rows: an exact scan, counted on every search, never another user's row.
    target = next(iter(shared))
    for _ in range(2):
        found, setup = _search(ws, shared[target], None)
        assert found[0] == target and set(found) <= set(shared) and "count(*)" in setup

    # It grows past the bound: the next search counts it, sees it at once, and then stops counting.
    more = _add(ws, rng, user_id=None, count=10)
    target = next(iter(more))
    found, setup = _search(ws, more[target], None)
    assert found[0] == target and "count(*)" in setup
    found, setup = _search(ws, more[target], None)
    assert found[0] == target and set(found) <= set(shared) | set(more) and setup == ""


def _prepared_searches() -> int:
    with connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE '%%FROM memory_embeddings e%%'"
        )
        return cursor.fetchone()[0]


def test_it_prepares_the_search_of_large_workspaces_only(personas, indexed_workspace):
    """A large workspace's search is prepared (its text names the workspace for the partial indexes; such
    workspaces are few). A small one's is not: one prepared statement per small workspace would overflow
    psycopg's 100 per connection on a busy server, and bound, its generic plan may scan the whole table."""
    rng = np.random.default_rng(11)
    small = personal_workspace_id(personas.charlie)
    prepared_before = _prepared_searches()
    added = _add(small, rng, user_id=None, count=3)
    target = next(iter(added))
    found, _ = _search(small, added[target], None)
    assert found[0] == target and set(found) == set(added)
    assert _prepared_searches() == prepared_before

    large = indexed_workspace
    shared = _add(large, rng, user_id=None, count=12)
    assert vectors.hnsw_index_ensure(workspace_id=large, dimension=DIMENSION)
    target = next(iter(shared))
    found, _ = _search(large, shared[target], None)
    assert found[0] == target and set(found) <= set(shared)
    assert _prepared_searches() == prepared_before + 1

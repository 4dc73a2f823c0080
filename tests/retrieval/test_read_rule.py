"""The read rule written once: readable_q (the ORM) and read_rule (SQL, used by every raw statement) give the
same memories for every kind of scope, and so does each statement built on read_rule: BM25 (one layer and the
layers statement), web-search syntax, the substring fallback, loads by id, session neighbours, the vector
search and its load, and the ranking as a whole. Also the workspace-wide scope of the dashboard."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from django.conf import settings
from django.db import connections
from django.utils import timezone

from memories import selectors
from memories.models import Memory
from memories.selectors import MemoryScope
from retrieval import lexical, search, vectors
from tenancy.rls import workspace_context

DIMENSION = 8
SESSION = uuid.UUID("5e55105e-0000-4000-8000-000000000001")  # every case is a turn of it
WORD = "heliotrope"  # in every memory: BM25 and substring searches find every readable one

# (name, user_id, project_id, extra fields). Names say what each memory is.
CASES: list[tuple[str, str | None, str | None, dict[str, Any]]] = [
    ("shared", None, None, {}),
    ("u1", "u1", None, {}),
    ("u2", "u2", None, {}),
    ("p1", None, "p1", {}),
    ("p2", None, "p2", {}),
    ("u1_p1", "u1", "p1", {}),
    ("u2_p1", "u2", "p1", {}),
    ("u1_working", "u1", None, {"layer": "working"}),
    ("u2_working", "u2", None, {"layer": "working"}),
    ("shared_working", None, None, {"layer": "working"}),
    ("superseded", None, None, {"superseded_by": uuid.uuid4()}),
    ("u1_superseded", "u1", None, {"superseded_by": uuid.uuid4()}),
    ("expired", None, None, {"expires_at": "past"}),
    ("u1_expiring_later", "u1", None, {"expires_at": "future"}),
    ("forgotten", None, None, {"deleted_at": "now"}),
    ("u1_forgotten", "u1", None, {"deleted_at": "now"}),
]

SCOPES = [
    MemoryScope(),
    MemoryScope(user_id="u1"),
    MemoryScope(user_id="u2"),
    MemoryScope(project_id="p1"),
    MemoryScope(user_id="u1", project_id="p1"),
    MemoryScope(user_id="u3", project_id="p3"),
    MemoryScope(user_id="u1", include_superseded=True),
    MemoryScope(workspace_wide=True),
    MemoryScope(workspace_wide=True, include_superseded=True),
]


@pytest.fixture
def world(alice_ws: int) -> dict[str, Memory]:
    """One memory per case, all in one session (so each has neighbours), each with a stored vector."""
    now = timezone.now()
    rng = np.random.default_rng(7)
    made: dict[str, Memory] = {}
    with workspace_context(alice_ws):
        for index, (name, user_id, project_id, extra) in enumerate(CASES):
            fields = dict(extra)
            if fields.get("expires_at") == "past":
                fields["expires_at"] = now - timedelta(hours=1)
            elif fields.get("expires_at") == "future":
                fields["expires_at"] = now + timedelta(hours=1)
            if fields.get("deleted_at") == "now":
                fields["deleted_at"] = now
            at = now - timedelta(minutes=len(CASES) - index)
            made[name] = Memory.objects.create(
                workspace_id=alice_ws,
                content=f"{WORD} note: the {name.replace('_', ' ')}",
                user_id=user_id,
                project_id=project_id,
                scope="project" if project_id else "global",
                session_id=SESSION,
                turn_index=index,
                created_at=at,
                updated_at=at,
                **fields,
            )
        rows = []
        for memory in made.values():
            vector = rng.normal(size=DIMENSION).astype(np.float32)
            rows.append(
                vectors.EmbeddingRow(
                    memory_id=memory.id,
                    user_id=memory.user_id,
                    scope=memory.scope,
                    project_id=memory.project_id,
                    expires_at=memory.expires_at,
                    content_sha256="",
                    vector=vector / np.linalg.norm(vector),
                )
            )
        vectors.embeddings_store(workspace_id=alice_ws, model=settings.EMBEDDING_MODEL, rows=rows)
    return made


def names(world: dict[str, Memory], found: Any) -> set[str]:
    by_id = {memory.id: name for name, memory in world.items()}
    return {by_id[getattr(item, "id", item)] for item in found}


def orm(ws: int, scope: MemoryScope) -> set[uuid.UUID]:
    return set(selectors.memories_readable(workspace_id=ws, scope=scope).values_list("id", flat=True))


def sql(ws: int, scope: MemoryScope) -> set[uuid.UUID]:
    params: dict[str, Any] = {"workspace_id": ws}
    with connections["app"].cursor() as cursor:
        rule = selectors.read_rule(scope, params)
        cursor.execute(f"SELECT m.id FROM memories m WHERE {rule.sql()}", params)
        return {row[0] for row in cursor.fetchall()}


@pytest.mark.parametrize("scope", SCOPES, ids=repr)
def test_it_reads_the_same_memories_through_the_orm_and_every_statement(alice_ws, world, scope):
    ws = alice_ws
    with workspace_context(ws):
        expected = orm(ws, scope)
        assert sql(ws, scope) == expected
        everything = [memory.id for memory in world.values()]
        loaded = selectors.memories_readable_by_ids(workspace_id=ws, scope=scope, ids=everything)
        assert set(loaded) == expected

        def lexical_ids(query: str, layer: str | None = None) -> set[uuid.UUID]:
            found = lexical.memory_search_lexical(
                workspace_id=ws, scope=scope, query=query, type=None, layer=layer, limit=100
            )
            return {memory.id for memory in found}

        assert lexical_ids(WORD) == expected  # BM25
        assert lexical_ids(f'"{WORD} note"') == expected  # web-search syntax
        # Only stop words and symbols: the substring fallback.
        assert lexical_ids("the") == expected
        layers = lexical.memory_search_lexical_layers(
            workspace_id=ws, scope=scope, query=WORD, depths={"working": 100, "long_term": 100}
        )
        by_layer = {
            layer: {memory.id for memory in memories if memory.layer == layer}
            for layer, memories in layers.items()
        }
        readable_by_layer = {
            layer: {memory_id for memory_id in expected if world_layer(world, memory_id) == layer}
            for layer in ("working", "long_term")
        }
        assert by_layer == readable_by_layer

        # Session neighbours of one memory the scope reads: every other readable memory of the session.
        anchor = world["shared"].id
        neighbours = selectors.session_neighbours(
            workspace_id=ws, scope=scope, memory_ids=[anchor], type=None, layer=None, span=len(CASES)
        )
        assert {memory.id for _, memory, _ in neighbours} == expected - {anchor}

        # The vector search filters on the copied scope columns; its load applies the whole rule.
        query = np.ones(DIMENSION, dtype=np.float32) / np.sqrt(DIMENSION)
        found = search._semantic_candidates(
            workspace_id=ws, scope=scope, query_vector=query, depths={None: 100}
        )
        assert {memory.id for memory in found.memories} == expected
        neighbour_ids = {memory_id for memory_id, _ in found.neighbours or []}
        # Vectors are filtered without deleted_at and superseded_by (the memory_embeddings copy lacks them).
        assert expected <= neighbour_ids
        assert names(world, neighbour_ids - expected) <= {
            "forgotten",
            "u1_forgotten",
            "superseded",
            "u1_superseded",
        }


def world_layer(world: dict[str, Memory], memory_id: uuid.UUID) -> str:
    return next(memory.layer for memory in world.values() if memory.id == memory_id)


def test_it_reads_what_each_rule_says(alice_ws, world):
    """What the rule is, in names: a check on the rule itself, beside the agreement of its versions."""
    with workspace_context(alice_ws):
        assert names(world, orm(alice_ws, MemoryScope())) == {"shared", "shared_working"}
        assert names(world, orm(alice_ws, MemoryScope(user_id="u1", project_id="p1"))) == {
            "shared",
            "u1",
            "p1",
            "u1_p1",
            "u1_working",
            "shared_working",
            "u1_expiring_later",
        }
        live = {name for name, _, _, extra in CASES if not extra.get("deleted_at")} - {"expired"}
        assert names(world, orm(alice_ws, MemoryScope(workspace_wide=True))) == live - {
            "superseded",
            "u1_superseded",
        }
        assert names(world, orm(alice_ws, MemoryScope(workspace_wide=True, include_superseded=True))) == live


def test_it_finds_neighbours_for_similarity_within_each_memorys_own_scope(alice_ws, world):
    """The similarity step reads, for each memory, what its own user and project may read (the rule with
    the memory's columns for the caller's): the same as a search in that scope, less the memory itself."""
    ws = alice_ws
    with workspace_context(ws):
        targets = [world[name].id for name in ("shared", "u1_p1", "u2", "p2")]
        found = vectors.neighbours_of_memories(
            workspace_id=ws, model=settings.EMBEDDING_MODEL, memory_ids=targets, limit=100
        )
        for name in ("shared", "u1_p1", "u2", "p2"):
            memory = world[name]
            scope = MemoryScope(user_id=memory.user_id, project_id=memory.project_id, include_superseded=True)
            expected = orm(ws, scope) - {memory.id}
            got = {neighbour for neighbour, _ in found[memory.id]}
            assert expected <= got
            assert names(world, got - expected) <= {"forgotten", "u1_forgotten"}


def test_it_ranks_across_every_user_and_project_with_a_workspace_wide_scope(alice_ws, world):
    """memory_search with the dashboard's workspace-wide scope: every live memory of the workspace, by BM25
    and by hybrid (vectors included), whoever wrote it and for whichever project."""
    ws = alice_ws
    wide = MemoryScope(workspace_wide=True)
    with workspace_context(ws):
        expected = orm(ws, wide)
        for strategy in ("lexical", "hybrid"):
            outcome = search.memory_search(
                workspace_id=ws, scope=wide, query=WORD, limit=50, strategy=strategy
            )
            assert {memory.id for memory in outcome.memories} == expected, strategy
        shared_only = search.memory_search(workspace_id=ws, scope=MemoryScope(), query=WORD, limit=50)
        assert names(world, [m.id for m in shared_only.memories]) == {"shared", "shared_working"}


def test_it_keeps_the_workspace_wide_scope_out_of_reach_of_sdk_requests(personas):
    """No SDK request can ask for it: a scope with any extra field is refused, and memory_scope never sets
    it. And it only reads: the write rule refuses it, and it cannot be combined with a user or project."""
    error = personas.alice_api.error(
        "memories/search",
        {"query": WORD, "scope": {"workspaceWide": True}},
        status=400,
        code="INVALID_REQUEST",
    )
    assert "workspaceWide" in str(error)
    with pytest.raises(ValueError, match="reads only"):
        selectors.writable_q(MemoryScope(workspace_wide=True))
    with pytest.raises(ValueError, match="no userId"):
        MemoryScope(user_id="u1", workspace_wide=True)
    assert dataclasses.fields(MemoryScope)[-1].name == "workspace_wide"

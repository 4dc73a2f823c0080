"""The add path's one-statement graph mapping gives exactly what the long re-sync gives, fallback included."""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from graphsvc import mapping
from graphsvc.models import GraphEdge, GraphNode, MemoryNodeLink
from memories.models import Memory, PipelineError, PipelineJob
from memories.selectors import MemoryScope
from pipeline import services as pipeline
from tenancy.rls import workspace_context
from tests.memories.helpers import personal_workspace_id

FULL = {
    "type": "decision",
    "tags": ["Postgres", " perf ", "postgres"],
    "category": "Databases",
    "scope": {"userId": "dana", "projectId": "github.com/alice/api"},
}


def graph_state(ws: int) -> dict[str, set[tuple]]:
    with workspace_context(ws):
        return {
            "nodes": {
                (node_type, key, label, json.dumps(metadata, sort_keys=True))
                for node_type, key, label, metadata in GraphNode.objects.values_list(
                    "node_type", "node_key", "label", "metadata"
                )
            },
            "links": set(
                MemoryNodeLink.objects.values_list("memory_id", "node__node_type", "node__node_key", "role")
            ),
            "edges": set(
                GraphEdge.objects.values_list(
                    "edge_key",
                    "edge_type",
                    "from_node__node_key",
                    "to_node__node_key",
                    "origin",
                    "evidence_memory_id",
                    "expires_at",
                )
            ),
        }


def resync(ws: int, memory_id: str) -> None:
    with workspace_context(ws):
        memory = Memory.objects.get(pk=memory_id)
        mapping.mapping_sync(memory=pipeline.snapshot(memory))


def test_it_maps_a_new_memory_as_the_full_resync_does(alice_api, ws):
    memory = alice_api.add("Use connection pooling for Postgres", **FULL)
    working = alice_api.add(
        "scratch note about perf", layer="working", tags=["perf"], scope={"userId": "dana"}
    )
    bare = alice_api.add("nothing else")
    fresh = graph_state(ws)
    assert len(fresh["edges"]) >= 8 and len(fresh["links"]) == 7 + 4 + 2
    for added in (memory, working, bare):
        resync(ws, added["id"])
    assert graph_state(ws) == fresh
    # The working memory's mapping edge carries its expiry, as on the long path.
    with workspace_context(ws):
        assert GraphEdge.objects.filter(evidence_memory_id=working["id"], expires_at__isnull=False).exists()


def test_it_maps_in_one_statement(alice_api, ws):
    alice_api.add("warm up", tags=["a"])
    with CaptureQueriesContext(connections["app"]) as queries:
        # A GitHub projectId would add the owner-routing reads; this measures the write itself.
        alice_api.add(
            "Use pooling", tags=["db"], category="ops", scope={"userId": "dana", "projectId": "api"}
        )
    graph = [
        q["sql"] for q in queries.captured_queries if "graph_" in q["sql"] or "memory_node_links" in q["sql"]
    ]
    assert len(graph) == 1 and "graph_mapping_insert_fresh" in graph[0], graph
    # auth, BEGIN, RLS setting, the workspace's hygiene settings, memory, mapping (a function guarding
    # itself: no savepoint), job with its broker message (one statement), COMMIT; in a test the BEGIN is a
    # savepoint and the RLS setting is cleared at the end (tenancy.rls), hence 9.
    savepoints = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("SAVEPOINT")]
    assert len(savepoints) == 1, savepoints  # the request's transaction (a savepoint inside the test's)
    assert len(queries.captured_queries) <= 9, "\n".join(
        " ".join(q["sql"].split())[:90] for q in queries.captured_queries
    )


def test_it_falls_back_to_the_full_sync_when_the_statement_misses_a_node(alice_api, ws, monkeypatch):
    reference = alice_api.add("Use connection pooling for Postgres", **FULL)
    expected = graph_state(ws)
    real = mapping.mapping_insert_fresh
    calls = []

    def partial(**kwargs):
        calls.append(real(**kwargs))
        # As if a concurrent transaction's node had been invisible.
        return mapping.FreshMappingOutcome(complete=False, error=None)

    monkeypatch.setattr(mapping, "mapping_insert_fresh", partial)
    again = alice_api.add("Use connection pooling for Postgres", **FULL)
    assert calls == [mapping.FreshMappingOutcome(complete=True, error=None)]
    state = graph_state(ws)
    ours = {row for row in state["links"] if str(row[0]) == again["id"]}
    assert {row[1:] for row in ours} == {
        (t, k.replace(reference["id"], again["id"]), r)
        for _, t, k, r in {row for row in expected["links"] if str(row[0]) == reference["id"]}
    }
    assert len(state["edges"]) == 2 * len(expected["edges"])


@pytest.mark.django_db(transaction=True, databases="__all__")
def test_it_sees_a_tag_node_a_concurrent_write_committed(personas):
    """Two first uses of one tag at once: the second statement waits on the first's node, cannot see it in its
    snapshot, and the long path completes the mapping."""
    ws = personal_workspace_id(personas.alice)
    owner = connections["default"]
    other = owner.get_new_connection(owner.get_connection_params())  # a second session, outside Django's
    other.autocommit = False
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT set_config('app.workspace_id', %s, true)", [str(ws)])
            cursor.execute(
                "INSERT INTO graph_nodes (workspace_id, node_type, node_key, label, created_at, updated_at) "
                "VALUES (%s, 'topic', 'race', 'race', now(), now())",
                [ws],
            )
        results: list[mapping.FreshMappingOutcome] = []
        real = mapping.mapping_insert_fresh

        def spy(**kwargs):
            results.append(real(**kwargs))
            return results[-1]

        def write() -> None:
            try:
                with workspace_context(ws):
                    pipeline.memory_add_flow(
                        workspace_id=ws, scope=MemoryScope(), content="racing", tags=["race"]
                    )
            finally:
                connections.close_all()

        original = mapping.mapping_insert_fresh
        mapping.mapping_insert_fresh = spy
        try:
            writer = threading.Thread(target=write)
            writer.start()
            writer.join(timeout=1.5)  # it now waits on the uncommitted node
            assert writer.is_alive()
            other.commit()
            writer.join(timeout=30)
        finally:
            mapping.mapping_insert_fresh = original
        assert results == [mapping.FreshMappingOutcome(complete=False, error=None)]
        with workspace_context(ws):
            memory = Memory.objects.get(content="racing")
            roles = set(
                MemoryNodeLink.objects.filter(memory_id=memory.id).values_list("node__node_key", "role")
            )
        assert ("race", "tag") in roles
    finally:
        other.close()


@pytest.mark.django_db(transaction=True, databases="__all__")
def test_it_keeps_the_write_when_the_mapping_times_out(personas, monkeypatch):
    """A statement_timeout inside the mapping function is caught there, as the client savepoint caught it."""
    ws = personal_workspace_id(personas.alice)
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION test_slow_node() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN PERFORM pg_sleep(0.5); RETURN NEW; END $$"
        )
        cursor.execute(
            "CREATE TRIGGER test_slow_node BEFORE INSERT ON graph_nodes FOR EACH ROW "
            "EXECUTE FUNCTION test_slow_node()"
        )
    real = mapping.mapping_insert_fresh

    def with_timeout(**kwargs):
        with connections["app"].cursor() as cursor:
            cursor.execute("SET LOCAL statement_timeout = 100")
        try:
            return real(**kwargs)
        finally:
            with connections["app"].cursor() as cursor:
                cursor.execute("SET LOCAL statement_timeout = 0")

    monkeypatch.setattr(mapping, "mapping_insert_fresh", with_timeout)
    try:
        with workspace_context(ws):
            memory = pipeline.memory_add_flow(
                workspace_id=ws, scope=MemoryScope(), content="slow graph", tags=["x"]
            )
        with workspace_context(ws):
            assert Memory.objects.filter(pk=memory.id).exists()
            assert not GraphNode.objects.exists()
            assert PipelineJob.objects.filter(memory_id=memory.id, kind="embed").exists()
            error = PipelineError.objects.get(memory_id=memory.id)
        assert error.code == "GRAPH_MAPPING_SYNC_FAILED" and error.message.startswith(
            "57014"
        )  # query_canceled
    finally:
        with connections["default"].cursor() as cursor:
            cursor.execute("DROP TRIGGER test_slow_node ON graph_nodes")
            cursor.execute("DROP FUNCTION test_slow_node()")

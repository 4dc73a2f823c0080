"""The write pipeline: jobs committed with the memory, real embeddings with the offline model, true-kNN
similar_to edges inside the read scope, retries with backoff, dead letters, and graph failures that never fail
the write. Jobs run synchronously here with the real job code (pipeline.services.jobs_run_pending)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone
from django_q.models import OrmQ

from graphsvc import mapping, similarity
from graphsvc.models import GraphEdge, GraphNode
from memories.models import MemoryEmbedding, PipelineJob
from pipeline import jobs
from retrieval.embeddings import reset_embedders
from tenancy.rls import workspace_context
from tests.memories.helpers import personal_workspace_id, run_jobs

PARAPHRASE_A = "We deploy the payments API with blue-green releases every Friday afternoon."
PARAPHRASE_B = "Every Friday afternoon the payments API is deployed using blue-green releases."
UNRELATED = "Grandma's lasagna recipe needs three layers of ricotta and fresh basil."


def similar_pairs(workspace_id: int) -> set[tuple[str, str]]:
    with workspace_context(workspace_id):
        edges = GraphEdge.objects.filter(workspace_id=workspace_id, edge_type="similar_to").select_related(
            "from_node", "to_node"
        )
        return {(edge.from_node.node_key, edge.to_node.node_key) for edge in edges}


def test_it_commits_the_job_with_the_memory(alice_api, alice_ws):
    memory = alice_api.add("remember the deploy checklist")
    assert memory["pipeline"]["status"] == "queued"
    assert memory["pipeline"]["steps"]["embed"] == {"status": "queued", "attempts": 0, "lastErrorCode": None}
    with workspace_context(alice_ws):
        job = PipelineJob.objects.get(memory_id=memory["id"])
    assert job.kind == "embed"
    assert OrmQ.objects.using("app").filter(key="cairn").exists()


def test_it_rolls_back_the_job_with_a_failed_write(alice_ws):
    from memories.models import Memory

    with pytest.raises(RuntimeError), workspace_context(alice_ws):
        now = timezone.now()
        memory = Memory.objects.create(workspace_id=alice_ws, content="x", created_at=now, updated_at=now)
        jobs.jobs_enqueue(workspace_id=alice_ws, memory_ids=[memory.id], kind=jobs.Kind.EMBED)
        raise RuntimeError("the write failed after enqueueing")
    with workspace_context(alice_ws):
        assert not PipelineJob.objects.exists()
    assert not OrmQ.objects.using("app").exists()


def test_it_embeds_with_the_local_model_and_links_paraphrases(alice_api, alice_ws, local_embedder):
    first = alice_api.add(PARAPHRASE_A)
    second = alice_api.add(PARAPHRASE_B)
    unrelated = alice_api.add(UNRELATED)
    assert run_jobs(alice_ws) >= 3

    with workspace_context(alice_ws):
        stored = {str(e.memory_id): e for e in MemoryEmbedding.objects.filter(workspace_id=alice_ws)}
        assert set(stored) == {first["id"], second["id"], unrelated["id"]}
        assert {(e.model, e.dimension) for e in stored.values()} == {
            ("local/all-MiniLM-L6-v2-int8-onnx", 384)
        }
        edges = list(GraphEdge.objects.filter(workspace_id=alice_ws, edge_type="similar_to"))
    pairs = similar_pairs(alice_ws)
    assert pairs == {(first["id"], second["id"]), (second["id"], first["id"])}
    assert all(edge.weight >= 0.85 and edge.origin == "similarity" for edge in edges)

    listed = alice_api.ok("memories/list", {})["memories"]
    assert {m["pipeline"]["status"] for m in listed} == {"succeeded"}
    assert {m["pipeline"]["steps"]["similarity"]["status"] for m in listed} == {"succeeded"}


def test_it_is_idempotent(alice_api, alice_ws, local_embedder):
    alice_api.add(PARAPHRASE_A)
    alice_api.add(PARAPHRASE_B)
    run_jobs(alice_ws)

    def snapshot():
        with workspace_context(alice_ws):
            return (
                sorted(MemoryEmbedding.objects.values_list("memory_id", "model")),
                sorted(GraphEdge.objects.values_list("edge_key", "weight")),
                GraphNode.objects.count(),
            )

    before = snapshot()
    # Re-queue every job and run them all again: the same rows come out.
    with workspace_context(alice_ws):
        PipelineJob.objects.update(status="queued", run_after=timezone.now())
    run_jobs(alice_ws)
    assert snapshot() == before


def test_it_never_links_across_workspaces(personas, local_embedder):
    personas.alice_api.add(PARAPHRASE_A)
    personas.charlie_api.add(PARAPHRASE_B)
    for user in (personas.alice, personas.charlie):
        run_jobs(personal_workspace_id(user))
        assert similar_pairs(personal_workspace_id(user)) == set()


def test_it_stays_inside_the_read_scope(alice_api, alice_ws, local_embedder):
    u1 = alice_api.add(PARAPHRASE_A, scope={"userId": "u1"})
    u2 = alice_api.add(PARAPHRASE_B, scope={"userId": "u2"})
    p1 = alice_api.add(PARAPHRASE_A, scope={"projectId": "github.com/alice/one"})
    p2 = alice_api.add(PARAPHRASE_B, scope={"projectId": "github.com/alice/two"})
    run_jobs(alice_ws)
    pairs = similar_pairs(alice_ws)
    forbidden = {(u1["id"], u2["id"]), (u2["id"], u1["id"]), (p1["id"], p2["id"]), (p2["id"], p1["id"])}
    assert not pairs & forbidden


def test_it_links_a_user_memory_to_shared_ones(alice_api, alice_ws, local_embedder):
    shared = alice_api.add(PARAPHRASE_A)
    private = alice_api.add(PARAPHRASE_B, scope={"userId": "u1"})
    run_jobs(alice_ws)
    assert (private["id"], shared["id"]) in similar_pairs(alice_ws)


def test_it_caps_similar_neighbours(alice_api, alice_ws, local_embedder, settings):
    settings.SIMILARITY_EDGE_MAX_PER_MEMORY = 2
    base = alice_api.add(PARAPHRASE_A)
    for suffix in ("", " Really.", " Truly.", " Indeed."):
        alice_api.add(PARAPHRASE_B + suffix)
    run_jobs(alice_ws)
    with workspace_context(alice_ws):
        evidence = GraphEdge.objects.filter(edge_type="similar_to", evidence_memory_id=base["id"]).count()
    assert evidence <= 4  # two neighbours, both directions


def test_it_keeps_similar_edges_on_a_tags_only_edit(alice_api, alice_ws, local_embedder):
    first = alice_api.add(PARAPHRASE_A)
    second = alice_api.add(PARAPHRASE_B)
    run_jobs(alice_ws)
    assert similar_pairs(alice_ws)
    alice_api.ok("memories/edit", {"id": first["id"], "tags": ["deploys"]})
    assert run_jobs(alice_ws) == 0  # no re-embedding for a tags-only change
    assert (first["id"], second["id"]) in similar_pairs(alice_ws)


def test_it_recomputes_edges_when_content_changes(alice_api, alice_ws, local_embedder):
    first = alice_api.add(PARAPHRASE_A)
    second = alice_api.add(PARAPHRASE_B)
    run_jobs(alice_ws)
    edited = alice_api.ok("memories/edit", {"id": second["id"], "content": UNRELATED})
    assert edited["memory"]["pipeline"]["steps"]["embed"]["status"] == "queued"
    run_jobs(alice_ws)
    assert (second["id"], first["id"]) not in similar_pairs(alice_ws)


def test_it_drops_a_changed_memorys_edges_whichever_end_found_them(alice_api, alice_ws, local_embedder):
    first = alice_api.add(PARAPHRASE_A)
    second = alice_api.add(PARAPHRASE_B)
    run_jobs(alice_ws)
    # Make `first` the evidence of the pair, as a batch listing it last would have (the order is not fixed).
    with workspace_context(alice_ws):
        similarity.similarity_edges_replace(
            workspace_id=alice_ws,
            updates=[
                similarity.SimilarityUpdate(
                    memory_id=uuid.UUID(first["id"]),
                    neighbours=[(uuid.UUID(second["id"]), 0.9)],
                    expires_at=None,
                ),
            ],
        )
        assert set(
            GraphEdge.objects.filter(edge_type="similar_to").values_list("evidence_memory_id", flat=True)
        ) == {uuid.UUID(first["id"])}
    alice_api.ok("memories/edit", {"id": second["id"], "content": UNRELATED})
    run_jobs(alice_ws)
    assert similar_pairs(alice_ws) == set()


def test_it_drops_vectors_and_edges_on_forget(alice_api, alice_ws, local_embedder):
    first = alice_api.add(PARAPHRASE_A)
    second = alice_api.add(PARAPHRASE_B)
    run_jobs(alice_ws)
    alice_api.ok("memories/forget", {"id": first["id"]})
    assert similar_pairs(alice_ws) == set()
    with workspace_context(alice_ws):
        assert not MemoryEmbedding.objects.filter(memory_id=first["id"]).exists()
        assert not GraphNode.objects.filter(node_type="memory", node_key=first["id"]).exists()
    found = alice_api.ok("memories/search", {"query": "Friday deploy releases", "strategy": "semantic"})
    assert first["id"] not in {m["id"] for m in found["memories"]}
    assert second["id"] in {m["id"] for m in found["memories"]}


def test_it_retries_with_backoff_then_dead_letters(alice_api, alice_ws, settings):
    # A litellm model aimed at a closed local port: every call fails fast.
    settings.EMBEDDING_MODEL = "openai/text-embedding-3-small"
    settings.EMBEDDING_API_BASE = "http://127.0.0.1:9/v1"
    settings.EMBEDDING_API_KEY = "test"
    settings.EMBEDDING_TIMEOUT_SECONDS = 1
    reset_embedders()
    try:
        memory = alice_api.add("this memory cannot be embedded right now")
        run_jobs(alice_ws)
        with workspace_context(alice_ws):
            job = PipelineJob.objects.get(memory_id=memory["id"])
        assert (job.status, job.attempts, job.last_error_code) == ("queued", 1, "EMBEDDING_FAILED")
        assert timedelta(seconds=0.5) < job.run_after - job.updated_at <= timedelta(seconds=1.5)
        # The retry message is invisible to workers until the backoff has passed.
        assert OrmQ.objects.using("app").filter(lock__gt=timezone.now()).exists()

        delays = []
        for _ in range(4):
            run_jobs(alice_ws, include_delayed=True, max_jobs=1)
            with workspace_context(alice_ws):
                job = PipelineJob.objects.get(memory_id=memory["id"])
            delays.append(round((job.run_after - job.updated_at).total_seconds()))
        assert job.status == "dead_letter" and job.attempts == 5
        assert delays[:3] == [2, 4, 8]

        listed = alice_api.ok("memories/list", {})["memories"][0]
        assert listed["pipeline"]["status"] == "dead_letter"
        status = alice_api.ok("graph/status", {})
        assert status["pipeline"]["deadLetter"] == 1
        assert status["health"] == "degraded"
        assert status["recentErrors"][0]["code"] == "EMBEDDING_FAILED"

        # Search keeps answering, lexically, and says why.
        found = alice_api.ok("memories/search", {"query": "embedded", "strategy": "hybrid"})
        assert found["memories"][0]["id"] == memory["id"]
        assert found["trace"]["fallbackReason"] == "query_embedding_unavailable"
    finally:
        reset_embedders()


def test_it_keeps_the_write_when_the_graph_fails(alice_api, alice_ws, monkeypatch):
    real = mapping.extract_deterministic_graph

    def broken(memory):
        graph = real(memory)
        graph.nodes.append(("topic", None, "no key", None))  # NOT NULL violation inside the mapping statement
        return graph

    monkeypatch.setattr(mapping, "extract_deterministic_graph", broken)
    memory = alice_api.add("the graph will fail for this one", tags=["ops"])
    assert alice_api.ok("memories/list", {})["memories"][0]["id"] == memory["id"]
    with workspace_context(alice_ws):
        # The mapping function's own exception block rolled the graph write back; the job was still queued.
        assert not GraphNode.objects.exists()
        assert PipelineJob.objects.filter(memory_id=memory["id"]).exists()
    status = alice_api.ok("graph/status", {})
    assert status["recentErrors"][0]["code"] == "GRAPH_MAPPING_SYNC_FAILED"
    assert status["recentErrors"][0]["memoryId"] == memory["id"]
    assert "23502" in status["recentErrors"][0]["message"]  # not_null_violation, as PostgreSQL reported it


def test_it_keeps_an_edit_when_the_graph_fails(alice_api, alice_ws, monkeypatch):
    memory = alice_api.add("the graph is fine for this one", tags=["ops"])

    def broken(**kwargs):
        with connections["app"].cursor() as cursor:
            cursor.execute(
                "INSERT INTO graph_nodes (workspace_id, node_type, node_key, label, created_at, updated_at) "
                "VALUES (%s, 'topic', 'half-written', 'x', now(), now())",
                [alice_ws],
            )
        raise RuntimeError("injected graph failure")

    monkeypatch.setattr(mapping, "mapping_sync", broken)
    alice_api.ok("memories/edit", {"id": memory["id"], "tags": ["ops", "later"]})
    assert alice_api.ok("memories/list", {})["memories"][0]["tags"] == ["ops", "later"]
    with workspace_context(alice_ws):
        # The savepoint rolled the partial graph write back.
        assert not GraphNode.objects.filter(node_key="half-written").exists()
    status = alice_api.ok("graph/status", {})
    assert status["recentErrors"][0]["code"] == "GRAPH_MAPPING_SYNC_FAILED"
    assert "injected graph failure" in status["recentErrors"][0]["message"]


def test_it_reports_partial_vector_coverage(alice_api, alice_ws, local_embedder):
    embedded = alice_api.add(PARAPHRASE_A)
    run_jobs(alice_ws)
    pending = alice_api.add("Friday releases use the blue-green switch for payments")
    found = alice_api.ok("memories/search", {"query": "Friday blue-green payments", "strategy": "semantic"})
    assert found["trace"]["fallbackReason"] == "partial_vector_coverage"
    assert found["trace"]["appliedStrategy"] == "hybrid"
    assert {embedded["id"], pending["id"]} <= {m["id"] for m in found["memories"]}


def test_it_finds_paraphrases_that_words_miss(alice_api, alice_ws, local_embedder):
    target = alice_api.add("Our production database is PostgreSQL 16 hosted on AWS RDS.")
    alice_api.add(UNRELATED)
    run_jobs(alice_ws)
    query = "which relational DB engine runs in prod"
    assert alice_api.ok("memories/search", {"query": query, "strategy": "lexical"})["count"] == 0
    # The default is hybrid: it finds the paraphrase too.
    assert alice_api.ok("memories/search", {"query": query})["memories"][0]["id"] == target["id"]
    for strategy in ("semantic", "hybrid"):
        found = alice_api.ok("memories/search", {"query": query, "strategy": strategy})
        assert found["memories"][0]["id"] == target["id"], strategy
        assert found["trace"]["appliedStrategy"] == strategy
        assert found["trace"]["fallbackTriggered"] is False
        assert found["trace"]["semanticCandidates"] >= 1

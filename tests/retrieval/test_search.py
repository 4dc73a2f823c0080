"""POST memories/search: full-text search with stemming and web-search syntax, filters, strategies, scope."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
from django.utils import timezone

from memories.models import Memory
from memories.selectors import MemoryScope
from retrieval import search as search_service
from retrieval import vectors
from tenancy.rls import workspace_context
from tests.memories.helpers import ACME_SCOPE, add_org_global, ids, personal_workspace_id


def search(api, query, **fields):
    return api.ok("memories/search", {"query": query, **fields})


def test_it_works(alice_api):
    deploy = alice_api.add("We deploy with blue-green on Fridays", tags=["ops"])
    alice_api.add("Lunch is at noon")
    r = alice_api.post("memories/search", {"query": "deploy"})
    assert r.status_code == 200
    envelope = r.json()
    assert envelope["ok"] is True and envelope["meta"]["endpoint"] == "/api/sdk/v1/memories/search"
    data = envelope["data"]
    assert set(data) == {"memories", "count", "trace"}
    assert data["memories"] == [deploy]
    assert data["count"] == 1
    # Hybrid is the default; without vectors (no worker ran) it answers lexically and says why.
    assert data["trace"] == {
        "requestedStrategy": "hybrid",
        "appliedStrategy": "lexical",
        "lexicalCandidates": 1,
        "semanticCandidates": 0,
        "fallbackTriggered": True,
        "fallbackReason": "vectors_unavailable",
        "timeWindow": None,
        "reranker": None,
    }


def test_it_finds_nothing(alice_api):
    alice_api.add("We deploy with blue-green on Fridays")
    data = search(alice_api, "kubernetes")
    assert data["memories"] == [] and data["count"] == 0
    assert data["trace"]["lexicalCandidates"] == 0


def test_it_stems_words(alice_api):
    deploy = alice_api.add("deploy")
    assert ids(search(alice_api, "deploying")["memories"]) == [deploy["id"]]
    deployments = alice_api.add("Deployments run nightly")
    assert set(ids(search(alice_api, "deployed")["memories"])) == {deploy["id"], deployments["id"]}


def test_it_is_case_insensitive(alice_api):
    memory = alice_api.add("PostgreSQL is the only state")
    assert ids(search(alice_api, "postgresql")["memories"]) == [memory["id"]]


def test_it_speaks_web_search_syntax(alice_api):
    friday = alice_api.add("We deploy on Fridays")
    monday = alice_api.add("We deploy on Mondays")
    phrase = alice_api.add("Blue green rollout keeps users online")
    scattered = alice_api.add("Green tea, blue sky")
    redis = alice_api.add("Sessions live in Redis")
    assert ids(search(alice_api, "deploy -friday")["memories"]) == [monday["id"]]
    assert ids(search(alice_api, '"blue green"')["memories"]) == [phrase["id"]]
    assert set(ids(search(alice_api, "blue green")["memories"])) == {phrase["id"], scattered["id"]}
    assert set(ids(search(alice_api, "redis or monday")["memories"])) == {redis["id"], monday["id"]}
    # Memories with every word come first; memories with some of the words fill the rest.
    assert ids(search(alice_api, "deploy friday")["memories"]) == [friday["id"], monday["id"]]


def test_it_searches_tags_and_category(alice_api):
    tagged = alice_api.add("Use rolling updates", tags=["kubernetes"])
    categorised = alice_api.add("Keep pods small", category="containers")
    assert ids(search(alice_api, "kubernetes")["memories"]) == [tagged["id"]]
    assert ids(search(alice_api, "containers")["memories"]) == [categorised["id"]]


def test_it_ranks_content_above_tags(alice_api):
    by_tag = alice_api.add("Use rolling updates", tags=["kubernetes"])
    by_content = alice_api.add("Kubernetes runs the api")
    assert ids(search(alice_api, "kubernetes")["memories"]) == [by_content["id"], by_tag["id"]]


def test_it_falls_back_to_substring_for_stop_words(alice_api):
    memory = alice_api.add("to be or not to be")
    alice_api.add("something else entirely")
    data = search(alice_api, "to be")
    assert ids(data["memories"]) == [memory["id"]]


def test_it_filters_by_type_and_layer(alice_api):
    rule = alice_api.add("Always run the deploy checklist", type="rule")
    fact = alice_api.add("The deploy takes ten minutes", type="fact")
    working = alice_api.add("Deploy is half done", layer="working")
    assert ids(search(alice_api, "deploy", type="rule")["memories"]) == [rule["id"]]
    assert ids(search(alice_api, "deploy", type="fact")["memories"]) == [fact["id"]]
    assert ids(search(alice_api, "deploy", layer="working")["memories"]) == [working["id"]]
    assert ids(search(alice_api, "deploy", layer="rule")["memories"]) == [rule["id"]]
    assert set(ids(search(alice_api, "deploy", layer="long_term")["memories"])) == {fact["id"]}
    assert search(alice_api, "deploy", type="skill", layer="rule")["memories"] == []


def test_it_honours_the_limit(alice_api):
    for i in range(12):
        alice_api.add(f"deploy note {i}")
    assert search(alice_api, "deploy")["count"] == 10
    assert search(alice_api, "deploy", limit=3)["count"] == 3
    assert search(alice_api, "deploy", limit=50)["count"] == 12


def test_it_reports_a_fallback_for_semantic_and_hybrid(alice_api, local_embedder):
    # The model is loaded but no job has run yet, so the workspace has no vectors.
    memory = alice_api.add("We deploy on Fridays")
    for strategy in ("semantic", "hybrid", "hybrid_graph"):
        data = search(alice_api, "deploy", strategy=strategy)
        assert ids(data["memories"]) == [memory["id"]]
        assert data["trace"]["requestedStrategy"] == ("hybrid" if strategy == "hybrid_graph" else strategy)
        assert data["trace"]["appliedStrategy"] == "lexical"
        assert data["trace"]["fallbackTriggered"] is True
        assert data["trace"]["fallbackReason"] == "vectors_unavailable"
        assert data["trace"]["semanticCandidates"] == 0


def test_it_maps_baseline_to_lexical(alice_api):
    alice_api.add("We deploy on Fridays")
    for strategy in ("baseline", "lexical"):
        trace = search(alice_api, "deploy", strategy=strategy)["trace"]
        assert trace["requestedStrategy"] == "lexical" and trace["appliedStrategy"] == "lexical"
        assert trace["fallbackTriggered"] is False and trace["fallbackReason"] is None


def test_it_rejects_an_unknown_strategy(alice_api):
    error = alice_api.error(
        "memories/search", {"query": "x", "strategy": "vector"}, status=400, code="INVALID_REQUEST"
    )
    assert error["details"]["issues"][0]["field"] == "strategy"


def test_it_requires_a_query(alice_api):
    for body in ({}, {"query": ""}, {"query": "   "}, {"query": None}):
        error = alice_api.error("memories/search", body, status=400, code="QUERY_REQUIRED")
        assert error["details"]["issues"][0]["field"] == "query"


def test_it_limits_the_query_to_500_characters(alice_api):
    assert search(alice_api, "x" * 500)["memories"] == []
    error = alice_api.error("memories/search", {"query": "x" * 501}, status=400, code="INVALID_REQUEST")
    assert error["details"]["issues"][0]["field"] == "query"


def test_it_refuses_a_nul_character(alice_api):
    error = alice_api.error("memories/search", {"query": "deploy\x00"}, status=400, code="INVALID_REQUEST")
    assert error["details"]["issues"][0]["field"] == "query"


def test_it_rejects_bad_fields(alice_api):
    for limit in (0, 51, -1, "many"):
        error = alice_api.error(
            "memories/search", {"query": "x", "limit": limit}, status=400, code="INVALID_REQUEST"
        )
        assert error["details"]["issues"][0]["field"] == "limit"
    alice_api.error(
        "memories/search", {"query": "x", "layer": "deep"}, status=400, code="MEMORY_LAYER_INVALID"
    )
    error = alice_api.error(
        "memories/search", {"query": "x", "type": "memo"}, status=400, code="INVALID_REQUEST"
    )
    assert error["details"]["issues"][0]["field"] == "type"
    error = alice_api.error(
        "memories/search", {"query": "x", "tags": "ops"}, status=400, code="INVALID_REQUEST"
    )
    assert error["details"]["issues"] == [
        {"field": "tags", "message": "unknown field; remove it", "type": "extra_forbidden"}
    ]


def test_it_hides_forgotten_and_expired_memories(personas):
    api = personas.alice_api
    forgotten = api.add("deploy forgotten")
    expired = api.add("deploy expired", layer="working")
    live = api.add("deploy live")
    api.ok("memories/forget", {"id": forgotten["id"]})
    # Search compares with SQL now(), the start of the transaction, and a test runs in one transaction:
    # expire it well before the test began.
    with workspace_context(personal_workspace_id(personas.alice)):
        Memory.objects.filter(pk=expired["id"]).update(expires_at=timezone.now() - timedelta(hours=1))
    assert ids(search(api, "deploy")["memories"]) == [live["id"]]


def test_it_sees_shared_and_own_user_memories(alice_api):
    shared = alice_api.add("deploy shared")
    u1 = alice_api.add("deploy for u1", scope={"userId": "u1"})
    u2 = alice_api.add("deploy for u2", scope={"userId": "u2"})
    assert set(ids(search(alice_api, "deploy", scope={"userId": "u1"})["memories"])) == {
        shared["id"],
        u1["id"],
    }
    assert set(ids(search(alice_api, "deploy", scope={"userId": "u2"})["memories"])) == {
        shared["id"],
        u2["id"],
    }
    assert ids(search(alice_api, "deploy")["memories"]) == [shared["id"]]


def test_it_sees_global_and_own_project_memories(alice_api):
    glob = alice_api.add("deploy everywhere")
    api = alice_api.add("deploy the api", scope={"projectId": "github.com/alice/api"})
    web = alice_api.add("deploy the web", scope={"projectId": "github.com/alice/web"})
    found = ids(search(alice_api, "deploy", scope={"projectId": "github.com/alice/api"})["memories"])
    assert set(found) == {glob["id"], api["id"]}
    found = ids(search(alice_api, "deploy", scope={"projectId": "github.com/alice/web"})["memories"])
    assert set(found) == {glob["id"], web["id"]}
    assert ids(search(alice_api, "deploy")["memories"]) == [glob["id"]]


def test_it_never_searches_another_workspace(personas):
    secret = personas.alice_api.add("deploy secret of alice")
    assert search(personas.bob_api, "deploy")["memories"] == []
    assert search(personas.bob_api, "deploy", scope=ACME_SCOPE)["memories"] == []
    assert search(personas.charlie_api, "deploy")["memories"] == []
    assert search(personas.alice_api, "deploy", scope=ACME_SCOPE)["memories"] == []
    assert ids(search(personas.alice_api, "deploy")["memories"]) == [secret["id"]]


def test_it_keeps_org_memories_in_the_org(personas):
    project = personas.alice_api.add("deploy acme with argo", scope=ACME_SCOPE)
    shared = add_org_global(personas, "deploy acme on tuesdays")
    found = ids(search(personas.bob_api, "deploy", scope=ACME_SCOPE)["memories"])
    assert set(found) == {project["id"], shared["id"]}
    found = ids(search(personas.alice_api, "deploy", scope=ACME_SCOPE)["memories"])
    assert set(found) == {project["id"], shared["id"]}
    assert search(personas.alice_api, "deploy")["memories"] == []
    assert search(personas.alice_api, "deploy", scope={"projectId": "github.com/alice/x"})["memories"] == []
    assert search(personas.charlie_api, "deploy", scope=ACME_SCOPE)["memories"] == []
    assert search(personas.bob_api, "deploy")["memories"] == []


def test_it_keeps_every_neighbours_place_but_loads_only_readable_memories(personas, settings):
    """The vector search and the load of its memories are one statement: a neighbour the caller may not read
    (a deleted memory whose vector is still stored, another layer) keeps its place and its cosine for the
    tiers' depths, but is not loaded."""
    ws = personal_workspace_id(personas.alice)
    now = timezone.now()
    basis = np.eye(8, dtype=np.float32)
    query = (basis[0] + 0.1 * basis[1]).astype(np.float32)
    query /= np.linalg.norm(query)
    with workspace_context(ws):
        times = {"created_at": now, "updated_at": now}
        deleted = Memory.objects.create(workspace_id=ws, content="deleted", deleted_at=now, **times)
        kept = Memory.objects.create(workspace_id=ws, content="kept", **times)
        working = Memory.objects.create(
            workspace_id=ws, content="working", layer="working", expires_at=now + timedelta(hours=1), **times
        )
        rows = []
        for memory, vector in (
            (deleted, basis[0]),
            (kept, basis[0] + basis[1]),
            (working, basis[0] + 2 * basis[1]),
        ):
            rows.append(
                vectors.EmbeddingRow(
                    memory_id=memory.id,
                    user_id=None,
                    scope="global",
                    project_id=None,
                    expires_at=None,
                    content_sha256="",
                    vector=(vector / np.linalg.norm(vector)).astype(np.float32),
                )
            )
        vectors.embeddings_store(workspace_id=ws, model=settings.EMBEDDING_MODEL, rows=rows)
        found = search_service._semantic_candidates(
            workspace_id=ws, scope=MemoryScope(), query_vector=query, depths={"long_term": 40}
        )
        assert [memory_id for memory_id, _ in found.neighbours] == [deleted.id, kept.id, working.id]
        expected = [float(query @ row.vector) for row in rows]
        assert [round(cosine, 4) for _, cosine in found.neighbours] == [round(value, 4) for value in expected]
        assert [memory.id for memory in found.memories] == [kept.id] and found.partial is False

        # Nothing readable: the neighbours are still known; whether vectors are missing is asked apart.
        Memory.objects.filter(pk=kept.id).update(deleted_at=now)
        found = search_service._semantic_candidates(
            workspace_id=ws, scope=MemoryScope(), query_vector=query, depths={"long_term": 40}
        )
        assert len(found.neighbours) == 3 and found.memories == [] and found.partial is False

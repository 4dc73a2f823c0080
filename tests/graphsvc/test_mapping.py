"""The deterministic memory graph, built in the write transaction."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from graphsvc.models import GraphEdge, GraphNode, MemoryNodeLink
from tenancy.rls import workspace_context


def nodes(ws: int) -> set[tuple[str, str]]:
    with workspace_context(ws):
        return set(GraphNode.objects.values_list("node_type", "node_key"))


def links(ws: int, memory_id: str) -> set[tuple[str, str, str]]:
    with workspace_context(ws):
        return {
            (link.role, link.node.node_type, link.node.node_key)
            for link in MemoryNodeLink.objects.filter(memory_id=memory_id).select_related("node")
        }


def edges(ws: int) -> set[tuple[str, str, str]]:
    with workspace_context(ws):
        return {
            (
                e.edge_type,
                f"{e.from_node.node_type}:{e.from_node.node_key}",
                f"{e.to_node.node_type}:{e.to_node.node_key}",
            )
            for e in GraphEdge.objects.select_related("from_node", "to_node")
        }


def test_it_maps_a_full_memory(alice_api, ws):
    memory = alice_api.add(
        "Use connection pooling for Postgres",
        type="decision",
        tags=["Postgres", " perf ", "postgres"],
        category="Databases",
        scope={"userId": "dana", "projectId": "github.com/alice/api"},
    )
    assert links(ws, memory["id"]) == {
        ("self", "memory", memory["id"]),
        ("type", "memory_type", "decision"),
        ("scope", "repo", "github.com/alice/api"),
        ("subject", "user", "dana"),
        ("category", "category", "databases"),
        ("tag", "topic", "postgres"),
        ("tag", "topic", "perf"),
    }
    repo, user, category = "repo:github.com/alice/api", "user:dana", "category:databases"
    assert edges(ws) == {
        ("authored_by", repo, user),
        ("contains_type", repo, "memory_type:decision"),
        ("about", repo, category),
        ("about", user, category),
        ("about", repo, "topic:postgres"),
        ("about", repo, "topic:perf"),
        ("mentions", user, "topic:postgres"),
        ("mentions", user, "topic:perf"),
        ("related_to", category, "topic:postgres"),
        ("related_to", category, "topic:perf"),
    }
    with workspace_context(ws):
        node = GraphNode.objects.get(node_type="memory", node_key=memory["id"])
        repo_node = GraphNode.objects.get(node_type="repo")
    assert node.label == "Use connection pooling for Postgres"
    assert node.metadata["userId"] == "dana" and node.metadata["scope"] == "project"
    assert repo_node.label == "api"


def test_it_maps_a_bare_memory_to_its_type_only(alice_api, ws):
    memory = alice_api.add("x" * 200)
    assert nodes(ws) == {("memory", memory["id"]), ("memory_type", "note")}
    assert edges(ws) == set()
    with workspace_context(ws):
        label = GraphNode.objects.get(node_type="memory").label
    assert len(label) == 120 and label.endswith("...")


def test_it_shares_nodes_between_memories(alice_api, ws):
    first = alice_api.add("a", tags=["ops"])
    second = alice_api.add("b", tags=["ops"])
    with workspace_context(ws):
        topic = GraphNode.objects.get(node_type="topic", node_key="ops")
        linked = set(MemoryNodeLink.objects.filter(node=topic).values_list("memory_id", flat=True))
    assert {str(m) for m in linked} == {first["id"], second["id"]}


def test_it_expires_edges_of_working_memories(alice_api, ws):
    alice_api.add("scratch", layer="working", tags=["tmp"], scope={"userId": "u1"})
    with workspace_context(ws):
        expiries = set(GraphEdge.objects.values_list("expires_at", flat=True))
    assert len(expiries) == 1
    (expiry,) = expiries
    assert timezone.now() + timedelta(hours=23) < expiry <= timezone.now() + timedelta(hours=24, minutes=1)


def test_it_clears_the_expiry_when_promoted_to_long_term(alice_api, ws):
    memory = alice_api.add("scratch", layer="working", tags=["tmp"], scope={"userId": "u1"})
    alice_api.ok("memories/edit", {"id": memory["id"], "layer": "long_term", "scope": {"userId": "u1"}})
    with workspace_context(ws):
        assert set(GraphEdge.objects.values_list("expires_at", flat=True)) == {None}


def test_it_resyncs_on_edit_and_prunes_orphans(alice_api, ws):
    memory = alice_api.add("a", tags=["old"], category="Cat")
    alice_api.ok("memories/edit", {"id": memory["id"], "tags": ["new"], "content": "renamed"})
    assert ("topic", "old") not in nodes(ws)
    assert ("topic", "new") in nodes(ws)
    with workspace_context(ws):
        assert GraphNode.objects.get(node_type="memory").label == "renamed"


def test_it_keeps_nodes_other_memories_still_use(alice_api, ws):
    first = alice_api.add("a", tags=["shared"])
    alice_api.add("b", tags=["shared"])
    alice_api.ok("memories/forget", {"id": first["id"]})
    assert ("topic", "shared") in nodes(ws)
    assert ("memory", first["id"]) not in nodes(ws)


def test_it_removes_the_mapping_on_forget_bulk_forget_and_vacuum(alice_api, ws):
    single = alice_api.add("single", tags=["one"])
    bulk = [alice_api.add(f"bulk {i}", tags=["many"])["id"] for i in range(3)]
    alice_api.ok("memories/forget", {"id": single["id"]})
    alice_api.ok("memories/bulk-forget", {"filters": {"tags": ["many"]}})
    assert nodes(ws) == set()
    assert edges(ws) == set()
    with workspace_context(ws):
        assert not MemoryNodeLink.objects.filter(memory_id__in=[single["id"], *bulk]).exists()
    assert alice_api.ok("memories/vacuum", {})["purged"] == 4


def test_it_counts_the_graph_in_status(alice_api, ws):
    alice_api.add("a", tags=["ops", "ci"], scope={"projectId": "github.com/alice/api"})
    alice_api.add("b", tags=["ops"], scope={"projectId": "github.com/alice/api"})
    status = alice_api.ok("graph/status", {"topNodesLimit": 3})
    counts = status["counts"]
    assert counts["nodes"] == 6  # 2 memories, note type, repo, 2 topics
    assert counts["memoryLinks"] == 2 * 3 + 3  # self, type, scope each + 3 tags
    assert counts["activeEdges"] == counts["edges"] and counts["expiredEdges"] == 0
    assert counts["orphanNodes"] == 0
    top = status["topConnectedNodes"]
    assert len(top) == 3
    assert (
        top[0]["nodeType"] == "repo" and top[0]["degree"] == top[0]["memoryLinks"] + top[0]["outboundEdges"]
    )
    assert status["pipeline"]["queued"] == 2
    assert status["vectors"] == {
        "model": "local/all-MiniLM-L6-v2-int8-onnx",
        "vectors": 0,
        "accessPath": "exact",
    }


def test_it_answers_status_by_get(alice_api):
    response = alice_api.get("graph/status?topNodesLimit=2")
    assert response.status_code == 200
    assert response.json()["data"]["counts"]["nodes"] == 0


def test_it_validates_status_input(alice_api):
    alice_api.error("graph/status", {"topNodesLimit": 51}, status=400, code="INVALID_REQUEST")
    alice_api.error("graph/status", {"unknown": 1}, status=400, code="INVALID_REQUEST")


def test_it_keeps_status_inside_the_workspace(personas):
    personas.alice_api.add("alice private", tags=["secret-topic"])
    status = personas.charlie_api.ok("graph/status", {})
    assert status["counts"]["nodes"] == 0
    assert status["topConnectedNodes"] == []
    # A tenantId or projectId naming alice's things does not cross over either.
    status = personas.charlie_api.ok("graph/status", {"scope": {"projectId": "github.com/alice/x"}})
    assert status["counts"]["nodes"] == 0


def test_it_requires_a_key_for_status(anonymous_api):
    anonymous_api.error("graph/status", {}, status=401, code="MISSING_API_KEY")

"""On the Citus cluster (`make test-citus`): a new memory gets its graph mapping in the add's own transaction,
through the delegated mapping function, as on a single node."""

from __future__ import annotations

import os
import uuid

import pytest

from graphsvc.mapping import extract_deterministic_graph
from graphsvc.models import GraphEdge, GraphNode, MemoryNodeLink
from memories.models import Memory, PipelineError
from pipeline.services import snapshot
from tenancy.rls import workspace_context

pytestmark = [
    pytest.mark.skipif(
        not os.environ.get("CAIRN_CITUS_CLUSTER"), reason="runs on the Citus cluster (make test-citus)"
    ),
    # Each request in its own transaction, as served: inside a test's outer transaction the failure this
    # guards against does not show.
    pytest.mark.django_db(transaction=True, databases="__all__"),
]


def test_it_maps_a_new_memory_in_the_adds_transaction(alice_api, alice_ws):
    scope = {"projectId": "billing"}
    first = alice_api.add(
        "Use connection pooling for Postgres", tags=["db", "perf"], category="ops", scope=scope
    )
    # A second memory reuses the nodes the first one created (project, category, a tag).
    second = alice_api.add("Postgres needs a vacuum schedule", tags=["db"], category="ops", scope=scope)
    with workspace_context(alice_ws):
        assert not PipelineError.objects.filter(workspace_id=alice_ws).exists()
        for added in (first, second):
            memory = Memory.objects.get(workspace_id=alice_ws, id=uuid.UUID(added["id"]))
            graph = extract_deterministic_graph(snapshot(memory))
            linked = MemoryNodeLink.objects.filter(workspace_id=alice_ws, memory_id=memory.id)
            assert linked.count() == len(graph.links) > 0
            edges = GraphEdge.objects.filter(workspace_id=alice_ws, evidence_memory_id=memory.id)
            assert edges.count() == len(graph.edges) > 0
        tags = GraphNode.objects.filter(workspace_id=alice_ws, node_type="topic")
        assert sorted(tags.values_list("node_key", flat=True)) == ["db", "perf"]

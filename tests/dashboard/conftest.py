"""Dashboard fixtures: signed-in clients per persona and a small graph in acme (alice owns, bob is a member,
charlie is an outsider with his own org globex)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from graphsvc.models import (
    GraphCommunity,
    GraphCommunityMember,
    GraphEdge,
    GraphEntityAlias,
    GraphNode,
    MemoryNodeLink,
)
from memories.models import Memory
from tenancy.rls import workspace_context


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def alice_web(personas) -> Client:
    return signed_in(personas.alice)


@pytest.fixture
def bob_web(personas) -> Client:
    return signed_in(personas.bob)


@pytest.fixture
def charlie_web(personas) -> Client:
    return signed_in(personas.charlie)


@dataclass
class SeededGraph:
    workspace_id: int
    memory: Memory
    ada: GraphNode
    python: GraphNode
    topic: GraphNode
    memory_node: GraphNode
    fact: GraphEdge
    old_fact: GraphEdge
    topic_edge: GraphEdge
    community: GraphCommunity


def seed_graph(workspace_id: int) -> SeededGraph:
    """A memory, its memory node, two entities with a current and a replaced fact, a topic and a community."""
    now = timezone.now()
    with workspace_context(workspace_id):
        memory = Memory.objects.create(
            workspace_id=workspace_id,
            content="Ada moved the billing service to Python 3.13",
            type="fact",
            created_at=now,
            updated_at=now,
        )
        node = GraphNode.objects.create
        memory_node = node(
            workspace_id=workspace_id, node_type="memory", node_key=str(memory.id), label="Ada moved…"
        )
        ada = node(
            workspace_id=workspace_id,
            node_type="person",
            node_key="ada lovelace",
            label="Ada Lovelace",
            summary="Backend engineer",
            mention_count=3,
            first_seen_at=now,
            last_seen_at=now,
        )
        python = node(
            workspace_id=workspace_id,
            node_type="language",
            node_key="python",
            label="Python",
            mention_count=5,
        )
        topic = node(workspace_id=workspace_id, node_type="topic", node_key="billing", label="billing")
        GraphEntityAlias.objects.create(workspace_id=workspace_id, node=ada, alias="ada")
        GraphEntityAlias.objects.create(workspace_id=workspace_id, node=ada, alias="a. lovelace")
        fact = GraphEdge.objects.create(
            workspace_id=workspace_id,
            edge_key=f"f:{uuid.uuid4()}",
            from_node=ada,
            to_node=python,
            edge_type="uses",
            edge_class="entity",
            origin="llm_entity",
            weight=0.9,
            confidence=0.8,
            fact="Ada uses Python 3.13",
            evidence_memory_id=memory.id,
            evidence_text="moved the billing service to Python 3.13",
            valid_from=now - timedelta(days=1),
        )
        old_fact = GraphEdge.objects.create(
            workspace_id=workspace_id,
            edge_key=f"f:{uuid.uuid4()}",
            from_node=ada,
            to_node=python,
            edge_type="uses",
            edge_class="entity",
            origin="llm_entity",
            weight=0.9,
            confidence=0.7,
            fact="Ada uses Python 3.11",
            valid_from=now - timedelta(days=30),
            valid_to=now - timedelta(days=1),
            expired_at=now - timedelta(days=1),
        )
        topic_edge = GraphEdge.objects.create(
            workspace_id=workspace_id,
            edge_key=f"m:{memory.id}:about",
            from_node=memory_node,
            to_node=topic,
            edge_type="about_topic",
            edge_class="semantic",
            origin="mapping",
            weight=0.3,
            confidence=1.0,
        )
        for target, role in ((memory_node, "self"), (ada, "mentions"), (python, "mentions"), (topic, "tag")):
            MemoryNodeLink.objects.create(
                workspace_id=workspace_id, memory_id=memory.id, node=target, role=role
            )
        community = GraphCommunity.objects.create(
            workspace_id=workspace_id,
            name="billing people",
            summary="Who works on billing",
            fingerprint="f" * 64,
        )
        for member in (ada, python):
            GraphCommunityMember.objects.create(workspace_id=workspace_id, node=member, community=community)
    return SeededGraph(
        workspace_id, memory, ada, python, topic, memory_node, fact, old_fact, topic_edge, community
    )


@pytest.fixture
def graph(personas) -> SeededGraph:
    return seed_graph(personas.acme.id)

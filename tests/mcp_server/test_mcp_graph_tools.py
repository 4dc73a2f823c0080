"""The entity graph's MCP tools (graph_facts, graph_traverse, graph_entities, graph_communities, graph_stats)
and get_context, driven in-process by the official MCP client against a graph built in the database: each
answers in text a model reads (one line per fact, node or entity; the context with each memory's id and why it
is there) and carries the full JSON as structured content; each shows an end user only what their memories
(or shared ones) support."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from mcp import Client

from graphsvc.models import GraphCommunity, GraphCommunityMember
from mcp_server.server import McpSettings, build_server
from tenancy.rls import workspace_context
from tests.graphsvc.graph_builder import GraphBuilder

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


@pytest.fixture
def team(personas, alice_ws) -> GraphBuilder:
    """Alice and Bob work on the Payments Gateway, which uses Kubernetes; Eve audits it, which only end user
    u2's memory says."""
    api = personas.alice_api
    private = api.add("Eve audits the payments gateway every quarter", scope={"userId": "u2"})
    g = GraphBuilder(alice_ws)
    g.entity("Alice Martin", type="person", summary="Backend engineer", aliases=("ali",))
    g.entity("Payments Gateway", type="project", summary="Routes card payments")
    g.fact("Alice Martin", "works_on", "Payments Gateway")
    g.fact("Alice Martin", "knows", "Bob Stone")
    g.fact("Bob Stone", "works_on", "Payments Gateway")
    g.fact("Payments Gateway", "uses", "Kubernetes")
    audits = g.fact("Eve Moss", "audits", "Payments Gateway")
    g.supported_by(audits, memory_id=private["id"], user_id="u2")
    g.mentioned_in("Eve Moss", memory_id=private["id"])
    for name, summary, members in (
        (
            "payments team",
            "The people behind card payments.",
            ("Alice Martin", "Payments Gateway", "Bob Stone"),
        ),
        ("audit", "Audits of the platform.", ("Eve Moss", "Kubernetes")),
    ):
        with workspace_context(alice_ws):
            community = GraphCommunity.objects.create(
                workspace_id=alice_ws, name=name, summary=summary, fingerprint=name
            )
            GraphCommunityMember.objects.bulk_create(
                GraphCommunityMember(workspace_id=alice_ws, node_id=g.ids[member], community_id=community.id)
                for member in members
            )
    return g


def call(key: str, calls: list[tuple[str, dict[str, Any]]], *, user: str | None = None) -> list[Any]:
    default_scope = {"userId": user} if user else {}
    server = build_server(McpSettings(api_key=key, default_scope=default_scope))

    async def scenario() -> list[Any]:
        async with Client(server) as client:
            results = [await client.call_tool(name, arguments) for name, arguments in calls]
        # The tools' database thread outlives the test: leave no connection open on the test database.
        await sync_to_async(connections.close_all, thread_sensitive=True)()
        return results

    return asyncio.run(scenario())


def text(result: Any) -> str:
    assert not result.is_error, result.content
    return result.content[0].text


def error(result: Any) -> str:
    assert result.is_error, result.structured_content
    return result.content[0].text


def test_it_answers_in_text_with_the_json_as_structured_content(personas, team):
    facts, works_on, in_team, entities, detail, stats, communities = call(
        personas.alice_api.key,
        [
            ("graph_facts", {"query": "what does Alice work on"}),
            ("graph_facts", {"entity": "ali", "edge_types": ["works on"], "direction": "out"}),
            (
                "graph_traverse",
                {"start_entity": "Payments Gateway", "edge_types": ["Works-On"], "direction": "in"},
            ),
            ("graph_entities", {"query": "payments", "type": "project"}),
            ("graph_entities", {"entity": "Alice Martin"}),
            ("graph_stats", {}),
            ("graph_communities", {}),
        ],
    )
    # What Alice works on comes first: the relation the query names outranks her other facts.
    first = facts.structured_content["facts"][0]
    assert (first["source"], first["relation"], first["target"]) == (
        "Alice Martin",
        "works_on",
        "Payments Gateway",
    )
    assert text(facts).splitlines()[1].startswith("- Alice Martin works on Payments Gateway.")
    # By entity, one relation, out of it only: no teammate, no technology.
    assert [(f["source"], f["target"]) for f in works_on.structured_content["facts"]] == [
        ("Alice Martin", "Payments Gateway")
    ]
    assert "Bob Stone" not in text(works_on) and "Kubernetes" not in text(works_on)
    assert {n["name"] for n in in_team.structured_content["nodes"]} == {"Alice Martin", "Bob Stone"}
    assert "Bob Stone (id " in text(in_team) and "-works_on->" in text(in_team)
    assert [e["name"] for e in entities.structured_content["entities"]] == ["Payments Gateway"]
    assert text(entities).startswith("- Payments Gateway [project] id ")
    shown = text(detail)
    assert (
        "Aliases: ali, alice martin" in shown and "- fact " in shown and "works on Payments Gateway" in shown
    )
    # Eve Moss, whom only u2's memory names, is not counted for a caller acting for no end user.
    assert stats.structured_content["entitiesByType"] == {"concept": 2, "person": 1, "project": 1}
    assert text(stats).startswith("4 entities (") and "works_on 2" in text(stats)
    assert "The people behind card payments." in text(communities)
    for result in (facts, works_on, in_team, entities, detail, stats, communities):
        # The text is for reading, the JSON for programs: never the JSON itself again.
        assert not text(result).lstrip().startswith("{")


def test_it_shows_an_end_user_only_what_their_or_shared_memories_support(personas, team):
    key = personas.alice_api.key
    u1 = call(
        key,
        [
            ("graph_entities", {"query": "eve"}),
            ("graph_facts", {"entity": "Eve Moss"}),
            ("graph_stats", {}),
            ("graph_communities", {}),
            ("graph_traverse", {"start_entity": "Payments Gateway"}),
        ],
        user="u1",
    )
    u2 = call(key, [("graph_entities", {"query": "eve"}), ("graph_communities", {})], user="u2")
    assert text(u1[0]) == "No entity matched." and u1[0].structured_content["entities"] == []
    assert error(u1[1]).startswith("ENTITY_NOT_FOUND: ")
    assert u1[2].structured_content["entities"] == 4 and "audits" not in text(u1[2])
    # A community with a member u1 may not see shows neither its summary nor that member.
    audit = next(c for c in u1[3].structured_content["communities"] if c["members"] == ["Kubernetes"])
    assert audit["summary"] == "" and "Audits of the platform." not in text(u1[3])
    assert "Eve Moss" not in text(u1[4])
    assert [e["name"] for e in u2[0].structured_content["entities"]] == ["Eve Moss"]
    assert "Audits of the platform." in text(u2[1]) and "Eve Moss" in text(u2[1])


def test_it_refuses_what_the_api_refuses_with_its_codes(personas, team):
    missing, too_deep, neither, misspelt, wrong_direction = call(
        personas.alice_api.key,
        [
            ("graph_traverse", {"start_entity": "Alise Martin"}),
            ("graph_traverse", {"start_entity": "Alice Martin", "max_hops": 4}),
            ("graph_facts", {"limit": 5}),
            ("graph_facts", {"query": "x", "scope": {"user": "someone"}}),
            ("graph_facts", {"query": "alice", "direction": "sideways"}),
        ],
    )
    # An unknown name answers with the closest ones the caller may see.
    assert "ENTITY_NOT_FOUND" in error(missing) and "Closest: Alice Martin" in error(missing)
    assert '"closest": ["Alice Martin"]' in error(missing)
    assert "INVALID_REQUEST" in error(too_deep) and "maxHops" in error(too_deep)
    assert "INVALID_REQUEST" in error(neither) and "send query (words naming entities) or entity" in error(
        neither
    )
    assert "user" in error(misspelt)
    assert "direction" in error(wrong_direction)


def test_it_gives_get_context_as_text_with_each_memory_id_and_why(personas, alice_ws, team):
    api = personas.alice_api
    api.add("Never deploy the payments gateway on Fridays", type="rule")
    note = api.add("The payments gateway retries declined cards twice", tags=["payments"])
    other = api.add("Card payments settle overnight", tags=["payments"])
    (result,) = call(api.key, [("get_context", {"query": "payments gateway retries", "limit": 2})])
    data, shown = result.structured_content, text(result)
    assert data["context"] in shown  # the ready-to-read text itself, then the ids
    assert f"- {note['id']} [long_term] matches the query" in shown
    assert {m["id"] for m in data["memories"]} <= {note["id"], other["id"]}
    assert all(m["id"] in shown for m in data["memories"] + data["rules"])
    assert "## Known facts" in shown and "works on Payments Gateway" in shown
    # Much shorter than the JSON it stands for (the memories three times over, the trace, the pipeline).
    assert len(shown) * 2 < len(json.dumps(data))

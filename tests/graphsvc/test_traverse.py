"""graph/traverse: reached nodes with paths and scores, typed edges, point in time, limits and 404s."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.graphsvc.graph_builder import GraphBuilder


@pytest.fixture
def chain(alice_ws) -> GraphBuilder:
    g = GraphBuilder(alice_ws)
    g.fact("Alex Doe", "works_on", "Project X", confidence=0.9)
    g.fact("Project X", "uses", "Postgres DB", confidence=0.8)
    g.fact("Postgres DB", "runs_on", "Linux Box")
    g.fact("Alex Doe", "knows", "Sam Lee")
    return g


def test_it_walks_from_an_entity_with_paths_and_scores(chain, alice_api):
    data = alice_api.ok("graph/traverse", {"startEntity": "alex doe"})
    assert data["start"]["name"] == "Alex Doe"
    by_name = {n["name"]: n for n in data["nodes"]}
    assert set(by_name) == {"Project X", "Sam Lee", "Postgres DB"}  # Linux Box is 3 hops away
    postgres = by_name["Postgres DB"]
    assert postgres["hop"] == 2 and postgres["score"] == pytest.approx(0.72, abs=1e-3)
    assert [(s["source"], s["relation"], s["target"]) for s in postgres["path"]] == [
        ("Alex Doe", "works_on", "Project X"),
        ("Project X", "uses", "Postgres DB"),
    ]
    assert {e["relation"] for e in data["edges"]} == {"works_on", "uses", "knows"}

    deep = alice_api.ok("graph/traverse", {"startEntity": "Alex Doe", "maxHops": 3, "limit": 2})
    assert len(deep["nodes"]) == 2
    assert "Linux Box" in {
        n["name"] for n in alice_api.ok("graph/traverse", {"startEntity": "Alex Doe", "maxHops": 3})["nodes"]
    }


def test_it_follows_only_the_edge_types_asked_for_and_reads_the_past(chain, alice_api):
    data = alice_api.ok("graph/traverse", {"startEntity": "Alex Doe", "edgeTypes": ["works_on", "uses"]})
    assert {n["name"] for n in data["nodes"]} == {"Project X", "Postgres DB"}
    chain.fact(
        "Alex Doe",
        "lives_in",
        "Old Town",
        valid_from=timezone.now() - timedelta(days=300),
        valid_to=timezone.now() - timedelta(days=30),
    )
    then = alice_api.ok(
        "graph/traverse",
        {"startEntity": "Alex Doe", "maxHops": 1, "at": (timezone.now() - timedelta(days=100)).isoformat()},
    )
    now = alice_api.ok("graph/traverse", {"startEntity": "Alex Doe", "maxHops": 1})
    assert "Old Town" in {n["name"] for n in then["nodes"]}
    assert "Old Town" not in {n["name"] for n in now["nodes"]}


def test_it_refuses_unknown_entities_and_out_of_range_limits(chain, personas):
    api = personas.alice_api
    api.error("graph/traverse", {"startEntity": "Nobody"}, status=404, code="ENTITY_NOT_FOUND")
    too_deep = api.error(
        "graph/traverse", {"startEntity": "Alex Doe", "maxHops": 4}, status=400, code="INVALID_REQUEST"
    )
    assert "maxHops" in too_deep["message"]
    api.error("graph/traverse", {"startEntity": "Alex Doe", "limit": 101}, status=400, code="INVALID_REQUEST")
    api.error(
        "graph/traverse",
        {"startEntity": "Alex Doe", "edgeTypes": ["x"] * 21},
        status=400,
        code="INVALID_REQUEST",
    )
    personas.charlie_api.error(
        "graph/traverse", {"startEntity": "Alex Doe"}, status=404, code="ENTITY_NOT_FOUND"
    )

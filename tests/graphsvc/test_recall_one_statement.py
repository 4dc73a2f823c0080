"""Recall by query in one statement (facts.seeded_bfs): the same seeds, scores and facts as the two-statement
path (seeds_find_stored, then bfs), the workspace's settings applied from inside the statement, one round
trip, and a generic plan."""

from __future__ import annotations

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from graphsvc import facts
from graphsvc.models import GraphCommunity, GraphCommunityMember, GraphSettings
from tenancy.rls import workspace_context
from tests.graphsvc.graph_builder import GraphBuilder

QUERIES = [
    "what does alpha depend on",
    "billing alpha outage",
    "kubernets",
    "who runs the billing service",
    "invoices",
    "zzzqqq nothing",
    "al",
]


@pytest.fixture
def graph(alice_ws) -> GraphBuilder:
    """Five 'Alpha' entities in one community (the seed cap keeps three), hubs of different degree
    (structure re-ranks the word matches), facts of every class at 1-3 hops, old ones (decay) and retrieved
    ones (boost)."""
    g = GraphBuilder(alice_ws)
    g.entity("Billing Service", type="project", summary="Handles invoices")
    for i, name in enumerate(("Alpha One", "Alpha Two", "Alpha Three", "Alpha Four", "Alpha Five")):
        g.fact(name, "depends_on", "Billing Service", confidence=0.9 - i / 20, observed_days_ago=10 * i)
        for j in range(i):
            g.fact(name, "uses", f"Library {i}{j}", edge_class="entity", retrievals=j)
    g.fact("Billing Service", "runs_on", "Kubernetes")
    g.fact("Kubernetes", "uses", "Etcd", edge_class="temporal")
    g.fact("Billing Service", "caused", "Invoice Outage", edge_class="causal", observed_days_ago=30)
    g.fact("Invoice Outage", "preceded_by", "Alpha Five", edge_class="temporal")
    with workspace_context(alice_ws):
        community = GraphCommunity.objects.create(workspace_id=alice_ws, name="alphas", fingerprint="x")
        GraphCommunityMember.objects.bulk_create(
            GraphCommunityMember(workspace_id=alice_ws, node_id=g.ids[n], community_id=community.id)
            for n in g.ids
            if n.startswith("Alpha")
        )
    return g


def two_statements(workspace_id: int, query: str, *, limit: int, max_hops: int) -> tuple[list, list]:
    seeds, stored = facts.seeds_find_stored(workspace_id=workspace_id, query=query, limit=limit)
    reading = facts.reading_for(workspace_id=workspace_id, stored=stored)
    visits = min(facts.MAX_VISITED, max(facts.MIN_VISITS, facts.VISITS_PER_FACT * limit))
    walk = facts.bfs(
        reading=reading,
        seeds=seeds,
        max_hops=max_hops,
        max_visited=visits,
        limit=limit,
        relations=facts.query_terms(query).relations,
    )
    return seeds, walk.facts


def one_statement(workspace_id: int, query: str, *, limit: int, max_hops: int) -> tuple[list, list]:
    visits = min(facts.MAX_VISITED, max(facts.MIN_VISITS, facts.VISITS_PER_FACT * limit))
    seeded = facts.seeded_bfs(
        workspace_id=workspace_id,
        query=query,
        requested=None,
        max_hops=max_hops,
        limit=limit,
        max_visited=visits,
    )
    assert seeded is not None
    return seeded.seeds, seeded.walk.facts if seeded.seeds else []


def test_it_finds_the_same_seeds_scores_and_facts_as_the_two_statement_path(graph, alice_ws):
    with workspace_context(alice_ws):
        GraphSettings.objects.create(workspace_id=alice_ws, decay_rate=0.03, decay_rates={"uses": 0.2})
        compared = 0
        for query in QUERIES:
            for limit, max_hops in ((2, 1), (3, 2), (10, 3)):
                old_seeds, old_facts = two_statements(alice_ws, query, limit=limit, max_hops=max_hops)
                new_seeds, new_facts = one_statement(alice_ws, query, limit=limit, max_hops=max_hops)
                assert new_seeds == old_seeds, (query, limit)  # ids, names and exact float scores, in order
                # Effective confidence decays with the clock, which moved between the two reads.
                assert [f["confidence"] for f in new_facts] == pytest.approx(
                    [f["confidence"] for f in old_facts]
                )
                assert [{**f, "confidence": 0} for f in new_facts] == [
                    {**f, "confidence": 0} for f in old_facts
                ], (query, limit, max_hops)
                compared += len(new_facts)
    assert compared > 50
    # The community cap applied alike: five Alphas match, at most three seed.
    with workspace_context(alice_ws):
        seeds = one_statement(alice_ws, "alpha", limit=10, max_hops=1)[0]
    assert sum(s.name.startswith("Alpha") for s in seeds) == 3


def test_it_recalls_by_query_in_one_statement(graph, alice_ws):
    with workspace_context(alice_ws):
        for max_hops in (1, 2, 3):
            with CaptureQueriesContext(connections["app"]) as queries:
                data = facts.facts_recall(workspace_id=alice_ws, query="billing", max_hops=max_hops)
            assert data["facts"] and data["strategy"] == "bfs"
            assert len(queries) == 1 <= max_hops + 2
        # No word matched: the seed statement answered, nothing more runs without an embedding.
        with CaptureQueriesContext(connections["app"]) as queries:
            assert facts.facts_recall(workspace_id=alice_ws, query="zzzqqq")["facts"] == []
        assert len(queries) == 1


def test_it_applies_the_workspace_decay_rate_read_in_the_same_statement(graph, alice_ws):
    def confidence() -> float:
        with workspace_context(alice_ws):
            data = facts.facts_recall(
                workspace_id=alice_ws, query="alpha five", max_hops=1, limit=50, record=False
            )
        return next(
            f["confidence"]
            for f in data["facts"]
            if (f["source"], f["relation"]) == ("Alpha Five", "depends_on")
        )

    default = confidence()  # 40 days at GRAPH_DECAY_RATE
    with workspace_context(alice_ws):
        GraphSettings.objects.create(workspace_id=alice_ws, decay_rate=0)
    assert confidence() == pytest.approx(0.7) and default < 0.7
    with workspace_context(alice_ws):
        GraphSettings.objects.filter(workspace_id=alice_ws).update(decay_rates={"depends_on": 0.02})
    assert confidence() == pytest.approx(0.7 * 2.718281828**-0.8, abs=1e-3)


def test_it_runs_spreading_activation_when_the_workspace_chose_it_and_counts_only_what_it_returns(
    graph, alice_ws
):
    with workspace_context(alice_ws):
        explicit = facts.facts_recall(
            workspace_id=alice_ws, query="billing", strategy="spreading", record=False
        )
        GraphSettings.objects.create(workspace_id=alice_ws, recall_strategy="spreading")
        data = facts.facts_recall(workspace_id=alice_ws, query="billing")
        with connections["app"].cursor() as cursor:
            cursor.execute(
                "SELECT coalesce(sum(retrieval_count), 0) FROM graph_edges WHERE workspace_id = %s "
                "AND edge_type <> 'uses'",
                [alice_ws],
            )  # the fixture's 'uses' facts start counted
            counted = cursor.fetchone()[0]
    assert data["strategy"] == "spreading" and data["facts"]
    assert [(f["source"], f["relation"], f["target"]) for f in data["facts"]] == [
        (f["source"], f["relation"], f["target"]) for f in explicit["facts"]
    ]
    # The walk statement walked nothing (the BFS does not apply): only the facts spreading returned count.
    assert counted == sum(f["relation"] != "uses" for f in data["facts"])


def test_it_plans_the_recall_statement_once(graph, alice_ws):
    with workspace_context(alice_ws):
        for _ in range(3):
            facts.facts_recall(workspace_id=alice_ws, query="billing", record=False)
        with connections["app"].cursor() as cursor:
            cursor.execute(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                "WHERE statement LIKE '%%cfg AS MATERIALIZED%%'"
            )
            plans = cursor.fetchall()
    assert plans and all(generic >= 1 and custom == 0 for generic, custom in plans)

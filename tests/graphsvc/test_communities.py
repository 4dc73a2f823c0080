"""Communities: networkit label propagation over a workspace's facts, fingerprints that spare unchanged
communities their LLM summary, neighbour-majority joins between runs, graph/communities over HTTP."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connections

from graphsvc import upkeep
from graphsvc.models import GraphCommunity, GraphCommunityMember, GraphNode
from tenancy.rls import workspace_context
from tests.graphsvc.graph_builder import GraphBuilder


def two_clusters(workspace_id: int) -> GraphBuilder:
    g = GraphBuilder(workspace_id)
    for a, b in [("Ant One", "Ant Two"), ("Ant Two", "Ant Three"), ("Ant One", "Ant Three")]:
        g.fact(a, "works_with", b)
    for a, b in [
        ("Bee One", "Bee Two"),
        ("Bee Two", "Bee Three"),
        ("Bee One", "Bee Three"),
        ("Bee Three", "Bee Four"),
    ]:
        g.fact(a, "depends_on", b)
    g.entity("Lonely Node")
    return g


def community_of(node_id: int) -> int | None:
    """The entity's community (its membership row), inside the caller's workspace context."""
    return GraphCommunityMember.objects.filter(node_id=node_id).values_list("community_id", flat=True).first()


def members_of(community_id: int) -> list[int]:
    return list(
        GraphCommunityMember.objects.filter(community_id=community_id).values_list("node_id", flat=True)
    )


def detect(workspace_id: int, **kwargs):
    return upkeep.communities_refresh(workspace_id=workspace_id, **kwargs)


# The summaries run in worker threads with their own connections: they must see committed rows.
@pytest.mark.django_db(transaction=True, databases="__all__")
def test_it_groups_entities_and_skips_the_llm_for_unchanged_communities(alice_ws, fake_llm):
    fake_llm.answers["community_summary"] = {"summary": "A team of ants. They work together."}
    g = two_clusters(alice_ws)
    first = detect(alice_ws)
    assert first["communities"] == 2 and first["written"] == 2 and first["summarized"] == 2
    assert len(fake_llm.calls_for("community_summary")) == 2
    with workspace_context(alice_ws):
        communities = {frozenset(members_of(c.id)): c for c in GraphCommunity.objects.all()}
        ants = frozenset(g.ids[n] for n in ("Ant One", "Ant Two", "Ant Three"))
        assert ants in communities and communities[ants].summary.startswith("A team of ants")
        assert community_of(g.ids["Lonely Node"]) is None

    second = detect(alice_ws)
    assert second["unchanged"] == 2 and second["written"] == 0
    assert len(fake_llm.calls_for("community_summary")) == 2  # zero LLM calls on an unchanged graph

    g.fact("Bee Four", "depends_on", "Bee Five")
    third = detect(alice_ws)
    assert third["unchanged"] == 1 and third["written"] == 1 and third["dissolved"] == 1
    assert len(fake_llm.calls_for("community_summary")) == 3


def test_it_joins_a_new_entity_by_neighbour_majority(alice_ws):
    g = two_clusters(alice_ws)
    detect(alice_ws)
    g.fact("Ant Four", "works_with", "Ant One")
    g.fact("Ant Four", "works_with", "Ant Two")
    g.fact("Ant Four", "knows", "Bee One")
    with workspace_context(alice_ws):
        ant_community = community_of(g.ids["Ant One"])
        assert upkeep.community_assign(workspace_id=alice_ws, node_id=g.ids["Ant Four"]) == ant_community
        community = GraphCommunity.objects.get(id=ant_community)
        assert g.ids["Ant Four"] in members_of(ant_community) and community.fingerprint == ""


def test_it_streams_edges_and_supports_louvain(alice_ws, settings, monkeypatch):
    monkeypatch.setattr(upkeep, "EDGE_CHUNK", 2)  # several chunks even on a tiny graph
    two_clusters(alice_ws)
    assert detect(alice_ws, algorithm="plm")["communities"] == 2
    assert detect(alice_ws)["edges"] == 7


def test_it_lists_communities_over_http_per_tenant(alice_ws, personas):
    two_clusters(alice_ws)
    detect(alice_ws)  # over HTTP, refresh is a background job (test_community_job.py)
    data = personas.alice_api.ok("graph/communities", {})
    assert [c["size"] for c in data["communities"]] == [4, 3] and data["lastRunAt"] is not None
    assert "Bee One" in data["communities"][0]["members"]
    assert personas.charlie_api.ok("graph/communities", {})["communities"] == []
    with workspace_context(alice_ws), connections["app"].cursor() as cursor:
        cursor.execute("SELECT count(*) FROM graph_communities")
        assert cursor.fetchone()[0] == 2


def test_it_counts_only_entities_that_still_exist(alice_ws, personas):
    # Sizes and member lists come from the membership rows, which go with a deleted entity: an evicted or
    # forgotten entity no longer counts, as it did while communities also kept a copy of their member ids.
    g = two_clusters(alice_ws)
    detect(alice_ws)
    with workspace_context(alice_ws):
        GraphNode.objects.filter(id=g.ids["Bee Four"]).delete()
    data = personas.alice_api.ok("graph/communities", {})
    assert [c["size"] for c in data["communities"]] == [3, 3]
    assert all("Bee Four" not in c["members"] for c in data["communities"])


def test_it_places_entities_new_from_extraction_in_their_neighbours_community(alice_ws, alice_api, fake_llm):
    from pipeline import services as pipeline

    g = two_clusters(alice_ws)
    with workspace_context(alice_ws):  # detection only: summaries would need committed rows (threads)
        upkeep.communities_detect(workspace_id=alice_ws)
    fact = {
        "source": "Ant Four",
        "target": "Ant One",
        "relation": "works_with",
        "fact": "Ant Four works with Ant One.",
        "edge_class": "semantic",
        "confidence": 0.9,
        "temporal_hint": None,
        "valid_from": None,
        "replaces_previous": False,
    }
    fake_llm.answers["entity_extraction"] = {
        "entities": [
            {"name": "Ant Four", "type": "concept", "summary": None},
            {"name": "Ant One", "type": "concept", "summary": None},
        ],
        "facts": [fact],
    }
    alice_api.add("Ant Four works with Ant One.")
    pipeline.jobs_run_pending(workspace_id=alice_ws)
    with workspace_context(alice_ws):
        ant_four = GraphNode.objects.get(workspace_id=alice_ws, node_key="ant four")
        assert community_of(ant_four.id) == community_of(g.ids["Ant One"]) is not None


def test_it_writes_only_new_memberships_and_reconciles_drifted_ones(alice_ws):
    g = two_clusters(alice_ws)
    with workspace_context(alice_ws):
        upkeep.communities_detect(workspace_id=alice_ws)
        ants = community_of(g.ids["Ant One"])
        # Drift as an import or a manual edit could: one member loses its community, an outsider gains one.
        GraphCommunityMember.objects.filter(node_id=g.ids["Ant Two"]).delete()
        GraphCommunityMember.objects.create(
            workspace_id=alice_ws, node_id=g.ids["Lonely Node"], community_id=ants
        )
        again = upkeep.communities_detect(workspace_id=alice_ws)
        assert (
            again["written"] == 0
            and again["unchanged"] == 2
            and set(again["stages"]) == {"load", "partition", "fingerprint", "write"}
        )
        assert community_of(g.ids["Ant Two"]) == ants
        assert community_of(g.ids["Lonely Node"]) is None
        assert GraphCommunityMember.objects.count() == 7


def test_it_moves_a_drifted_member_into_its_new_community(alice_ws):
    g = two_clusters(alice_ws)
    with workspace_context(alice_ws):
        upkeep.communities_detect(workspace_id=alice_ws)
        ants, bees = community_of(g.ids["Ant One"]), community_of(g.ids["Bee One"])
        g.fact("Bee Four", "depends_on", "Bee Five")
        # Bee Five is filed under the ants (kept by the next run) before the run puts it with the bees: the
        # plain insert of the new bee community's members conflicts and the upsert moves it.
        GraphCommunityMember.objects.create(
            workspace_id=alice_ws, node_id=g.ids["Bee Five"], community_id=ants
        )
        statements: list[str] = []

        def spy(execute, sql, params, many, context):
            statements.append(sql)
            return execute(sql, params, many, context)

        with connections["app"].execute_wrapper(spy):
            again = upkeep.communities_detect(workspace_id=alice_ws)
        assert again["written"] == 1 and again["dissolved"] == 1 and again["unchanged"] == 1
        assert sum("INTO graph_community_members" in sql for sql in statements) == 2  # insert, then upsert
        new_bees = community_of(g.ids["Bee One"])
        assert new_bees not in (None, bees) and community_of(g.ids["Bee Five"]) == new_bees
        assert GraphCommunityMember.objects.filter(community_id=ants).count() == 3


def test_it_deletes_memberships_with_their_entity_or_community(alice_ws):
    g = two_clusters(alice_ws)
    with workspace_context(alice_ws), connections["app"].cursor() as cursor:
        upkeep.communities_detect(workspace_id=alice_ws)
        bees = community_of(g.ids["Bee One"])
        # Raw-SQL deletes, as eviction and graph clearing issue them: the triggers of migration 0011 follow.
        cursor.execute("DELETE FROM graph_edges WHERE %s IN (from_node_id, to_node_id)", [g.ids["Ant One"]])
        cursor.execute("DELETE FROM graph_nodes WHERE id = %s", [g.ids["Ant One"]])
        assert community_of(g.ids["Ant One"]) is None and community_of(g.ids["Ant Two"]) is not None
        cursor.execute("DELETE FROM graph_communities WHERE id = %s", [bees])
        assert GraphCommunityMember.objects.filter(community_id=bees).count() == 0
        assert GraphCommunityMember.objects.count() == 2  # Ant Two and Ant Three


def test_it_keeps_memberships_inside_their_workspace(alice_ws, personas):
    two_clusters(alice_ws)
    with workspace_context(alice_ws):
        upkeep.communities_detect(workspace_id=alice_ws)
        assert GraphCommunityMember.objects.count() == 7
        community = GraphCommunity.objects.first()
    # Row-level security: charlie's workspace can neither read alice's rows nor write one into her workspace.
    with workspace_context(personas.globex.id):
        assert GraphCommunityMember.objects.count() == 0
    with (
        pytest.raises(DatabaseError, match="row-level security"),
        workspace_context(personas.globex.id),
        connections["app"].cursor() as cursor,
    ):
        cursor.execute(
            "INSERT INTO graph_community_members (workspace_id, node_id, community_id) VALUES (%s, 1, %s)",
            [alice_ws, community.id],
        )


def test_it_builds_the_same_split_whatever_order_the_facts_arrive_in():
    import numpy as np

    rows = np.array([0, 1, 0, 3, 4, 3, 2], dtype=np.int64)
    cols = np.array([1, 2, 2, 4, 5, 5, 3], dtype=np.int64)
    first = upkeep._partition(6, rows, cols, "plp")
    order = np.array([6, 2, 4, 0, 5, 1, 3])
    second = upkeep._partition(6, rows[order], cols[order], "plp")
    assert (first == second).all()


def test_it_reads_memberships_for_entities_and_seed_caps(alice_ws, personas):
    from graphsvc.facts import SEED_COMMUNITY_CAP, seeds_find

    g = GraphBuilder(alice_ws)
    for i in range(1, 5):
        g.fact("Ant Hub", "works_with", f"Ant Worker {i}")
    with workspace_context(alice_ws):
        assert len(seeds_find(workspace_id=alice_ws, query="ant", limit=10)) == 5
        upkeep.communities_detect(workspace_id=alice_ws)
        # All five are one community now: seed search takes at most three of them.
        assert len(seeds_find(workspace_id=alice_ws, query="ant", limit=10)) == SEED_COMMUNITY_CAP
        name = GraphCommunity.objects.get().name
    detail = personas.alice_api.ok("graph/entities", {"entity": "Ant Hub"})["entities"][0]
    assert detail["community"] == name
    listed = personas.alice_api.ok("graph/entities", {"query": "worker"})["entities"]
    assert {e["community"] for e in listed} == {name}
    personas.charlie_api.error("graph/entities", {"entity": "Ant Hub"}, status=404, code="ENTITY_NOT_FOUND")

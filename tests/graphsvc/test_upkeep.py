"""Upkeep: eviction (retention, stale entities, entity cap) with its counts in graph/stats, retrieval-count
decay, graph/decay rates, graph/clear's confirmation, the hourly schedule and the management command."""

from __future__ import annotations

import json
from datetime import timedelta

from django.core.management import call_command
from django.db import connections
from django.test import override_settings
from django.utils import timezone
from django_q.models import Schedule

from graphsvc import upkeep
from graphsvc.apps import UPKEEP_SCHEDULE_NAME, upkeep_schedule_ensure
from tenancy.rls import workspace_context
from tests.graphsvc.graph_builder import GraphBuilder


def names(workspace_id: int) -> set[str]:
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute("SELECT label FROM graph_nodes WHERE node_type = 'concept'")
        return {r[0] for r in cursor.fetchall()}


def test_it_evicts_old_invalidated_facts_and_stale_entities_and_reports_counts(alice_ws, alice_api):
    g = GraphBuilder(alice_ws)
    long_ago = timezone.now() - timedelta(days=200)
    g.entity("Old Lib", last_seen=long_ago)
    g.entity("New Lib", last_seen=long_ago)
    g.fact(
        "Old Lib", "used_by", "Old App", valid_from=long_ago, valid_to=timezone.now() - timedelta(days=100)
    )
    g.fact("New Lib", "used_by", "New App")  # active: New Lib stays however old its last mention
    g.fact(
        "Recent Lib", "used_by", "Old App", valid_from=long_ago, valid_to=timezone.now() - timedelta(days=10)
    )
    with workspace_context(alice_ws):
        result = upkeep.graph_evict(workspace_id=alice_ws)
    assert result["expiredFacts"] == 1 and result["staleEntities"] == 1
    # Archived, not deleted: stored with its aliases, out of lists and counts.
    assert {"Old Lib", "New Lib", "Recent Lib", "Old App"} <= names(alice_ws)
    assert archived(alice_ws) == {"Old Lib"}
    stats = alice_api.ok("graph/stats", {})
    assert stats["lastEviction"]["expiredFacts"] == 1 and stats["invalidatedFacts"] == 1
    listed = {e["name"] for e in alice_api.ok("graph/entities", {"limit": 100})["entities"]}
    assert "Old Lib" not in listed and "New Lib" in listed
    assert sum(stats["entitiesByType"].values()) == len(names(alice_ws)) - 1
    extraction = alice_api.ok("graph/status", {})["extraction"]
    assert extraction["entities"] == len(names(alice_ws)) - 1 and extraction["archivedEntities"] == 1


def archived(workspace_id: int) -> set[str]:
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute("SELECT label FROM graph_nodes WHERE archived_at IS NOT NULL")
        return {r[0] for r in cursor.fetchall()}


def test_it_keeps_the_entity_cap_dropping_the_least_connected_first(alice_ws, alice_api):
    g = GraphBuilder(alice_ws)
    for i in range(12):
        g.fact("Hub Node", "links", f"Leaf {i:02d}")
    g.fact("Leaf 00", "links", "Leaf 01")
    g.entity("Island", last_seen=timezone.now() - timedelta(days=5))
    response = alice_api.client.patch(
        "/api/sdk/v1/graph/settings",
        data={"maxEntities": 10},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {alice_api.key}",
    )
    assert response.status_code == 200 and response.json()["data"]["maxEntities"] == 10
    with workspace_context(alice_ws):
        assert upkeep.graph_evict(workspace_id=alice_ws)["overCapEntities"] == 4
    left = names(alice_ws)
    assert len(left) == 10 and {"Hub Node", "Leaf 00", "Leaf 01"} <= left and "Island" not in left


def test_it_decays_retrieval_counts_and_sets_rates_per_relation(alice_ws, alice_api):
    g = GraphBuilder(alice_ws)
    edge = g.fact("Vim Editor", "used_by", "Dana Dev", retrievals=40)
    g.fact("Vim Editor", "replaced_by", "Helix Editor", observed_days_ago=30)
    data = alice_api.ok("graph/decay", {"action": "recompute"})
    assert data["retrievalCountsDecayed"] == 1 and data["belowFloor"] == 0
    with workspace_context(alice_ws), connections["app"].cursor() as cursor:
        cursor.execute("SELECT retrieval_count FROM graph_edges WHERE id = %s", [edge])
        assert cursor.fetchone()[0] == 38

    # A fast rate for one relation takes its 30-day-old fact under the floor: kept, no longer retrieved.
    data = alice_api.ok("graph/decay", {"action": "set_rate", "edgeType": "replaced_by", "rate": 0.5})
    assert data["rates"] == {"replaced_by": 0.5} and data["belowFloor"] == 1
    facts = alice_api.ok("graph/facts", {"entity": "Vim Editor"})["facts"]
    assert [f["relation"] for f in facts] == ["used_by"]
    detail = alice_api.ok("graph/entities", {"entity": "vim editor"})["entities"][0]
    assert {f["relation"]: f["retrievable"] for f in detail["facts"]} == {
        "used_by": True,
        "replaced_by": False,
    }
    alice_api.error("graph/decay", {"action": "set_rate"}, status=400, code="INVALID_REQUEST")
    alice_api.error("graph/decay", {"action": "set_rate", "rate": 11}, status=400, code="INVALID_REQUEST")


def test_it_clears_the_entity_graph_only_with_confirmation(alice_ws, personas):
    g = GraphBuilder(alice_ws)
    g.fact("Gone Soon", "links", "Also Gone")
    error = personas.alice_api.error(
        "graph/clear", {"confirm": "yes"}, status=400, code="CONFIRMATION_REQUIRED"
    )
    assert "delete entity graph" in error["message"]
    assert personas.charlie_api.ok("graph/clear", {"confirm": "delete entity graph"}) == {
        "entities": 0,
        "facts": 0,
    }
    assert names(alice_ws) == {"Gone Soon", "Also Gone"}
    assert personas.alice_api.ok("graph/clear", {"confirm": "delete entity graph"}) == {
        "entities": 2,
        "facts": 1,
    }
    assert names(alice_ws) == set()
    with workspace_context(alice_ws), connections["app"].cursor() as cursor:
        cursor.execute("SELECT count(*) FROM graph_entity_terms")
        assert cursor.fetchone()[0] == 0


def test_it_schedules_upkeep_hourly_and_runs_it_from_the_command(alice_ws, capsys):
    upkeep_schedule_ensure(using="default")
    upkeep_schedule_ensure(using="default")
    schedules = Schedule.objects.filter(name=UPKEEP_SCHEDULE_NAME)
    assert schedules.count() == 1 and schedules[0].func == "graphsvc.tasks.graph_upkeep"
    g = GraphBuilder(alice_ws)
    g.fact("Cmd One", "links", "Cmd Two")
    from graphsvc.tasks import graph_upkeep

    assert graph_upkeep() >= 1
    with workspace_context(alice_ws), connections["app"].cursor() as cursor:
        cursor.execute("SELECT count(*) FROM graph_communities")
        assert cursor.fetchone()[0] == 1  # due: never ran before
    call_command("graph_reasoning", "stats", "--workspace", str(alice_ws))
    assert '"activeFacts": 1' in capsys.readouterr().out


def test_it_keeps_decay_and_settings_per_tenant(alice_ws, personas):
    GraphBuilder(alice_ws).fact("Tenant Fact", "links", "Other Fact", retrievals=10)
    charlie = personas.charlie_api
    assert charlie.ok("graph/decay", {"action": "set_rate", "rate": 5})["defaultRate"] == 5
    assert charlie.ok("graph/decay", {"action": "recompute"}) | {"rates": {}} == {
        "activeFacts": 0,
        "belowFloor": 0,
        "defaultRate": 5,
        "rates": {},
        "floor": 0.1,
        "retrievalCountsDecayed": 0,
    }
    alice = personas.alice_api.ok("graph/decay", {"action": "recompute"})
    assert alice["defaultRate"] == 0.01 and alice["activeFacts"] == 1 and alice["retrievalCountsDecayed"] == 1
    assert personas.alice_api.get("graph/settings").json()["data"]["decayRate"] == 0.01


def test_it_invalidates_facts_under_the_floor_past_the_grace_and_archives_their_entities(alice_ws, alice_api):
    g = GraphBuilder(alice_ws)
    long_ago = timezone.now() - timedelta(days=400)
    g.entity("Faded Tool", last_seen=long_ago)
    g.entity("Faded Team", last_seen=long_ago)
    # 0.5 × e^(−0.01 × 400) ≈ 0.009, far under the 0.1 floor, for far longer than the 30-day grace.
    faded = g.fact("Faded Team", "uses", "Faded Tool", confidence=0.5, observed_days_ago=400)
    g.fact("Live Team", "uses", "Live Tool", confidence=0.5)
    with workspace_context(alice_ws):
        result = upkeep.graph_evict(workspace_id=alice_ws)
    assert result["decayedFacts"] == 1 and result["staleEntities"] == 2
    # Kept as history: the row, its entities (archived) and why it ended.
    assert {"Faded Tool", "Faded Team", "Live Team", "Live Tool"} <= names(alice_ws)
    assert archived(alice_ws) == {"Faded Tool", "Faded Team"}
    row = edge(alice_ws, faded)
    assert row["expired_at"] is not None and row["valid_to"] is None
    assert json.loads(row["metadata"]) == {"invalidatedBy": "confidence_decay"}
    stats = alice_api.ok("graph/stats", {})
    assert stats["lastEviction"]["decayedFacts"] == 1 and stats["invalidatedFacts"] == 1


def edge(workspace_id: int, edge_id: int) -> dict:
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT expired_at, valid_to, metadata, last_observed_at FROM graph_edges WHERE id = %s",
            [edge_id],
        )
        expired_at, valid_to, metadata, observed = cursor.fetchone()
    return {"expired_at": expired_at, "valid_to": valid_to, "metadata": metadata, "observed": observed}


def _store(workspace_id: int, source: int, target: int) -> str:
    from graphsvc import entities

    with workspace_context(workspace_id):
        return entities.fact_store(
            workspace_id=workspace_id,
            fact=entities.FactInput(
                source_id=source,
                target_id=target,
                relation="uses",
                fact="Quiet Team uses Quiet Tool.",
                edge_class="semantic",
                confidence=0.5,
                valid_from=None,
                temporal_hint=None,
                replaces_previous=False,
            ),
            evidence_memory_id=None,
            evidence_text=None,
        )


def _age(workspace_id: int, *, days: int) -> None:
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute(
            "UPDATE graph_edges SET last_observed_at = now() - make_interval(days => %s), "
            "created_at = now() - make_interval(days => %s) WHERE workspace_id = %s AND edge_type = 'uses'",
            [days, days, workspace_id],
        )


def _recalled(api) -> list[str]:
    return [f["fact"] for f in api.ok("graph/facts", {"entity": "Quiet Team"})["facts"]]


def test_it_keeps_a_fact_under_the_floor_out_of_recall_and_brings_it_back_when_seen_again(
    alice_ws, alice_api
):
    g = GraphBuilder(alice_ws)
    team, tool = g.entity("Quiet Team"), g.entity("Quiet Tool")
    assert _store(alice_ws, team, tool) == "inserted"
    assert _recalled(alice_api) == ["Quiet Team uses Quiet Tool."]
    # 0.5 × e^(−0.01 × 200) ≈ 0.07: under the floor, not yet for the grace (observed 200 days ago, under the
    # floor for the last ~39 days; grace 30 days would end it, so the grace is raised for this step).
    _age(alice_ws, days=200)
    assert _recalled(alice_api) == []
    with override_settings(GRAPH_DECAYED_FACT_GRACE_DAYS=60), workspace_context(alice_ws):
        assert upkeep.graph_evict(workspace_id=alice_ws)["decayedFacts"] == 0
    stats = alice_api.ok("graph/stats", {})
    assert stats["belowFloorFacts"] == 1 and stats["activeFacts"] == 1
    detail = alice_api.ok("graph/entities", {"entity": "Quiet Team"})["entities"][0]
    assert [f["retrievable"] for f in detail["facts"]] == [False]
    # Extracted again: the same row, back at full confidence, recalled again.
    assert _store(alice_ws, team, tool) == "reinforced"
    assert _recalled(alice_api) == ["Quiet Team uses Quiet Tool."]


def test_it_restores_an_invalidated_decayed_fact_as_a_new_version_with_its_history(alice_ws, alice_api):
    g = GraphBuilder(alice_ws)
    team, tool = g.entity("Quiet Team"), g.entity("Quiet Tool")
    _store(alice_ws, team, tool)
    _age(alice_ws, days=300)
    with workspace_context(alice_ws):
        assert upkeep.graph_evict(workspace_id=alice_ws)["decayedFacts"] == 1
    assert _recalled(alice_api) == []
    assert _store(alice_ws, team, tool) == "inserted"
    assert _recalled(alice_api) == ["Quiet Team uses Quiet Tool."]
    with workspace_context(alice_ws), connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FILTER (WHERE expired_at IS NULL), "
            "count(*) FILTER (WHERE expired_at IS NOT NULL) "
            "FROM graph_edges WHERE workspace_id = %s AND edge_type = 'uses'",
            [alice_ws],
        )
        assert cursor.fetchone() == (1, 1)


def test_it_brings_an_archived_entity_back_when_it_is_mentioned_again(alice_ws, alice_api):
    g = GraphBuilder(alice_ws)
    g.entity("Dusty Lib", last_seen=timezone.now() - timedelta(days=200))
    with workspace_context(alice_ws):
        assert upkeep.graph_evict(workspace_id=alice_ws)["staleEntities"] == 1
    assert archived(alice_ws) == {"Dusty Lib"}
    from graphsvc import entities

    with workspace_context(alice_ws):
        ctx = entities.ResolutionContext(workspace_id=alice_ws)
        found = entities.entity_resolve(ctx=ctx, name="Dusty Lib", entity_type="concept", summary=None)
    assert found is not None and found.node_id == g.ids["Dusty Lib"]
    assert archived(alice_ws) == set()
    extraction = alice_api.ok("graph/status", {})["extraction"]
    assert (extraction["entities"], extraction["archivedEntities"]) == (1, 0)

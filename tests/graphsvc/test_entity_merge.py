"""Fixing entities by hand: graph/entities/merge folds entities into one (aliases, mentions and facts move,
duplicate facts merge by their evidence, a changed claim keeps the newer), every merge is recorded and can be
undone (graph/entities/split with mergeId), and a split moves chosen aliases and facts to a new entity. Admin
only, per tenant, and only on entities the caller's end user may see."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import connections
from django.utils import timezone

from graphsvc.models import (
    GraphEdge,
    GraphEntityAlias,
    GraphEntityMerge,
    GraphFactEvidence,
    GraphNode,
    MemoryNodeLink,
)
from tenancy.rls import workspace_context
from tests.graphsvc.graph_builder import GraphBuilder
from tests.memories.helpers import ACME_SCOPE


def state(workspace_id: int) -> dict[str, Any]:
    """The whole entity graph, to compare before and after."""
    with workspace_context(workspace_id):
        return {
            "nodes": sorted(
                GraphNode.objects.exclude(node_type="memory").values_list("id", "node_key", "mention_count")
            ),
            "aliases": sorted(GraphEntityAlias.objects.values_list("node_id", "alias")),
            "edges": sorted(
                GraphEdge.objects.filter(origin="llm_entity").values_list(
                    "id", "from_node_id", "to_node_id", "edge_key", "expired_at", "superseded_by_id"
                )
            ),
            "evidence": sorted(GraphFactEvidence.objects.values_list("edge_id", "memory_id")),
            "mentions": sorted(
                MemoryNodeLink.objects.filter(role="mentions").values_list("memory_id", "node_id")
            ),
        }


def current(workspace_id: int) -> dict[tuple[str, str, str], dict[str, Any]]:
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute(
            """
            SELECT s.label, e.edge_type, t.label, e.id, e.fact,
                   ARRAY(SELECT fe.memory_id::text FROM graph_fact_evidence fe WHERE fe.edge_id = e.id
                       ORDER BY 1)
            FROM graph_edges e JOIN graph_nodes s ON s.id = e.from_node_id JOIN graph_nodes t ON t.id =
                e.to_node_id
            WHERE e.origin = 'llm_entity' AND e.expired_at IS NULL
            """
        )
        return {
            (s, r, t): {"id": i, "fact": f, "evidence": set(ev)} for s, r, t, i, f, ev in cursor.fetchall()
        }


def split_database(api, workspace_id: int, scope: dict[str, str] | None = None) -> tuple[GraphBuilder, dict]:
    """Postgres and "PostgreSQL DB" are one database the resolver kept apart."""
    scope = scope or {}
    notes = {
        name: api.add(f"note {name}", scope=scope)["id"]
        for name in ("uses-pg", "uses-db", "pg15", "pg17", "aws")
    }
    g = GraphBuilder(workspace_id)
    g.entity("Postgres", type="tool", aliases=("pgsql",))
    g.entity("PostgreSQL DB", type="tool", aliases=("postgresql",))
    g.entity("Billing", type="project")
    old = timezone.now() - timedelta(days=30)
    facts = {
        "uses-pg": g.fact("Billing", "uses", "Postgres", fact="Billing uses Postgres."),
        "uses-db": g.fact("Billing", "uses", "PostgreSQL DB", fact="Billing uses the PostgreSQL database."),
        "pg15": g.fact("Billing", "runs_on", "Postgres", fact="Billing runs on Postgres 15.", valid_from=old),
        "pg17": g.fact("Billing", "runs_on", "PostgreSQL DB", fact="Billing runs on Postgres 17."),
        "aws": g.fact("PostgreSQL DB", "hosted_on", "AWS", fact="The database is hosted on AWS."),
        "loop": g.fact("PostgreSQL DB", "part_of", "Postgres", fact="PostgreSQL DB is part of Postgres."),
        # The same claim twice under two keys (as an import or older code may leave it).
        "dep-old": g.fact("Billing", "depends_on", "PostgreSQL DB", fact="Billing needs it.", valid_from=old),
        "dep-new": g.fact("Billing", "depends_on", "PostgreSQL DB", fact="Billing depends on the database."),
    }
    for name, memory_id in notes.items():
        g.supported_by(facts[name], memory_id=memory_id, user_id=scope.get("userId"))
    g.mentioned_in("Postgres", memory_id=notes["uses-pg"])
    g.mentioned_in("PostgreSQL DB", memory_id=notes["uses-db"])
    return g, {"notes": notes, "facts": facts}


def test_it_merges_duplicates_by_their_evidence_and_undoes_the_merge(alice_api, alice_ws):
    g, made = split_database(alice_api, alice_ws)
    notes, facts = made["notes"], made["facts"]
    before = state(alice_ws)
    merged = alice_api.ok("graph/entities/merge", {"into": "pgsql", "entities": ["PostgreSQL DB"]})
    entity, (record,) = merged["entity"], merged["merges"]
    assert entity["name"] == "Postgres" and {"postgresql", "postgresql db", "pgsql"} <= set(entity["aliases"])
    assert record["kind"] == "merge" and record["mergedId"] == str(g.ids["PostgreSQL DB"])
    assert entity["merges"][0]["id"] == record["id"] and entity["mentionCount"] == 2

    now = current(alice_ws)
    # The same claim twice: one fact, both memories its evidence.
    assert now[("Billing", "uses", "Postgres")]["evidence"] == {notes["uses-pg"], notes["uses-db"]}
    # A changed claim: the newer version is current, the older one ended and points at it.
    assert now[("Billing", "runs_on", "Postgres")]["fact"] == "Billing runs on Postgres 17."
    with workspace_context(alice_ws):
        ended = GraphEdge.objects.get(id=facts["pg15"])
        looped = GraphEdge.objects.get(id=facts["loop"])
        assert ended.expired_at is not None and ended.superseded_by_id == facts["pg17"]
        assert looped.expired_at is not None  # a fact between the two would link Postgres to itself
        assert not GraphNode.objects.filter(id=g.ids["PostgreSQL DB"]).exists()
        assert MemoryNodeLink.objects.filter(memory_id=notes["uses-db"], node_id=g.ids["Postgres"]).exists()
    assert now[("Postgres", "hosted_on", "AWS")]["evidence"] == {notes["aws"]}
    with workspace_context(alice_ws):
        depends = GraphEdge.objects.filter(edge_type="depends_on", expired_at__isnull=True)
        assert [e.id for e in depends] == [facts["dep-old"]]  # one current fact for one claim
    # The merged name now finds the survivor, in recall as in a lookup.
    assert (
        alice_api.ok("graph/facts", {"entity": "PostgreSQL DB", "maxHops": 1})["seeds"][0]["name"]
        == "Postgres"
    )

    undone = alice_api.ok("graph/entities/split", {"entity": "Postgres", "mergeId": record["id"]})
    assert undone["merge"]["undoneAt"] is not None
    assert {e["name"] for e in undone["entities"]} == {"Postgres", "PostgreSQL DB"}
    assert state(alice_ws) == before  # every fact, alias, mention and piece of evidence as it was
    again = alice_api.error(
        "graph/entities/split",
        {"entity": "Postgres", "mergeId": record["id"]},
        status=409,
        code="MERGE_NOT_UNDOABLE",
    )
    assert "undone already" in again["message"]
    alice_api.ok("graph/entities/merge", {"into": "Postgres", "entities": ["PostgreSQL DB"]})
    # Clearing the entity graph takes its history along.
    alice_api.ok("graph/clear", {"confirm": "delete entity graph"})
    with workspace_context(alice_ws):
        assert not GraphEntityMerge.objects.exists()


def test_it_splits_chosen_aliases_and_facts_into_a_new_entity(alice_api, alice_ws):
    memory = alice_api.add("Mercury (quicksilver) is a chemical element")["id"]
    g = GraphBuilder(alice_ws)
    g.entity("Mercury", type="concept", aliases=("quicksilver", "the planet mercury"))
    element = g.fact("Mercury", "is_a", "Chemical Element")
    g.fact("Mercury", "orbits", "Sun")
    g.supported_by(element, memory_id=memory, user_id=None)
    split = alice_api.ok(
        "graph/entities/split",
        {
            "entity": "Mercury",
            "name": "Mercury (element)",
            "aliases": ["QuickSilver"],
            "factIds": [str(element)],
        },
    )
    assert split["merge"]["kind"] == "split"
    planet, made = split["entities"]
    assert planet["name"] == "Mercury" and "quicksilver" not in planet["aliases"]
    assert [f["relation"] for f in planet["facts"]] == ["orbits"]
    assert made["name"] == "Mercury (element)" and set(made["aliases"]) == {
        "quicksilver",
        "mercury (element)",
    }
    assert [(f["id"], f["relation"]) for f in made["facts"]] == [(str(element), "is_a")]
    with workspace_context(alice_ws):
        assert MemoryNodeLink.objects.filter(
            memory_id=memory, node_id=int(made["id"]), role="mentions"
        ).exists()
    # The alias and its words now find the new entity only.
    assert alice_api.ok("graph/entities", {"entity": "Quicksilver"})["entities"][0]["id"] == made["id"]
    assert [e["name"] for e in alice_api.ok("graph/entities", {"query": "quicksilver"})["entities"]] == [
        "Mercury (element)"
    ]


def test_it_refuses_bad_merges_and_splits_with_clear_codes(alice_api, alice_ws):
    split_database(alice_api, alice_ws)
    calls = [
        ("graph/entities/merge", {"into": "Postgres", "entities": ["pgsql"]}, 400, "MERGE_SAME_ENTITY"),
        ("graph/entities/merge", {"into": "Postgres", "entities": ["x"] * 11}, 400, "INVALID_REQUEST"),
        ("graph/entities/merge", {"into": "Postgres", "entities": ["Postgress DB"]}, 404, "ENTITY_NOT_FOUND"),
        ("graph/entities/split", {"entity": "Postgres", "name": "Postgres 2"}, 400, "INVALID_REQUEST"),
        (
            "graph/entities/split",
            {"entity": "Postgres", "name": "x", "aliases": ["pgsql"]},
            400,
            "INVALID_ENTITY_NAME",
        ),
        (
            "graph/entities/split",
            {"entity": "Postgres", "name": "PG Two", "aliases": ["nope"]},
            400,
            "ALIAS_NOT_FOUND",
        ),
        (
            "graph/entities/split",
            {"entity": "Postgres", "name": "PG Two", "factIds": ["1e3"]},
            400,
            "INVALID_REQUEST",
        ),
        (
            "graph/entities/split",
            {"entity": "Postgres", "name": "PG Two", "factIds": ["999999"]},
            400,
            "FACT_NOT_FOUND",
        ),
        (
            "graph/entities/split",
            {"entity": "Postgres", "name": "Billing", "type": "project", "aliases": ["pgsql"]},
            409,
            "ENTITY_EXISTS",
        ),
        ("graph/entities/split", {"entity": "Postgres", "mergeId": "12345"}, 404, "MERGE_NOT_FOUND"),
        ("graph/entities/split", {"entity": "Postgres", "mergeId": "1", "name": "x"}, 400, "INVALID_REQUEST"),
    ]
    before = state(alice_ws)
    for path, body, status, code in calls:
        alice_api.error(path, body, status=status, code=code)
    assert state(alice_ws) == before


def test_it_lets_only_admins_of_the_workspace_fix_entities(personas):
    acme = personas.acme.id
    split_database(personas.alice_api, acme, scope=ACME_SCOPE)
    before = state(acme)
    merge = {"into": "Postgres", "entities": ["PostgreSQL DB"], "scope": ACME_SCOPE}
    split = {"entity": "Postgres", "name": "Postgres Two", "aliases": ["pgsql"], "scope": ACME_SCOPE}
    for path, body in (("graph/entities/merge", merge), ("graph/entities/split", split)):
        refused = personas.bob_api.error(
            path, body, status=403, code="FORBIDDEN_ROLE"
        )  # a member writes only
        assert refused["details"]["requiredRole"] == "admin"
        # Naming acme's project lands charlie in his own workspace, where no such entity exists.
        personas.charlie_api.error(path, body, status=404, code="ENTITY_NOT_FOUND")
    assert state(acme) == before
    assert personas.alice_api.ok("graph/entities/merge", merge)["entity"]["name"] == "Postgres"


def test_it_finds_only_entities_the_end_user_may_see(alice_api, alice_ws):
    g, _ = split_database(alice_api, alice_ws, scope={"userId": "u2"})
    before = state(alice_ws)
    body = {"into": "Postgres", "entities": ["PostgreSQL DB"], "scope": {"userId": "u1"}}
    error = alice_api.error("graph/entities/merge", body, status=404, code="ENTITY_NOT_FOUND")
    assert error["details"]["closest"] == []  # u1 sees neither, nor their names
    assert state(alice_ws) == before
    as_u2 = alice_api.ok("graph/entities/merge", {**body, "scope": {"userId": "u2"}})
    assert as_u2["entity"]["id"] == str(g.ids["Postgres"])

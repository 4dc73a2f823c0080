"""Facts keep all their evidence, and end users see only facts their memories (or shared ones) support.

Extraction runs against the fake OpenAI-compatible server: each memory's text says which fact the model finds.
"""

from __future__ import annotations

import json
from typing import Any

from graphsvc.models import GraphEdge, GraphFactEvidence, GraphNode
from pipeline import services as pipeline
from tenancy.rls import workspace_context
from tests.graphsvc.conftest import script_for

PEOPLE = {"Dana", "Eve"}


def fact(source: str, relation: str, target: str, text: str, *, replaces: bool = False) -> dict[str, Any]:
    def kind(name: str) -> str:
        return "person" if name in PEOPLE else "project"

    return {
        "entities": [{"name": source, "type": kind(source)}, {"name": target, "type": kind(target)}],
        "facts": [
            {
                "source": source,
                "target": target,
                "relation": relation,
                "fact": text,
                "edge_class": "semantic",
                "confidence": 0.9,
                "temporal_hint": None,
                "valid_from": None,
                "replaces_previous": replaces,
            }
        ],
    }


def facts_of(workspace_id: int) -> list[GraphEdge]:
    with workspace_context(workspace_id):
        return list(GraphEdge.objects.filter(origin="llm_entity").order_by("id"))


def evidence_of(workspace_id: int, edge: GraphEdge) -> set[str]:
    with workspace_context(workspace_id):
        return {
            str(m)
            for m in GraphFactEvidence.objects.filter(edge_id=edge.id).values_list("memory_id", flat=True)
        }


def test_it_reinforces_a_fact_said_again_in_other_words(alice_api, alice_ws, fake_llm):
    fake_llm.answers["entity_extraction"] = script_for(
        {
            "maintains the gateway": fact("Dana", "maintains", "Gateway", "Dana maintains the gateway."),
            "looks after": fact("Dana", "maintains", "Gateway", "Dana looks after the payments gateway."),
        }
    )
    first = alice_api.add("Dana maintains the gateway")
    # One at a time: the fact is first stored in the words of the memory extracted first.
    pipeline.jobs_run_pending(workspace_id=alice_ws)
    second = alice_api.add("Dana looks after the gateway these days")
    pipeline.jobs_run_pending(workspace_id=alice_ws)
    (only,) = facts_of(alice_ws)
    assert only.expired_at is None and only.fact == "Dana maintains the gateway."
    assert evidence_of(alice_ws, only) == {first["id"], second["id"]}


def test_it_forgets_only_the_support_of_a_forgotten_memory(alice_api, alice_ws, fake_llm):
    fake_llm.answers["entity_extraction"] = script_for(
        {"*": fact("Dana", "maintains", "Gateway", "Dana maintains the gateway.")}
    )
    first = alice_api.add("Dana maintains the gateway (standup notes)")
    second = alice_api.add("Dana maintains the gateway (handbook)")
    pipeline.jobs_run_pending(workspace_id=alice_ws)
    alice_api.ok("memories/forget", {"id": first["id"]})
    (kept,) = facts_of(alice_ws)
    assert kept.expired_at is None and evidence_of(alice_ws, kept) == {second["id"]}
    assert str(kept.evidence_memory_id) == second["id"]  # the source shown moved to one that remains
    assert alice_api.ok("graph/facts", {"query": "Dana"})["facts"]

    alice_api.ok("memories/forget", {"id": second["id"]})
    assert facts_of(alice_ws) == []
    with workspace_context(alice_ws):
        # Entities nobody mentions any more go with the last fact.
        assert not GraphNode.objects.filter(node_type__in=["person", "project"]).exists()


def test_it_brings_back_the_version_a_forgotten_memory_had_replaced(alice_api, alice_ws, fake_llm):
    fake_llm.answers["entity_extraction"] = script_for(
        {
            "version 15": fact("Billing", "runs on", "Postgres", "Billing runs on Postgres 15."),
            "version 17": fact("Billing", "runs on", "Postgres", "Billing runs on Postgres 17."),
        }
    )
    alice_api.add("billing runs on postgres version 15")
    pipeline.jobs_run_pending(workspace_id=alice_ws)
    newer = alice_api.add("billing runs on postgres version 17 now")
    pipeline.jobs_run_pending(workspace_id=alice_ws)
    old, new = facts_of(alice_ws)
    assert old.expired_at is not None and old.superseded_by_id == new.id and new.expired_at is None

    alice_api.ok("memories/forget", {"id": newer["id"]})
    (current,) = facts_of(alice_ws)
    assert current.id == old.id and current.expired_at is None and current.valid_to is None
    facts = alice_api.ok("graph/facts", {"query": "Billing"})["facts"]
    assert [f["fact"] for f in facts] == ["Billing runs on Postgres 15."]


def test_it_shows_an_end_user_only_facts_their_or_shared_memories_support(personas, alice_ws, fake_llm):
    """Two end users (u1, u2) of one workspace and one shared entity, Gateway."""
    api = personas.alice_api
    fake_llm.answers["entity_extraction"] = script_for(
        {
            "private to u1": fact("Dana", "maintains", "Gateway", "Dana maintains the gateway."),
            "private to u2": fact("Eve", "audits", "Gateway", "Eve audits the gateway."),
            "shared with all": fact("Gateway", "depends on", "Ledger", "The gateway depends on the ledger."),
        }
    )
    api.add("Dana, private to u1, maintains the gateway", scope={"userId": "u1"})
    api.add("Eve, private to u2, audits the gateway", scope={"userId": "u2"})
    api.add("Gateway: shared with all, it depends on the ledger")
    pipeline.jobs_run_pending(workspace_id=alice_ws)

    def seen(user: str | None) -> dict[str, Any]:
        scope = {"userId": user} if user else {}
        facts = api.ok("graph/facts", {"query": "gateway", "maxHops": 2, "scope": scope})["facts"]
        context = api.ok("context/get", {"query": "who works on the gateway", "scope": scope})
        traverse = api.ok("graph/traverse", {"startEntity": "Gateway", "scope": scope})
        entities = api.ok("graph/entities", {"scope": scope})["entities"]
        trace = api.ok("graph/trace", {"query": "who works on the gateway", "scope": scope})
        return {
            "facts": {f["relation"] for f in facts},
            "context": {f["relation"] for f in context["facts"]},
            "text": context["context"],
            "traverse": {n["name"] for n in traverse["nodes"]},
            "entities": {e["name"] for e in entities},
            "trace": json.dumps(trace),
        }

    u1, u2, shared = seen("u1"), seen("u2"), seen(None)
    assert u1["facts"] == {"maintains", "depends_on"} and u2["facts"] == {"audits", "depends_on"}
    assert shared["facts"] == {"depends_on"}
    assert u1["context"] <= {"maintains", "depends_on"} and "audits" not in u1["context"]
    assert "Eve" not in u1["text"] and "Dana" not in u2["text"]
    assert "Eve" not in u1["trace"] and "Dana" not in u2["trace"]
    assert "Eve" not in u1["traverse"] and "Dana" not in u2["traverse"] and "Ledger" in u1["traverse"]
    assert "Eve" not in u1["entities"] and {"Dana", "Gateway", "Ledger"} <= u1["entities"]
    assert "Dana" not in shared["entities"] and "Eve" not in shared["entities"]
    # Naming a hidden entity directly finds nothing either.
    api.error(
        "graph/facts", {"entity": "Eve", "scope": {"userId": "u1"}}, status=404, code="ENTITY_NOT_FOUND"
    )
    api.error(
        "graph/traverse",
        {"startEntity": "Dana", "scope": {"userId": "u2"}},
        status=404,
        code="ENTITY_NOT_FOUND",
    )

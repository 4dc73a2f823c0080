"""What a query names and which facts a walk follows: content words (stop words out, multi-word names whole),
entities by meaning when no word names one, relations named by the query, direction and edge types written as
words, the closest names for an unknown entity (only those the caller may see), and the type filter of an
entity search applied before its limit."""

from __future__ import annotations

from typing import Any

from django.db import connections

from graphsvc import facts
from tenancy.rls import workspace_context
from tests.graphsvc.graph_builder import GraphBuilder


def recall(workspace_id: int, **kwargs: Any) -> dict[str, Any]:
    with workspace_context(workspace_id):
        return facts.facts_recall(workspace_id=workspace_id, **kwargs)


def triples(data: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(f["source"], f["relation"], f["target"]) for f in data["facts"]]


def team(workspace_id: int) -> GraphBuilder:
    g = GraphBuilder(workspace_id)
    g.entity("Alice Martin", type="person", summary="Backend engineer")
    g.entity("Payments Gateway", type="project", summary="Routes card payments")
    g.fact("Alice Martin", "knows", "Bob Stone")
    g.fact("Alice Martin", "works_on", "Payments Gateway")
    g.fact("Bob Stone", "works_on", "Payments Gateway")
    g.fact("Payments Gateway", "uses", "Kubernetes")
    g.fact("Payments Gateway", "uses", "Postgres")
    return g


def test_it_seeds_from_content_words_not_the_first_words_of_a_question(alice_ws):
    g = GraphBuilder(alice_ws)
    g.entity("Kubernetes", type="tool", summary="Container orchestration")
    # Entities named like the question's filler words: the old seeding looked up how/does/the/team/handle.
    for filler in ("How To Guide", "Does Not Apply", "The Handbook"):
        g.entity(filler, type="concept")
    g.fact("Kubernetes", "runs", "Billing Service")
    terms = facts.query_terms("How does the team handle deployments for Kubernetes")
    assert terms.words[0] == "kubernetes" and not {"how", "does", "the", "for"} & set(terms.words)
    data = recall(alice_ws, query="How does the team handle deployments for Kubernetes")
    assert data["seeds"][0]["name"] == "Kubernetes" and data["seedSource"] == "words"
    assert triples(data) == [("Kubernetes", "runs", "Billing Service")]


def test_it_keeps_multi_word_names_whole(alice_ws):
    g = GraphBuilder(alice_ws)
    g.entity("York", type="organization")
    g.entity("New Jersey", type="organization")
    g.entity("New York", type="organization")
    g.entity("Bank of America", type="organization")
    assert facts.query_terms("Who lives in New York?").phrases == ["new york"]
    assert facts.query_terms("Accounts at Bank of America").phrases == ["bank of america"]
    # A sentence in title case names nothing in particular.
    assert facts.query_terms("How Does The Team Handle Deployments").phrases == []
    with workspace_context(alice_ws):
        seeds = facts.seeds_find(workspace_id=alice_ws, query="Who lives in New York?", limit=3)
        bank = facts.seeds_find(workspace_id=alice_ws, query="Accounts at Bank of America", limit=1)
    assert seeds[0].name == "New York"
    assert bank[0].name == "Bank of America"  # "of" kept inside the name, though a stop word


def test_it_finds_entities_by_meaning_when_no_word_names_one(alice_ws, local_embedder, settings):
    g = GraphBuilder(alice_ws)
    g.entity("Kubernetes", type="tool", summary="runs our containers")
    g.entity("Lasagna", type="concept", summary="a baked pasta dish")
    g.fact("Kubernetes", "schedules", "Billing Service")
    texts = {"Kubernetes": "kubernetes: runs our containers", "Lasagna": "lasagna: a baked pasta dish"}
    vectors = local_embedder.embed(list(texts.values()))
    with workspace_context(alice_ws), connections["app"].cursor() as cursor:
        for name, vector in zip(texts, vectors, strict=True):
            cursor.execute(
                "UPDATE graph_nodes SET embedding = %s::vector, embedding_model = %s WHERE id = %s",
                ["[" + ",".join(str(float(x)) for x in vector) + "]", settings.EMBEDDING_MODEL, g.ids[name]],
            )

    def embed(text: str) -> Any:
        return local_embedder.embed([text])[0]

    query = "which cluster scheduler do we use"
    assert recall(alice_ws, query=query)["facts"] == []  # no word names an entity
    data = recall(alice_ws, query=query, embed=embed)
    assert data["seedSource"] == "meaning" and data["seeds"][0]["name"] == "Kubernetes"
    assert triples(data) == [("Kubernetes", "schedules", "Billing Service")]


def test_it_answers_what_alice_works_on_with_what_she_works_on(alice_ws):
    team(alice_ws)
    # The relation the query names goes first, ahead of Alice's other facts and the teammates' ones.
    data = recall(alice_ws, query="what does Alice work on", limit=3)
    assert triples(data)[0] == ("Alice Martin", "works_on", "Payments Gateway")
    # Asked exactly: her works_on facts, out of her, and nothing else.
    exact = recall(alice_ws, entity="Alice Martin", edge_types=["works on"], direction="out")
    assert triples(exact) == [("Alice Martin", "works_on", "Payments Gateway")]
    # Who points at the gateway through works_on: the people, not the technologies it uses.
    who = recall(alice_ws, entity="Payments Gateway", edge_types=["Works-On"], direction="in")
    assert sorted(t[0] for t in triples(who)) == ["Alice Martin", "Bob Stone"]
    uses = recall(alice_ws, entity="Payments Gateway", direction="out", max_hops=1)
    assert sorted(t[2] for t in triples(uses)) == ["Kubernetes", "Postgres"]
    # Spreading activation flows the same way.
    spread = recall(alice_ws, entity="Payments Gateway", direction="out", strategy="spreading")
    assert sorted(t[2] for t in triples(spread)) == ["Kubernetes", "Postgres"]


def test_it_walks_traversal_in_the_direction_asked(alice_ws):
    from graphsvc.traverse import graph_traverse

    team(alice_ws)
    with workspace_context(alice_ws):
        out = graph_traverse(workspace_id=alice_ws, start_entity="Payments Gateway", direction="out")
        into = graph_traverse(
            workspace_id=alice_ws, start_entity="Payments Gateway", direction="in", edge_types=["works on"]
        )
        both = graph_traverse(workspace_id=alice_ws, start_entity="Payments Gateway", max_hops=1)
    assert {n["name"] for n in out["nodes"]} == {"Kubernetes", "Postgres"}
    assert {n["name"] for n in into["nodes"]} == {"Alice Martin", "Bob Stone"}
    assert {n["name"] for n in both["nodes"]} == {"Alice Martin", "Bob Stone", "Kubernetes", "Postgres"}


def test_it_names_the_closest_entities_the_caller_may_see(alice_ws, personas):
    api = personas.alice_api
    private = api.add("Alicia Keys reviews the gateway", scope={"userId": "u2"})
    g = team(alice_ws)
    g.entity("Alicia Keys", type="person")
    g.mentioned_in("Alicia Keys", memory_id=private["id"])
    error = api.error("graph/traverse", {"startEntity": "Alise"}, status=404, code="ENTITY_NOT_FOUND")
    assert error["details"]["closest"] == ["Alice Martin"] and "Closest: Alice Martin." in error["message"]
    as_u2 = api.error(
        "graph/facts", {"entity": "Alise", "scope": {"userId": "u2"}}, status=404, code="ENTITY_NOT_FOUND"
    )
    assert set(as_u2["details"]["closest"]) == {"Alice Martin", "Alicia Keys"}
    nothing = api.error("graph/entities", {"entity": "zzqx"}, status=404, code="ENTITY_NOT_FOUND")
    assert nothing["details"]["closest"] == []


def test_it_filters_an_entity_search_by_type_before_the_limit(alice_ws, personas):
    g = GraphBuilder(alice_ws)
    # Many concepts match "payments" better (more mentions) than the one project does.
    for i in range(30):
        g.entity(f"Payments Concept {i}", type="concept")
    g.entity("Payments Gateway", type="project")
    found = personas.alice_api.ok("graph/entities", {"query": "payments", "type": "project", "limit": 1})
    assert [e["name"] for e in found["entities"]] == ["Payments Gateway"]
    concepts = personas.alice_api.ok("graph/entities", {"query": "payments", "type": "concept", "limit": 25})
    assert len(concepts["entities"]) == 25 and {e["type"] for e in concepts["entities"]} == {"concept"}

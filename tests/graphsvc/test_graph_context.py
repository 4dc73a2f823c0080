"""context/get's entity-graph part (retrieval.graph_context): known facts and community summaries within a
share of the token budget, the facts walked in the classes and direction the caller asks, communities found
by their centroid or their summary, and only what the caller's end user may see."""

from __future__ import annotations

from typing import Any

from django.db import connections

from graphsvc import upkeep
from graphsvc.models import GraphCommunity, GraphCommunityMember
from tenancy.rls import workspace_context
from tests.graphsvc.graph_builder import GraphBuilder

LONG = "which the finance team relies on every night for the settlement of card payments across regions"


def context(api, **body: Any) -> dict[str, Any]:
    return api.ok("context/get", {"includeRules": False, **body})


def test_it_gives_known_facts_their_share_of_the_token_budget(alice_api, alice_ws, settings):
    g = GraphBuilder(alice_ws)
    for i in range(10):
        g.fact(
            "Billing",
            "uses",
            f"Service {i}",
            confidence=1 - i / 100,
            fact=f"Billing uses service {i}, {LONG}.",
        )
    small = context(alice_api, query="billing")
    trace = small["trace"]
    # 4 % of the default 4,000 tokens; each fact line is about 33 tokens.
    assert (
        trace["graphBudgetTokens"] == 160 and trace["factsRecalled"] == settings.GRAPH_CONTEXT_MAX_FACTS == 8
    )
    assert trace["factCount"] == len(small["facts"]) == 4 and trace["graphTokensUsed"] <= 160
    assert trace["factSeedSource"] == "words"
    section = small["context"].split("## Known facts\n", 1)[1]
    assert len(section.splitlines()) == 4 and section.startswith("- Billing uses service 0,")
    # The best facts are kept: the budget cuts from the end.
    assert [f["target"] for f in small["facts"]] == ["Service 0", "Service 1", "Service 2", "Service 3"]
    large = context(alice_api, query="billing", tokenBudget=20_000)
    assert large["trace"]["graphBudgetTokens"] == 800 and len(large["facts"]) == 8
    settings.GRAPH_CONTEXT_BUDGET_SHARE = 0
    none = context(alice_api, query="billing", tokenBudget=20_000)
    assert none["facts"] == [] and "## Known facts" not in none["context"]
    alice_api.error(
        "context/get", {"query": "billing", "tokenBudget": 10}, status=400, code="INVALID_REQUEST"
    )


def test_it_walks_the_classes_and_direction_the_caller_asks(alice_api, alice_ws):
    g = GraphBuilder(alice_ws)
    g.fact("Outage", "caused", "Billing Delay", edge_class="causal")
    g.fact("Billing Delay", "followed_by", "Refunds", edge_class="temporal")
    g.fact("Support Team", "reported", "Billing Delay")
    causal = context(alice_api, query="billing delay", factEdgeClasses=["causal"])
    assert [f["relation"] for f in causal["facts"]] == ["caused"]
    out = context(alice_api, query="billing delay", factDirection="out")
    assert [(f["source"], f["target"]) for f in out["facts"]] == [("Billing Delay", "Refunds")]
    into = context(alice_api, query="billing delay", factDirection="in")
    assert {f["source"] for f in into["facts"]} == {"Outage", "Support Team"}


def embedded(workspace_id: int, g: GraphBuilder, embedder: Any, model: str, names: dict[str, str]) -> None:
    """Entity vectors as extraction stores them ("name: summary" of the embedding model)."""
    vectors = embedder.embed(list(names.values()))
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        for name, vector in zip(names, vectors, strict=True):
            cursor.execute(
                "UPDATE graph_nodes SET embedding = %s::vector, embedding_model = %s WHERE id = %s",
                ["[" + ",".join(str(float(x)) for x in vector) + "]", model, g.ids[name]],
            )


def community(workspace_id: int, g: GraphBuilder, name: str, summary: str, members: list[str]) -> int:
    with workspace_context(workspace_id):
        row = GraphCommunity.objects.create(
            workspace_id=workspace_id, name=name, summary=summary, fingerprint=name
        )
        GraphCommunityMember.objects.bulk_create(
            GraphCommunityMember(workspace_id=workspace_id, node_id=g.ids[m], community_id=row.id)
            for m in members
        )
    return row.id


def test_it_quotes_the_communities_that_match_the_query(alice_api, alice_ws, local_embedder, settings):
    private = alice_api.add("The espresso machine belongs to u2's team", scope={"userId": "u2"})
    g = GraphBuilder(alice_ws)
    g.fact("Kubernetes Cluster", "runs", "Container Registry")
    g.fact("Container Registry", "stores", "Docker Images")
    g.fact("Sourdough Bread", "needs", "Rye Flour")
    g.fact("Espresso Machine", "needs", "Coffee Beans")
    g.mentioned_in("Espresso Machine", memory_id=private["id"])
    embedded(
        alice_ws,
        g,
        local_embedder,
        settings.EMBEDDING_MODEL,
        {
            "Kubernetes Cluster": "kubernetes cluster: runs our containers",
            "Container Registry": "container registry: stores container images",
            "Docker Images": "docker images: packaged applications",
            "Sourdough Bread": "sourdough bread: a fermented loaf",
            "Rye Flour": "rye flour: milled rye grain",
            "Espresso Machine": "espresso machine: makes coffee",
            "Coffee Beans": "coffee beans: roasted seeds",
        },
    )
    platform = community(
        alice_ws,
        g,
        "platform",
        "Our container platform: the cluster, its registry and the images it runs.",
        ["Kubernetes Cluster", "Container Registry", "Docker Images"],
    )
    community(alice_ws, g, "baking", "Bread baking at home.", ["Sourdough Bread", "Rye Flour"])
    coffee = community(
        alice_ws, g, "coffee", "How the team makes coffee.", ["Espresso Machine", "Coffee Beans"]
    )
    with workspace_context(alice_ws):
        # Summaries are written, then centroids follow (communities_summarize runs this first).
        assert upkeep.community_centroids_update(workspace_id=alice_ws) == 3
        assert GraphCommunity.objects.get(id=platform).centroid_model == settings.EMBEDDING_MODEL

    by_meaning = context(alice_api, query="where do we deploy containerized workloads", strategy="semantic")
    assert [c["id"] for c in by_meaning["communities"]] == [str(platform)]
    quoted = by_meaning["communities"][0]
    assert quoted["matchedBy"] == "centroid" and quoted["score"] >= settings.GRAPH_COMMUNITY_RECALL_MIN_COSINE
    assert set(quoted["memberIds"]) == {
        str(g.ids[n]) for n in ("Kubernetes Cluster", "Container Registry", "Docker Images")
    }
    assert (
        f"## Related topics\n- [community {platform}: platform] Our container platform"
        in by_meaning["context"]
    )
    assert by_meaning["trace"]["communityCount"] == 1
    # A lexical request never embeds the query: a community comes only through an entity the query names.
    lexical = context(alice_api, query="where do we deploy containerized workloads", strategy="lexical")
    assert lexical["communities"] == []
    named = context(alice_api, query="the container registry", strategy="lexical")
    assert [(c["id"], c["matchedBy"]) for c in named["communities"]] == [(str(platform), "summary")]

    # A community with a member the end user may not see is never quoted to them.
    for_u1 = context(alice_api, query="how do we brew espresso", strategy="semantic", scope={"userId": "u1"})
    for_u2 = context(alice_api, query="how do we brew espresso", strategy="semantic", scope={"userId": "u2"})
    assert str(coffee) not in {c["id"] for c in for_u1["communities"]}
    assert "How the team makes coffee." not in for_u1["context"]
    assert str(coffee) in {c["id"] for c in for_u2["communities"]}

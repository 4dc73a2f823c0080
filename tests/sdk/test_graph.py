"""cairn_sdk's entity graph methods against a live server: fixing entities by hand (merge, undo, split), the
background jobs that build the graph (backfill, community refresh) followed with jobs.wait, the direction of
fact recall, and the graph's share of the context's token budget."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from cairn_sdk import AsyncCairn, BadRequestError, Cairn, ConflictError, NotFoundError, models

from tests.graphsvc.graph_builder import GraphBuilder
from tests.graphsvc.test_communities import two_clusters
from tests.memories.helpers import run_jobs
from tests.sdk.conftest import LIVE, Account, Worker

pytestmark = LIVE
QUICK = {"poll_interval": 0.05, "timeout": 60}


def billing_graph(cairn: Cairn, account: Account) -> tuple[GraphBuilder, dict[str, int]]:
    """Billing uses a database the resolver kept apart as two entities; Alice works on Billing."""
    notes = {name: cairn.memories.add(f"note {name}").id for name in ("uses-pg", "uses-db", "alice")}
    g = GraphBuilder(account.workspace().id)
    g.entity("Postgres", type="tool", aliases=("pgsql",))
    g.entity("PostgreSQL DB", type="tool", aliases=("postgresql",))
    g.entity("Billing", type="project")
    g.entity("Alice", type="person")
    facts = {
        "uses-pg": g.fact("Billing", "uses", "Postgres", fact="Billing uses Postgres."),
        "uses-db": g.fact("Billing", "uses", "PostgreSQL DB", fact="Billing uses the PostgreSQL database."),
        "alice": g.fact("Alice", "works_on", "Billing", fact="Alice works on Billing."),
    }
    for name, memory_id in notes.items():
        g.supported_by(facts[name], memory_id=memory_id, user_id=None)
    return g, facts


def test_it_merges_entities_undoes_the_merge_and_splits_one(cairn: Cairn, alice: Account):
    g, facts = billing_graph(cairn, alice)
    merged = cairn.graph.merge_entities("pgsql", ["PostgreSQL DB"])
    assert isinstance(merged, models.EntityMergeResult)
    entity, (record,) = merged.entity, merged.merges
    assert entity.name == "Postgres" and {"pgsql", "postgresql", "postgresql db"} <= set(entity.aliases or [])
    assert (record.kind, record.merged_name, record.merged_id) == (
        "merge",
        "PostgreSQL DB",
        str(g.ids["PostgreSQL DB"]),
    )
    assert record.undone_at is None and entity.merges is not None and entity.merges[0].id == record.id
    assert entity.confidence is not None and 0 <= entity.confidence <= 1
    # The two "uses" facts were one claim: one current fact now, its id usable by split_entity.
    current = [f for f in entity.facts or [] if f.valid_to is None]
    assert [(f.source, f.relation, f.target) for f in current] == [("Billing", "uses", "Postgres")]
    detail = cairn.graph.entities(entity="PostgreSQL DB").entities[0]  # the merged name finds the survivor
    assert detail.id == entity.id and detail.merges is not None and detail.merges[0].id == record.id

    undone = cairn.graph.split_entity("Postgres", merge_id=record.id)
    assert isinstance(undone, models.EntitySplitResult)
    assert undone.merge.id == record.id and undone.merge.undone_at is not None
    assert {e.name for e in undone.entities} == {"Postgres", "PostgreSQL DB"}
    with pytest.raises(ConflictError) as again:
        cairn.graph.split_entity("Postgres", merge_id=record.id)
    assert again.value.code == "MERGE_NOT_UNDOABLE"

    split = cairn.graph.split_entity(
        "Postgres", name="Postgres (legacy)", aliases=["pgsql"], fact_ids=[str(facts["uses-pg"])]
    )
    assert split.merge.kind == "split"
    kept, made = split.entities
    assert kept.name == "Postgres" and made.name == "Postgres (legacy)" and "pgsql" in (made.aliases or [])
    assert [f.id for f in made.facts or []] == [str(facts["uses-pg"])]


def test_it_refuses_bad_merges_with_typed_errors(cairn: Cairn, alice: Account, base_url):
    billing_graph(cairn, alice)
    with pytest.raises(BadRequestError) as same:
        cairn.graph.merge_entities("Postgres", ["pgsql"])  # an alias of the same entity
    assert same.value.code == "MERGE_SAME_ENTITY"
    with pytest.raises(NotFoundError) as unknown:
        cairn.graph.merge_entities("Postgres", ["Postgress DB"])
    assert unknown.value.code == "ENTITY_NOT_FOUND" and "PostgreSQL DB" in str(
        unknown.value.details["closest"]
    )
    with pytest.raises(NotFoundError) as no_merge:
        cairn.graph.split_entity("Postgres", merge_id="12345")
    assert no_merge.value.code == "MERGE_NOT_FOUND"
    with pytest.raises(BadRequestError) as neither:
        cairn.graph.split_entity("Postgres")  # neither merge_id nor a new name
    assert neither.value.code == "INVALID_REQUEST"

    async def merge_async() -> models.EntityMergeResult:
        async with AsyncCairn(alice.key, base_url=base_url) as client:
            return await client.graph.merge_entities("Postgres", ["postgresql"])

    assert asyncio.run(merge_async()).merges[0].merged_name == "PostgreSQL DB"


def test_it_recalls_facts_in_the_direction_asked(cairn: Cairn, alice: Account):
    billing_graph(cairn, alice)
    both = cairn.graph.facts(entity="Billing", max_hops=1)
    assert both.seed_source == "entity" and both.seeds[0].name == "Billing" and both.seeds[0].id
    assert {f.relation for f in both.facts} == {"uses", "works_on"}
    out = cairn.graph.facts(entity="Billing", max_hops=1, direction="out")
    assert {(f.source, f.relation) for f in out.facts} == {("Billing", "uses")}
    inbound = cairn.graph.facts(entity="Billing", max_hops=1, direction="in")
    assert [(f.source, f.relation, f.target) for f in inbound.facts] == [("Alice", "works_on", "Billing")]
    typed = cairn.graph.facts(entity="Billing", max_hops=1, edge_types=["works on"])
    assert [f.relation for f in typed.facts] == ["works_on"]
    walked = cairn.graph.traverse("Billing", direction="in", max_hops=1)
    assert [node.name for node in walked.nodes] == ["Alice"]


def test_context_gives_the_graph_a_share_of_the_token_budget(cairn: Cairn, alice: Account, settings):
    billing_graph(cairn, alice)
    share = settings.GRAPH_CONTEXT_BUDGET_SHARE
    context = cairn.context.get("what does billing use", token_budget=8000)
    trace = context.trace
    assert trace.graph_budget_tokens == int(8000 * share) and trace.fact_seed_source == "words"
    assert trace.fact_count == len(context.facts) >= 1 and trace.facts_recalled >= trace.fact_count
    assert 0 < trace.graph_tokens_used <= trace.graph_budget_tokens
    assert "## Known facts" in context.context and context.communities == []
    assert cairn.context.get("what does billing use").trace.graph_budget_tokens == int(
        settings.CONTEXT_TOKEN_BUDGET * share
    )

    # The smallest budget leaves the graph no room for a fact line: recalled, but not in the answer.
    tight = cairn.context.get("what does billing use", token_budget=256)
    assert tight.trace.graph_budget_tokens == int(256 * share) and tight.facts == []
    assert tight.trace.facts_recalled >= 1 and "## Known facts" not in tight.context

    inbound = cairn.context.get("billing", token_budget=8000, fact_direction="in")
    assert [f.relation for f in inbound.facts] == ["works_on"]
    assert cairn.context.get("billing", token_budget=8000, fact_edge_classes=["temporal"]).facts == []
    traced = cairn.graph.trace("what does billing use", token_budget=8000)
    assert traced.trace.graph_budget_tokens == int(8000 * share)

    with pytest.raises(BadRequestError) as small:
        cairn.context.get("billing", token_budget=100)
    assert small.value.details["issues"][0]["field"] == "tokenBudget"


def test_it_refreshes_communities_as_a_job_and_waits_for_it(cairn: Cairn, alice: Account, worker: Worker):
    two_clusters(alice.workspace().id)
    worker.paused.set()
    started = cairn.graph.refresh_communities()
    assert isinstance(started, models.JobAccepted)
    assert (started.job.kind, started.job.status) == ("graph_communities_refresh", "queued")
    assert cairn.graph.refresh_communities().job_id == started.job_id  # queued already: the same job
    assert cairn.graph.communities().communities == []  # nothing ran in the request

    worker.paused.clear()
    done = cairn.jobs.wait(started.job_id, **QUICK)
    assert done.status == "succeeded" and done.result is not None and done.result["communities"] == 2
    listed = cairn.graph.communities()
    assert [c.size for c in listed.communities] == [4, 3] and listed.last_run_at is not None

    # refresh=True as before: the refresh runs (now as a job, waited for), then the list.
    refreshed = cairn.graph.communities(refresh=True, limit=1, **QUICK)
    assert [c.size for c in refreshed.communities] == [4]
    assert [job.kind for job in cairn.jobs.list().jobs] == ["graph_communities_refresh"] * 2


def test_it_backfills_extraction_as_a_job(
    cairn: Cairn, alice: Account, worker: Worker, local_embedder: Any, fake_llm: Any, settings
):
    model, settings.GRAPH_LLM_MODEL = settings.GRAPH_LLM_MODEL, ""
    cairn.memories.add("Alice Martin works on the billing service.")
    cairn.memories.add("The billing service runs on Kubernetes.")
    run_jobs(alice.workspace().id)  # embedded while no model was configured: never extracted
    settings.GRAPH_LLM_MODEL = model
    fake_llm.answers["entity_extraction"] = lambda user: (
        {
            "entities": [
                {"name": "Alice Martin", "type": "person", "summary": "Backend engineer"},
                {"name": "Billing Service", "type": "project", "summary": "Handles invoices"},
            ],
            "facts": [
                {
                    "source": "Alice Martin",
                    "target": "Billing Service",
                    "relation": "Works On",
                    "fact": "Alice Martin works on the billing service.",
                }
            ],
        }
        if "Alice Martin" in user
        else {"entities": [], "facts": []}
    )

    worker.paused.set()
    started = cairn.graph.backfill(limit=10)
    assert (started.job.kind, started.job.status) == ("graph_backfill", "queued")
    assert fake_llm.calls == []  # nothing ran in the request
    queued = cairn.jobs.status(started.job_id)
    assert queued.status == "queued" and queued.started_at is None

    worker.paused.clear()
    done = cairn.jobs.wait(started.job_id, **QUICK)
    assert (done.phase, done.done, done.total, done.result) == (
        "extract",
        2,
        2,
        {"memories": 2, "more": False},
    )
    assert {"Alice Martin", "Billing Service"} <= {e.name for e in cairn.graph.entities().entities}
    second = cairn.graph.backfill()
    assert cairn.jobs.wait(second.job_id, **QUICK).result == {"memories": 0, "more": False}


def test_backfill_needs_a_model(cairn: Cairn, settings):
    settings.GRAPH_LLM_MODEL = ""
    with pytest.raises(ConflictError) as refused:
        cairn.graph.backfill()
    assert refused.value.code == "LLM_NOT_CONFIGURED"
    assert cairn.jobs.list().jobs == []

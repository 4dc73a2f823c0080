"""context/get's statements: a workspace without an entity graph sends no fact recall (one cached check says
so), the graph's savepoint is not released on its own, and the retrieval's metric row is written by the
conflicts lookup's statement."""

from __future__ import annotations

import json

from django.db import connections
from django.test.utils import CaptureQueriesContext

from graphsvc import presence
from rollout.models import RetrievalMetric
from tenancy.rls import workspace_context
from tests.graphsvc.graph_builder import GraphBuilder

RECALL = "cfg AS MATERIALIZED"


def statements(api, body):
    with CaptureQueriesContext(connections["app"]) as captured:
        response = api.post("context/get", body)
    assert response.status_code == 200, response.content
    return [" ".join(q["sql"].split()) for q in captured.captured_queries], response.json()["data"]


def test_it_skips_fact_recall_in_a_workspace_without_an_entity_graph(alice_api, alice_ws, settings):
    settings.CONTEXT_SETTINGS_CACHE_SECONDS = 60
    presence.graph_presence_forget()
    alice_api.add("Billing depends on Postgres for invoices")
    body = {"query": "billing postgres", "strategy": "lexical"}

    sent, data = statements(alice_api, body)
    assert not any(RECALL in sql for sql in sent)
    assert data["facts"] == [] and data["trace"]["factSeedSource"] == "none"
    # The check itself is cached: the next call sends neither the recall nor the check.
    sent, _ = statements(alice_api, body)
    assert not any("graph_entity_terms" in sql for sql in sent)

    # An entity graph written by this process is seen at once; other processes see it within
    # CONTEXT_SETTINGS_CACHE_SECONDS (the cache's answer for an empty graph).
    GraphBuilder(alice_ws).fact("Billing", "depends_on", "Postgres")
    sent, data = statements(alice_api, body)
    assert not any(RECALL in sql for sql in sent)  # still cached here: the builder wrote behind its back
    presence.graph_presence_forget(workspace_id=alice_ws)
    sent, data = statements(alice_api, body)
    assert any(RECALL in sql for sql in sent)
    assert [f["fact"] for f in data["facts"]] == ["Billing depends on Postgres."]


def test_it_sees_a_new_entity_graph_once_the_empty_answer_expires(alice_api, alice_ws, settings):
    settings.CONTEXT_SETTINGS_CACHE_SECONDS = 0  # as when the TTL has passed in another process
    presence.graph_presence_forget()
    alice_api.add("Billing depends on Postgres for invoices")
    body = {"query": "billing postgres", "strategy": "lexical"}
    assert statements(alice_api, body)[1]["facts"] == []
    GraphBuilder(alice_ws).fact("Billing", "depends_on", "Postgres")
    assert [f["fact"] for f in statements(alice_api, body)[1]["facts"]] == ["Billing depends on Postgres."]


def test_it_records_the_metric_with_the_conflicts_lookup_and_keeps_the_savepoint(alice_api, alice_ws):
    alice_api.add("Deploys go through the staging cluster first")
    alice_api.add("Deploys go straight to production on Fridays")
    statements(alice_api, {"query": "deploys", "strategy": "lexical"})  # the rollout state, now cached
    with workspace_context(alice_ws):
        before = RetrievalMetric.objects.filter(workspace_id=alice_ws).count()
    sent, data = statements(alice_api, {"query": "deploys", "strategy": "lexical"})
    assert len(data["memories"]) == 2
    # The graph's savepoint is left for the commit (inside the test's transaction, workspace_context's own
    # block is a savepoint too, and that one is released).
    opened = [sql.split()[1] for sql in sent if sql.startswith("SAVEPOINT")]
    released = [sql.split()[2] for sql in sent if sql.startswith("RELEASE SAVEPOINT")]
    assert len(opened) == len(released) + 1, sent
    combined = [sql for sql in sent if "INSERT INTO retrieval_metrics" in sql]
    assert len(combined) == 1 and "contradicts" in combined[0]
    with workspace_context(alice_ws):
        rows = list(RetrievalMetric.objects.filter(workspace_id=alice_ws).order_by("-id"))
    assert len(rows) == before + 1
    assert rows[0].endpoint == "context/get" and rows[0].baseline_candidates == 2


def test_it_records_the_metric_when_there_is_nothing_to_compare(alice_api, alice_ws):
    with workspace_context(alice_ws):
        before = RetrievalMetric.objects.filter(workspace_id=alice_ws).count()
    sent, data = statements(alice_api, {"query": "nothing matches this", "strategy": "lexical"})
    assert data["memories"] == []
    assert sum("INSERT INTO retrieval_metrics" in sql for sql in sent) == 1
    with workspace_context(alice_ws):
        assert RetrievalMetric.objects.filter(workspace_id=alice_ws).count() == before + 1
    assert json.dumps(data["trace"]["durationMs"])

"""Update detection on write: an update supersedes what it changes (edge, decision, superseded_by), a
restatement is recorded, unrelated and differently scoped memories are left alone.
"""

from __future__ import annotations

from django.db import connections

from memories.models import SupersessionDecision
from tenancy.rls import workspace_context
from tests.memories.helpers import backdate, personal_workspace_id, run_jobs, stored

API = {"projectId": "github.com/demo/api"}


def _decisions(workspace_id: int) -> list[SupersessionDecision]:
    with workspace_context(workspace_id):
        return list(SupersessionDecision.objects.order_by("id"))


def _edges(workspace_id: int) -> list[tuple[str, str, str, str, float]]:
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute(
            """
            SELECT a.node_key, b.node_key, e.origin, e.edge_type, e.confidence FROM graph_edges e
            JOIN graph_nodes a ON a.id = e.from_node_id JOIN graph_nodes b ON b.id = e.to_node_id
            WHERE e.workspace_id = %s AND e.edge_type = 'supersedes' AND e.expired_at IS NULL
            """,
            [workspace_id],
        )
        return cursor.fetchall()


def test_it_supersedes_the_older_memory_an_update_changes(personas):
    api = personas.alice_api
    workspace_id = personal_workspace_id(personas.alice)
    old = api.add("We deploy the api to production every Friday afternoon.", type="decision", scope=API)
    backdate(workspace_id, old["id"], days=20)
    new = api.add(
        "Lena moved production deploys from Friday to Tuesday after two bad weekends.",
        type="decision",
        scope=API,
    )
    run_jobs(workspace_id)
    assert str(stored(workspace_id, old["id"]).superseded_by) == new["id"]
    assert stored(workspace_id, new["id"]).superseded_by is None
    [decision] = _decisions(workspace_id)
    assert (decision.decision, decision.origin, decision.actor) == (
        "supersedes",
        "heuristic",
        "system:update-detector",
    )
    assert decision.confidence >= 0.7 and decision.evidence["cue"] == "moved"
    assert decision.evidence["oldSpan"] == "friday" and decision.evidence["newSpan"] == "tuesday"
    [(newer, older, origin, _type, confidence)] = _edges(workspace_id)
    assert (newer, older, origin) == (new["id"], old["id"], "heuristic") and confidence == decision.confidence
    # Search and context/get answer with the current side only; includeSuperseded finds both, newer first.
    found = api.ok("memories/search", {"query": "when do we deploy to production", "scope": API})
    assert [m["id"] for m in found["memories"]][:1] == [new["id"]]
    assert old["id"] not in [m["id"] for m in found["memories"]]
    both = api.ok(
        "memories/search",
        {"query": "deploy production Friday", "scope": API, "includeSuperseded": True},
    )
    order = [m["id"] for m in both["memories"]]
    assert order.index(new["id"]) < order.index(old["id"])


def test_it_leaves_other_scopes_conditions_and_templates_alone(personas):
    api = personas.alice_api
    workspace_id = personal_workspace_id(personas.alice)
    shared = api.add("We deploy the api every Friday.", type="decision", scope=API)
    backdate(workspace_id, shared["id"], days=5)
    # Another end user's update never hides the shared memory.
    api.add("Deploys moved from Friday to Tuesday.", type="decision", scope={**API, "userId": "marcus"})
    # A condition: the older memory still holds outside it.
    api.add("During the December freeze, deploys move to Thursday.", type="decision", scope=API)
    first = api.add("Marcus wants skeletons instead of spinners on the pricing page.", scope=API)
    backdate(workspace_id, first["id"], days=1)
    api.add("Marcus wants skeletons instead of spinners on the checkout page.", scope=API)
    run_jobs(workspace_id)
    assert stored(workspace_id, shared["id"]).superseded_by is None
    assert stored(workspace_id, first["id"]).superseded_by is None
    assert [d.decision for d in _decisions(workspace_id)] == []


def test_it_records_a_restatement_without_hiding_either(personas):
    api = personas.alice_api
    workspace_id = personal_workspace_id(personas.alice)
    old = api.add("Secrets live in AWS Secrets Manager.", type="rule")
    backdate(workspace_id, old["id"], days=3)
    new = api.add("Secrets are kept in AWS Secrets Manager.", type="rule")
    run_jobs(workspace_id)
    [decision] = _decisions(workspace_id)
    assert (decision.decision, str(decision.newer_id), str(decision.older_id)) == (
        "restates",
        new["id"],
        old["id"],
    )
    assert stored(workspace_id, old["id"]).superseded_by is None

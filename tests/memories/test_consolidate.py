"""memories/consolidate: group by upsert key, newest wins, the others get superseded_by and a supersedes edge;
dryRun; the run recorded; superseded memories leave retrieval unless asked for."""

from __future__ import annotations

import pytest
from django.db import connections

from memories.hygiene import upsert_key
from memories.models import ConsolidationRun
from tenancy.rls import workspace_context
from tests.memories.helpers import ACME_SCOPE, backdate, ids, personal_workspace_id, stored


@pytest.mark.parametrize(
    ("content", "category", "key"),
    [
        ("whatever text", "Deploy Policy", "category:deploy policy"),
        ("Deploy day: Friday\nmore", None, "prefix:deploy day"),
        ("DEPLOY-DAY:  Monday", None, "prefix:deploy day"),
        ("We ship the mobile app every second Tuesday after QA", None, "words:we ship the mobile app every"),
        (
            "Note that a long sentence with many words before a colon: is not a label",
            None,
            "words:note that a long sentence with",
        ),
    ],
)
def test_it_derives_the_upsert_key(content, category, key):
    assert upsert_key(content=content, category=category) == key


def _three_deploy_days(api, workspace_id):
    old = api.add("Deploy day: Monday")
    mid = api.add("Deploy day: Wednesday")
    new = api.add("Deploy day: Friday")
    other = api.add("Release owner: Dana")
    for memory, days in ((old, 3), (mid, 2), (new, 1), (other, 1)):
        backdate(workspace_id, memory["id"], days=days)
    return old, mid, new, other


def test_it_previews_with_dry_run_and_changes_nothing(personas):
    api = personas.alice_api
    workspace_id = personal_workspace_id(personas.alice)
    old, mid, new, _ = _three_deploy_days(api, workspace_id)
    data = api.ok("memories/consolidate", {"dryRun": True})
    assert data["dryRun"] is True and data["runId"] is None
    assert data["winnerMemoryIds"] == [new["id"]]
    assert sorted(data["supersededMemoryIds"]) == sorted([old["id"], mid["id"]])
    assert data["run"]["supersededCount"] == 2 and data["run"]["inputCount"] == 4
    assert stored(workspace_id, old["id"]).superseded_by is None
    with workspace_context(workspace_id):
        assert not ConsolidationRun.objects.exists()


def test_it_supersedes_the_older_memories_of_a_key(personas):
    api = personas.alice_api
    workspace_id = personal_workspace_id(personas.alice)
    old, mid, new, other = _three_deploy_days(api, workspace_id)
    api.add("Deploy day: Friday")  # the same text again: superseded, but not a conflict
    data = api.ok("memories/consolidate", {"model": "none"})

    run = data["run"]
    assert data["runId"] == run["id"]
    assert (run["inputCount"], run["mergedCount"], run["supersededCount"], run["conflictedCount"]) == (
        5,
        1,
        3,
        2,
    )
    assert run["model"] == "none" and run["scope"] == "global"
    winner = data["winnerMemoryIds"][0]
    assert stored(workspace_id, old["id"]).superseded_by == stored(workspace_id, mid["id"]).superseded_by
    assert str(stored(workspace_id, old["id"]).superseded_by) == winner
    assert stored(workspace_id, other["id"]).superseded_by is None
    with workspace_context(workspace_id):
        recorded = ConsolidationRun.objects.get(pk=run["id"])
        assert recorded.superseded_count == 3

    # A supersedes edge from the winner to each memory it replaced.
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute(
            """
            SELECT t.node_key FROM graph_edges e
            JOIN graph_nodes f ON f.id = e.from_node_id JOIN graph_nodes t ON t.id = e.to_node_id
            WHERE e.workspace_id = %s AND e.edge_type = 'supersedes' AND e.origin = 'consolidation'
              AND f.node_key = %s
            """,
            [workspace_id, winner],
        )
        assert sorted(row[0] for row in cursor.fetchall()) == sorted(data["supersededMemoryIds"])

    # Out of retrieval unless asked for; a second run finds nothing more to do.
    listed = ids(api.ok("memories/list", {})["memories"])
    assert old["id"] not in listed and winner in listed
    found = ids(api.ok("memories/search", {"query": "deploy day"})["memories"])
    assert found == [winner]
    assert set(
        ids(api.ok("memories/search", {"query": "deploy day", "includeSuperseded": True})["memories"])
    ) >= {old["id"], mid["id"], winner}
    assert old["id"] not in ids(api.ok("context/get", {"query": "deploy day"})["memories"])
    assert old["id"] in ids(
        api.ok("context/get", {"query": "deploy day", "includeSuperseded": True})["memories"]
    )
    listed_all = ids(api.ok("memories/list", {"includeSuperseded": True})["memories"])
    assert old["id"] in listed_all
    superseded = next(
        m for m in api.ok("memories/list", {"includeSuperseded": True})["memories"] if m["id"] == old["id"]
    )
    assert superseded["supersededBy"] == winner
    assert api.ok("memories/consolidate", {})["run"]["supersededCount"] == 0


def test_it_keeps_types_users_and_projects_apart(personas):
    api = personas.alice_api
    api.add("Deploy day: Monday", type="decision")
    api.add("Deploy day: Friday", type="fact")
    api.add("Deploy day: Monday", scope={"userId": "u1"})
    api.add("Deploy day: Friday", scope={"userId": "u2"})
    assert api.ok("memories/consolidate", {})["run"]["supersededCount"] == 0
    assert api.ok("memories/consolidate", {"types": ["fact"], "dryRun": True})["run"]["inputCount"] == 1


def test_it_stays_in_the_callers_workspace(personas):
    bob = personas.bob_api
    bob.add("On-call: Erin", scope=ACME_SCOPE)
    kept = bob.add("On-call: Finn", scope=ACME_SCOPE)
    personas.charlie_api.add("On-call: Gus", scope=ACME_SCOPE)
    # charlie naming acme's project lands in his own workspace: acme's memories are not his to consolidate.
    data = personas.charlie_api.ok("memories/consolidate", {"scope": ACME_SCOPE})
    assert data["run"]["inputCount"] == 1 and data["supersededMemoryIds"] == []
    assert kept["id"] in ids(bob.ok("memories/list", {"scope": ACME_SCOPE})["memories"])
    assert len(bob.ok("memories/list", {"scope": ACME_SCOPE})["memories"]) == 2


def test_it_answers_404_for_another_owners_tenant(personas, settings):
    personas.alice_api.add("tenant note: a", scope={"tenantId": "cust-1"})
    settings.SDK_AUTO_PROVISION_TENANTS = False
    personas.charlie_api.error(
        "memories/consolidate", {"scope": {"tenantId": "cust-1"}}, status=404, code="TENANT_NOT_FOUND"
    )


def test_it_validates_and_can_be_turned_off(alice_api, settings):
    error = alice_api.error("memories/consolidate", {"types": ["memo"]}, status=400, code="INVALID_REQUEST")
    assert "types" in error["message"]
    error = alice_api.error(
        "memories/consolidate",
        {"globalOnly": True, "includeGlobal": False},
        status=400,
        code="INVALID_REQUEST",
    )
    assert "globalOnly" in error["message"]
    settings.MEMORY_CONSOLIDATION_ENABLED = False
    alice_api.error("memories/consolidate", {}, status=403, code="CONSOLIDATION_DISABLED")


def test_it_caps_the_input_of_one_run(alice_api, settings):
    settings.MEMORY_CONSOLIDATION_MAX_INPUT = 2
    for day in ("Monday", "Tuesday", "Wednesday"):
        alice_api.add(f"Standup: {day}")
    data = alice_api.ok("memories/consolidate", {})
    assert data["run"]["inputCount"] == 2 and data["run"]["supersededCount"] == 1

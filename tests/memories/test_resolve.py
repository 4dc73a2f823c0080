"""memories/resolve and memories/decisions: people and agents decide which memory is current (or that both
stand), every decision recorded with who and when, reversible, and final over the detector's."""

from __future__ import annotations

from django.test import Client

from tenancy import services
from tests.conftest import SdkClient
from tests.memories.helpers import backdate, personal_workspace_id, run_jobs, stored

API = {"projectId": "github.com/demo/api"}


def _pair(api, workspace_id):
    old = api.add("Emails are sent with SendGrid.", type="decision", scope=API)
    backdate(workspace_id, old["id"], days=10)
    new = api.add("We switched email from SendGrid to Postmark.", type="decision", scope=API)
    run_jobs(workspace_id)
    return old, new


def resolve(api, action, memory_id, other_id, **extra):
    return api.ok(
        "memories/resolve",
        {"action": action, "memoryId": memory_id, "otherMemoryId": other_id, "scope": API, **extra},
    )


def test_it_lets_a_person_keep_the_older_side_and_undo_it(personas):
    api = personas.alice_api
    workspace_id = personal_workspace_id(personas.alice)
    old, new = _pair(api, workspace_id)
    assert str(stored(workspace_id, old["id"]).superseded_by) == new["id"]  # the detector's call

    kept = resolve(api, "supersedes", old["id"], new["id"], note="Postmark was only a trial")
    decision = kept["decision"]
    assert (decision["decision"], decision["origin"], decision["newerMemoryId"]) == (
        "supersedes",
        "manual",
        old["id"],
    )
    assert decision["actor"] == f"user:{personas.alice.pk}" and decision["evidence"] == {
        "note": "Postmark was only a trial"
    }
    assert [d["origin"] for d in kept["reverted"]] == ["heuristic"]
    assert stored(workspace_id, old["id"]).superseded_by is None
    assert str(stored(workspace_id, new["id"]).superseded_by) == old["id"]
    found = api.ok("memories/search", {"query": "which email provider sends", "scope": API})
    assert [m["id"] for m in found["memories"]] == [old["id"]]

    # Editing the newer memory runs the detector again: a person's decision on the pair stands.
    api.ok(
        "memories/edit",
        {"id": new["id"], "content": "We switched email from SendGrid to Postmark!", "scope": API},
    )
    run_jobs(workspace_id)
    assert str(stored(workspace_id, new["id"]).superseded_by) == old["id"]

    undone = resolve(api, "revert", old["id"], new["id"])
    assert undone["decision"] is None and [d["id"] for d in undone["reverted"]] == [decision["id"]]
    assert stored(workspace_id, new["id"]).superseded_by is None
    history = api.ok("memories/decisions", {"memoryId": old["id"], "scope": API})["decisions"]
    assert [(d["origin"], d["revertedAt"] is not None) for d in history] == [
        ("manual", True),
        ("heuristic", True),
    ]
    active = api.ok("memories/decisions", {"memoryId": old["id"], "includeReverted": False, "scope": API})
    assert active["decisions"] == []


def test_it_records_that_both_stand(personas):
    api = personas.alice_api
    workspace_id = personal_workspace_id(personas.alice)
    old, new = _pair(api, workspace_id)
    both = resolve(api, "not_conflict", old["id"], new["id"])
    assert both["decision"]["decision"] == "not_conflict"
    assert both["decision"]["newerMemoryId"] == new["id"]  # stored newer first
    assert stored(workspace_id, old["id"]).superseded_by is None
    assert {m["id"] for m in both["memories"]} == {old["id"], new["id"]}


def test_it_refuses_what_the_caller_cannot_write(personas):
    api = personas.alice_api
    workspace_id = personal_workspace_id(personas.alice)
    old, new = _pair(api, workspace_id)
    # charlie: another tenant's ids are not found, and nothing changes.
    response = personas.charlie_api.post(
        "memories/resolve", {"action": "supersedes", "memoryId": old["id"], "otherMemoryId": new["id"]}
    )
    assert response.status_code == 404 and response.json()["error"]["code"] == "MEMORY_NOT_FOUND"
    assert personas.charlie_api.post("memories/decisions", {"memoryId": old["id"]}).status_code == 404
    # A read-only key of alice's own: 403, nothing changes.
    reader = SdkClient(Client(), services.api_key_create(user=personas.alice, scope="read").raw_key)
    refused = reader.post(
        "memories/resolve",
        {"action": "not_conflict", "memoryId": old["id"], "otherMemoryId": new["id"], "scope": API},
    )
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "FORBIDDEN_ROLE"
    assert reader.post("memories/decisions", {"memoryId": old["id"], "scope": API}).status_code == 200
    # Another end user's memory is not this caller's to decide about.
    private = api.add("Emails go through Mailgun for me.", type="decision", scope={**API, "userId": "u1"})
    hidden = api.post(
        "memories/resolve",
        {"action": "supersedes", "memoryId": old["id"], "otherMemoryId": private["id"], "scope": API},
    )
    assert hidden.status_code == 404
    same = api.post(
        "memories/resolve",
        {"action": "supersedes", "memoryId": old["id"], "otherMemoryId": old["id"], "scope": API},
    )
    assert same.status_code == 400 and "same memory" in same.json()["error"]["message"]
    bad = api.post("memories/resolve", {"action": "merge", "memoryId": old["id"], "otherMemoryId": new["id"]})
    assert bad.status_code == 400
    assert str(stored(workspace_id, old["id"]).superseded_by) == new["id"]

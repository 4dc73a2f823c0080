"""POST memories/vacuum: purges forgotten memories for good, within the caller's write scope only."""

from __future__ import annotations

from tests.memories.helpers import (
    ACME_SCOPE,
    add_org_global,
    ids,
    personal_workspace_id,
    stored,
    stored_count,
)


def forget(api, memory, **fields):
    api.ok("memories/forget", {"id": memory["id"], **fields})


def test_it_works(personas):
    api = personas.alice_api
    workspace_id = personal_workspace_id(personas.alice)
    gone = [api.add(f"gone {i}") for i in range(2)]
    kept = api.add("kept")
    for memory in gone:
        forget(api, memory)
    r = api.post("memories/vacuum", {})
    assert r.status_code == 200
    envelope = r.json()
    assert envelope["ok"] is True and envelope["meta"]["endpoint"] == "/api/sdk/v1/memories/vacuum"
    data = envelope["data"]
    assert set(data) == {"purged", "message"}
    assert data["purged"] == 2 and "2" in data["message"]
    assert all(stored(workspace_id, memory["id"]) is None for memory in gone)
    assert stored(workspace_id, kept["id"]) is not None
    assert ids(api.ok("memories/list", {})["memories"]) == [kept["id"]]
    assert api.ok("memories/vacuum", {})["purged"] == 0


def test_it_purges_nothing_live(personas):
    api = personas.alice_api
    for i in range(3):
        api.add(f"live {i}", layer="working" if i == 0 else None)
    assert api.ok("memories/vacuum", {})["purged"] == 0
    assert stored_count(personal_workspace_id(personas.alice)) == 3


def test_it_purges_bulk_forgotten_and_compacted_memories(personas, settings):
    settings.WORKING_MEMORY_MAX_ITEMS_PER_USER = 1
    api = personas.alice_api
    api.add("working 0", layer="working")
    api.add("working 1", layer="working")
    api.add("a fact", type="fact")
    api.ok("memories/bulk-forget", {"filters": {"types": ["fact"]}})
    assert api.ok("memories/vacuum", {})["purged"] == 2
    assert stored_count(personal_workspace_id(personas.alice)) == 1


def test_it_purges_only_the_given_users_memories(personas):
    api = personas.alice_api
    workspace_id = personal_workspace_id(personas.alice)
    shared = api.add("shared")
    u1 = api.add("u1", scope={"userId": "u1"})
    u2 = api.add("u2", scope={"userId": "u2"})
    forget(api, shared)
    forget(api, u1, scope={"userId": "u1"})
    forget(api, u2, scope={"userId": "u2"})
    assert api.ok("memories/vacuum", {"scope": {"userId": "u1"}})["purged"] == 1
    assert stored(workspace_id, u1["id"]) is None
    assert stored(workspace_id, shared["id"]) is not None and stored(workspace_id, u2["id"]) is not None
    assert api.ok("memories/vacuum", {})["purged"] == 1
    assert stored(workspace_id, shared["id"]) is None and stored(workspace_id, u2["id"]) is not None
    assert api.ok("memories/vacuum", {"scope": {"userId": "u2"}})["purged"] == 1
    assert stored_count(workspace_id) == 0


def test_it_ignores_the_project_for_writes(personas):
    api = personas.alice_api
    memory = api.add("api", scope={"projectId": "github.com/alice/api"})
    forget(api, memory)
    assert api.ok("memories/vacuum", {"scope": {"projectId": "github.com/alice/web"}})["purged"] == 1


def test_it_never_purges_another_workspace(personas):
    alice_memory = personas.alice_api.add("alice's note")
    org_memory = add_org_global(personas, "acme's note")
    forget(personas.alice_api, alice_memory)
    forget(personas.bob_api, org_memory, scope=ACME_SCOPE)
    assert personas.charlie_api.ok("memories/vacuum", {})["purged"] == 0
    assert personas.charlie_api.ok("memories/vacuum", {"scope": ACME_SCOPE})["purged"] == 0
    assert personas.bob_api.ok("memories/vacuum", {})["purged"] == 0
    assert stored(personal_workspace_id(personas.alice), alice_memory["id"]) is not None
    assert personas.alice_api.ok("memories/vacuum", {})["purged"] == 1
    assert stored(personas.acme.id, org_memory["id"]) is not None
    assert personas.alice_api.ok("memories/vacuum", {"scope": ACME_SCOPE})["purged"] == 1
    assert stored(personas.acme.id, org_memory["id"]) is None


def test_it_validates_the_body(alice_api):
    error = alice_api.error("memories/vacuum", {"force": True}, status=400, code="INVALID_REQUEST")
    assert error["details"]["issues"] == [
        {"field": "force", "message": "unknown field; remove it", "type": "extra_forbidden"}
    ]
    alice_api.error("memories/vacuum", {"scope": {"userId": ""}}, status=400, code="USER_ID_INVALID")

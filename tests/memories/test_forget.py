"""POST memories/forget: soft delete, validation, write scope and workspace isolation."""

from __future__ import annotations

import uuid

from tests.memories.helpers import ACME_SCOPE, add_org_global, ids, personal_workspace_id, stored


def test_it_works(personas):
    api = personas.alice_api
    memory = api.add("We deploy on Fridays")
    kept = api.add("We deploy with argo")
    r = api.post("memories/forget", {"id": memory["id"]})
    assert r.status_code == 200
    envelope = r.json()
    assert envelope["ok"] is True and envelope["meta"]["endpoint"] == "/api/sdk/v1/memories/forget"
    data = envelope["data"]
    assert set(data) == {"id", "deleted", "message"}
    assert data["id"] == memory["id"] and data["deleted"] is True and data["message"]
    assert ids(api.ok("memories/list", {})["memories"]) == [kept["id"]]
    assert ids(api.ok("memories/search", {"query": "deploy"})["memories"]) == [kept["id"]]


def test_it_only_soft_deletes(personas):
    memory = personas.alice_api.add("x")
    personas.alice_api.ok("memories/forget", {"id": memory["id"]})
    row = stored(personal_workspace_id(personas.alice), memory["id"])
    assert row is not None and row.deleted_at is not None


def test_it_forgets_once(alice_api):
    memory = alice_api.add("x")
    alice_api.ok("memories/forget", {"id": memory["id"]})
    error = alice_api.error("memories/forget", {"id": memory["id"]}, status=404, code="MEMORY_NOT_FOUND")
    assert error["details"] == {"id": memory["id"]}


def test_it_forgets_working_memories(alice_api):
    memory = alice_api.add("scratch", layer="working")
    alice_api.ok("memories/forget", {"id": memory["id"]})
    assert alice_api.ok("memories/list", {})["memories"] == []


def test_it_validates_the_body(alice_api):
    alice_api.error("memories/forget", {}, status=400, code="MEMORY_ID_REQUIRED")
    alice_api.error("memories/forget", {"id": ""}, status=400, code="MEMORY_ID_REQUIRED")
    alice_api.error("memories/forget", {"id": "   "}, status=400, code="MEMORY_ID_REQUIRED")
    alice_api.error("memories/forget", {"id": "i" * 65}, status=400, code="INVALID_REQUEST")
    error = alice_api.error(
        "memories/forget", {"id": str(uuid.uuid4()), "hard": True}, status=400, code="INVALID_REQUEST"
    )
    assert error["details"]["issues"] == [
        {"field": "hard", "message": "unknown field; remove it", "type": "extra_forbidden"}
    ]


def test_it_answers_404_for_unknown_ids(alice_api):
    alice_api.add("x")
    for memory_id in (str(uuid.uuid4()), "not-a-uuid", "  " + str(uuid.uuid4()) + "  "):
        alice_api.error("memories/forget", {"id": memory_id}, status=404, code="MEMORY_NOT_FOUND")
    assert alice_api.ok("memories/list", {})["count"] == 1


def test_it_accepts_a_padded_id(alice_api):
    memory = alice_api.add("x")
    assert alice_api.ok("memories/forget", {"id": f"  {memory['id']}  "})["id"] == memory["id"]


def test_it_never_forgets_in_another_workspace(personas):
    memory = personas.alice_api.add("alice's secret plan")
    for api, scope in (
        (personas.charlie_api, {}),
        (personas.charlie_api, ACME_SCOPE),
        (personas.bob_api, {}),
        (personas.bob_api, ACME_SCOPE),
        (personas.alice_api, ACME_SCOPE),
    ):
        r = api.post("memories/forget", {"id": memory["id"], "scope": scope})
        assert r.status_code == 404
        assert r.json()["error"]["code"] == "MEMORY_NOT_FOUND"
        assert "secret" not in r.content.decode()
    assert stored(personal_workspace_id(personas.alice), memory["id"]).deleted_at is None
    assert ids(personas.alice_api.ok("memories/list", {})["memories"]) == [memory["id"]]


def test_it_keeps_org_memories_in_the_org(personas):
    project = personas.alice_api.add("acme uses argo", scope=ACME_SCOPE)
    shared = add_org_global(personas, "acme ships on tuesdays")
    for memory in (project, shared):
        personas.alice_api.error("memories/forget", {"id": memory["id"]}, status=404, code="MEMORY_NOT_FOUND")
        personas.charlie_api.error(
            "memories/forget", {"id": memory["id"], "scope": ACME_SCOPE}, status=404, code="MEMORY_NOT_FOUND"
        )
    assert stored(personas.acme.id, project["id"]).deleted_at is None
    personas.bob_api.ok("memories/forget", {"id": project["id"], "scope": ACME_SCOPE})
    personas.alice_api.ok("memories/forget", {"id": shared["id"], "scope": ACME_SCOPE})
    assert personas.alice_api.ok("memories/list", {"scope": ACME_SCOPE})["memories"] == []


def test_it_forgets_only_the_given_users_memories(alice_api):
    u1 = alice_api.add("u1's memory", scope={"userId": "u1"})
    shared = alice_api.add("shared memory")
    alice_api.error("memories/forget", {"id": u1["id"]}, status=404, code="MEMORY_NOT_FOUND")
    alice_api.error(
        "memories/forget", {"id": u1["id"], "scope": {"userId": "u2"}}, status=404, code="MEMORY_NOT_FOUND"
    )
    alice_api.error(
        "memories/forget",
        {"id": shared["id"], "scope": {"userId": "u1"}},
        status=404,
        code="MEMORY_NOT_FOUND",
    )
    assert ids(alice_api.ok("memories/list", {"scope": {"userId": "u1"}})["memories"]) == [
        shared["id"],
        u1["id"],
    ]
    alice_api.ok("memories/forget", {"id": u1["id"], "scope": {"userId": "u1"}})
    alice_api.ok("memories/forget", {"id": shared["id"]})
    assert alice_api.ok("memories/list", {"scope": {"userId": "u1"}})["memories"] == []


def test_it_does_not_use_the_project_as_a_write_filter(alice_api):
    memory = alice_api.add("api memory", scope={"projectId": "github.com/alice/api"})
    alice_api.ok("memories/forget", {"id": memory["id"], "scope": {"projectId": "github.com/alice/web"}})
    assert alice_api.ok("memories/list", {"scope": {"projectId": "github.com/alice/api"}})["memories"] == []

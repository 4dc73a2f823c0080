"""POST memories/edit: field changes, layer and expiry rules, validation, write scope, workspace isolation."""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.utils import timezone

from tests.memories.helpers import (
    ACME_SCOPE,
    add_org_global,
    assert_about,
    ids,
    parse_time,
    personal_workspace_id,
    stored,
)


def edit(api, memory_id, **fields):
    return api.ok("memories/edit", {"id": memory_id, **fields})


def test_it_works(alice_api):
    memory = alice_api.add("We deploy on Fridays", tags=["ops"])
    r = alice_api.post("memories/edit", {"id": memory["id"], "content": "  We deploy on Mondays  "})
    assert r.status_code == 200
    envelope = r.json()
    assert envelope["ok"] is True and envelope["meta"]["endpoint"] == "/api/sdk/v1/memories/edit"
    data = envelope["data"]
    assert set(data) == {"id", "updated", "message", "memory", "embeddingModel", "embeddingModelSource"}
    assert data["id"] == memory["id"] and data["updated"] is True and data["message"]
    assert data["embeddingModelSource"] == "workspace_default"
    edited = data["memory"]
    assert edited["content"] == "We deploy on Mondays"
    assert edited["tags"] == ["ops"] and edited["type"] == "note" and edited["layer"] == "long_term"
    assert edited["createdAt"] == memory["createdAt"]
    assert parse_time(edited["updatedAt"]) > parse_time(memory["updatedAt"])
    assert alice_api.ok("memories/list", {})["memories"] == [edited]


def test_it_reindexes_changed_content(alice_api):
    memory = alice_api.add("We deploy on Fridays")
    edit(alice_api, memory["id"], content="Releases happen on Mondays")
    assert alice_api.ok("memories/search", {"query": "friday"})["memories"] == []
    assert ids(alice_api.ok("memories/search", {"query": "monday"})["memories"]) == [memory["id"]]


def test_it_changes_every_field(alice_api):
    memory = alice_api.add("x", tags=["old"], paths=["a.py"], category="old", metadata={"a": 1})
    data = edit(
        alice_api,
        memory["id"],
        type="decision",
        tags=["new", "new", "other"],
        paths=["b.py"],
        category="new",
        metadata={"b": 2},
        embeddingModel="local/all-MiniLM-L6-v2",
    )
    edited = data["memory"]
    assert edited["content"] == "x"
    assert edited["type"] == "decision" and edited["layer"] == "long_term"
    assert edited["tags"] == ["new", "other"]
    assert edited["paths"] == ["b.py"]
    assert edited["category"] == "new"
    assert edited["metadata"] == {"b": 2}
    assert data["embeddingModel"] == "local/all-MiniLM-L6-v2"
    assert data["embeddingModelSource"] == "request"


def test_it_refuses_an_embedding_model_the_operator_did_not_allow(alice_api):
    memory = alice_api.add("x")
    body = {"id": memory["id"], "embeddingModel": "ollama/x"}
    alice_api.error("memories/edit", body, status=400, code="EMBEDDING_MODEL_NOT_ALLOWED")


def test_it_clears_metadata_with_null_and_tags_with_an_empty_list(alice_api):
    memory = alice_api.add("x", tags=["a"], metadata={"a": 1})
    edited = edit(alice_api, memory["id"], metadata=None)["memory"]
    assert edited["metadata"] is None and edited["tags"] == ["a"]
    assert edit(alice_api, memory["id"], tags=[])["memory"]["tags"] == []


def test_it_ignores_null_for_other_fields(alice_api):
    memory = alice_api.add("keep me", category="c")
    edited = edit(alice_api, memory["id"], content=None, category="d")["memory"]
    assert edited["content"] == "keep me" and edited["category"] == "d"


def test_it_makes_a_rule_a_rule_layer_memory(alice_api):
    memory = alice_api.add("Draft: maybe always squash", layer="working")
    edited = edit(alice_api, memory["id"], type="rule")["memory"]
    assert edited["type"] == "rule" and edited["layer"] == "rule" and edited["expiresAt"] is None


def test_it_keeps_an_explicit_layer_with_type_rule(alice_api):
    memory = alice_api.add("x")
    edited = edit(alice_api, memory["id"], type="rule", layer="long_term")["memory"]
    assert edited["type"] == "rule" and edited["layer"] == "long_term" and edited["expiresAt"] is None


def test_it_restarts_the_expiry_when_moving_to_working(alice_api):
    memory = alice_api.add("scratch")
    edited = edit(alice_api, memory["id"], layer="working")["memory"]
    assert edited["layer"] == "working"
    assert_about(edited["expiresAt"], timezone.now() + timedelta(hours=24))


def test_it_clears_the_expiry_when_leaving_working(alice_api):
    memory = alice_api.add("scratch", layer="working")
    assert memory["expiresAt"] is not None
    edited = edit(alice_api, memory["id"], layer="long_term")["memory"]
    assert edited["layer"] == "long_term" and edited["expiresAt"] is None


def test_it_keeps_the_expiry_when_the_layer_stays(alice_api):
    memory = alice_api.add("scratch", layer="working")
    edited = edit(alice_api, memory["id"], content="scratch 2")["memory"]
    assert edited["layer"] == "working" and edited["expiresAt"] == memory["expiresAt"]


def test_it_needs_something_to_change(alice_api):
    memory = alice_api.add("x")
    for body in (
        {"id": memory["id"]},
        {"id": memory["id"], "content": None},
        {"id": memory["id"], "scope": {}},
    ):
        error = alice_api.error("memories/edit", body, status=400, code="INVALID_REQUEST")
        assert "Nothing to change" in error["message"]


def test_it_validates_fields(alice_api):
    memory = alice_api.add("x")
    memory_id = memory["id"]
    alice_api.error("memories/edit", {"content": "y"}, status=400, code="MEMORY_ID_REQUIRED")
    alice_api.error("memories/edit", {"id": "", "content": "y"}, status=400, code="MEMORY_ID_REQUIRED")
    alice_api.error("memories/edit", {"id": "i" * 65, "content": "y"}, status=400, code="INVALID_REQUEST")
    alice_api.error(
        "memories/edit", {"id": memory_id, "content": ""}, status=400, code="MEMORY_CONTENT_REQUIRED"
    )
    alice_api.error(
        "memories/edit", {"id": memory_id, "content": "   "}, status=400, code="MEMORY_CONTENT_REQUIRED"
    )
    alice_api.error(
        "memories/edit", {"id": memory_id, "content": "y" * 8001}, status=400, code="INVALID_REQUEST"
    )
    alice_api.error(
        "memories/edit", {"id": memory_id, "layer": "deep"}, status=400, code="MEMORY_LAYER_INVALID"
    )
    alice_api.error("memories/edit", {"id": memory_id, "type": "memo"}, status=400, code="INVALID_REQUEST")
    cases = {
        "tags": [f"t{i}" for i in range(51)],
        "paths": [f"p{i}" for i in range(101)],
        "category": "c" * 121,
        "metadata": {"blob": "x" * 16_384},
    }
    for field, value in cases.items():
        error = alice_api.error(
            "memories/edit", {"id": memory_id, field: value}, status=400, code="INVALID_REQUEST"
        )
        assert error["details"]["issues"][0]["field"] == field
    error = alice_api.error(
        "memories/edit", {"id": memory_id, "tags": ["y" * 121]}, status=400, code="INVALID_REQUEST"
    )
    assert error["details"]["issues"][0]["field"] == "tags.0"
    error = alice_api.error(
        "memories/edit", {"id": memory_id, "pinned": True}, status=400, code="INVALID_REQUEST"
    )
    assert error["details"]["issues"] == [
        {"field": "pinned", "message": "unknown field; remove it", "type": "extra_forbidden"}
    ]
    assert alice_api.ok("memories/list", {})["memories"] == [memory]


def test_it_refuses_a_nul_character(alice_api):
    memory = alice_api.add("x")
    body = {"id": memory["id"], "content": "a\x00b"}
    error = alice_api.error("memories/edit", body, status=400, code="INVALID_REQUEST")
    assert error["details"]["issues"][0]["field"] == "content"
    assert alice_api.ok("memories/list", {})["memories"] == [memory]


def test_it_answers_404_for_unknown_ids(alice_api):
    for memory_id in (str(uuid.uuid4()), "not-a-uuid"):
        error = alice_api.error(
            "memories/edit", {"id": memory_id, "content": "y"}, status=404, code="MEMORY_NOT_FOUND"
        )
        assert error["type"] == "not_found_error"
        assert error["details"] == {"id": memory_id}


def test_it_cannot_edit_a_forgotten_memory(alice_api):
    memory = alice_api.add("x")
    alice_api.ok("memories/forget", {"id": memory["id"]})
    alice_api.error(
        "memories/edit", {"id": memory["id"], "content": "back"}, status=404, code="MEMORY_NOT_FOUND"
    )


def test_it_never_edits_another_workspace(personas):
    memory = personas.alice_api.add("alice's secret plan")
    for api, scope in (
        (personas.charlie_api, {}),
        (personas.charlie_api, ACME_SCOPE),
        (personas.bob_api, {}),
        (personas.bob_api, ACME_SCOPE),
        (personas.alice_api, ACME_SCOPE),
    ):
        r = api.post("memories/edit", {"id": memory["id"], "content": "pwned", "scope": scope})
        assert r.status_code == 404
        envelope = r.json()
        assert envelope["data"] is None and envelope["error"]["code"] == "MEMORY_NOT_FOUND"
        assert "secret" not in r.content.decode()
    assert stored(personal_workspace_id(personas.alice), memory["id"]).content == "alice's secret plan"


def test_it_keeps_org_memories_in_the_org(personas):
    project = personas.alice_api.add("acme uses argo", scope=ACME_SCOPE)
    shared = add_org_global(personas, "acme ships on tuesdays")
    for memory in (project, shared):
        personas.alice_api.error(
            "memories/edit", {"id": memory["id"], "content": "x"}, status=404, code="MEMORY_NOT_FOUND"
        )
        personas.charlie_api.error(
            "memories/edit",
            {"id": memory["id"], "content": "x", "scope": ACME_SCOPE},
            status=404,
            code="MEMORY_NOT_FOUND",
        )
    # Members of acme share its memories.
    assert (
        edit(personas.bob_api, project["id"], content="acme uses flux", scope=ACME_SCOPE)["updated"] is True
    )
    assert edit(personas.alice_api, shared["id"], category="release", scope=ACME_SCOPE)["updated"] is True
    assert stored(personas.acme.id, project["id"]).content == "acme uses flux"


def test_it_edits_only_the_given_users_memories(alice_api):
    u1 = alice_api.add("u1's memory", scope={"userId": "u1"})
    shared = alice_api.add("shared memory")
    alice_api.error("memories/edit", {"id": u1["id"], "content": "x"}, status=404, code="MEMORY_NOT_FOUND")
    alice_api.error(
        "memories/edit",
        {"id": u1["id"], "content": "x", "scope": {"userId": "u2"}},
        status=404,
        code="MEMORY_NOT_FOUND",
    )
    alice_api.error(
        "memories/edit",
        {"id": shared["id"], "content": "x", "scope": {"userId": "u1"}},
        status=404,
        code="MEMORY_NOT_FOUND",
    )
    assert (
        edit(alice_api, u1["id"], content="u1 edited", scope={"userId": "u1"})["memory"]["content"]
        == "u1 edited"
    )
    assert edit(alice_api, shared["id"], content="shared edited")["memory"]["content"] == "shared edited"


def test_it_does_not_use_the_project_as_a_write_filter(alice_api):
    memory = alice_api.add("api memory", scope={"projectId": "github.com/alice/api"})
    edited = edit(alice_api, memory["id"], content="still the api memory")["memory"]
    assert edited["scope"] == "project" and edited["projectId"] == "github.com/alice/api"
    edited = edit(alice_api, memory["id"], category="c", scope={"projectId": "github.com/alice/web"})[
        "memory"
    ]
    assert edited["projectId"] == "github.com/alice/api"


def test_it_caps_working_memories_after_an_edit(alice_api, settings):
    settings.WORKING_MEMORY_MAX_ITEMS_PER_USER = 2
    oldest = alice_api.add("working 0", layer="working")
    middle = alice_api.add("working 1", layer="working")
    long_term = alice_api.add("long-term")
    edit(alice_api, long_term["id"], layer="working")
    listed = alice_api.ok("memories/list", {"layer": "working"})["memories"]
    assert ids(listed) == [long_term["id"], middle["id"]]
    assert oldest["id"] not in ids(alice_api.ok("memories/list", {})["memories"])

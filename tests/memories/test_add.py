"""POST memories/add: defaults, every field, validation codes, scope rules and the working-layer cap."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from memories.models import Memory
from tenancy.rls import workspace_context
from tests.memories.helpers import (
    ACME_SCOPE,
    assert_about,
    ids,
    personal_workspace_id,
    stored,
    stored_count,
)

MEMORY_FIELDS = {
    "id",
    "content",
    "type",
    "layer",
    "expiresAt",
    "scope",
    "projectId",
    "tags",
    "paths",
    "category",
    "metadata",
    "createdAt",
    "updatedAt",
    "injectionFlags",
    "importance",
    "supersededBy",
    "conversation",
    "pipeline",
}


def test_it_works(alice_api):
    r = alice_api.post("memories/add", {"content": "We deploy with blue-green on Fridays"})
    assert r.status_code == 201
    envelope = r.json()
    assert envelope["ok"] is True and envelope["error"] is None
    assert set(envelope["meta"]) == {"version", "endpoint", "requestId", "timestamp"}
    assert envelope["meta"]["endpoint"] == "/api/sdk/v1/memories/add"
    assert r["X-Request-Id"] == envelope["meta"]["requestId"]
    data = envelope["data"]
    assert set(data) == {
        "id",
        "message",
        "memory",
        "embeddingModel",
        "embeddingModelSource",
        "admitted",
        "admission",
    }
    assert data["embeddingModelSource"] == "workspace_default" and data["embeddingModel"]
    memory = data["memory"]
    assert set(memory) == MEMORY_FIELDS
    assert memory["id"] == data["id"]
    assert memory["content"] == "We deploy with blue-green on Fridays"
    assert memory["type"] == "note"
    assert memory["layer"] == "long_term"
    assert memory["expiresAt"] is None
    assert memory["scope"] == "global" and memory["projectId"] is None
    assert memory["tags"] == [] and memory["paths"] == []
    assert memory["category"] is None and memory["metadata"] is None
    assert_about(memory["createdAt"], timezone.now())
    assert memory["updatedAt"] == memory["createdAt"]


def test_it_stores_every_field(alice_api):
    data = alice_api.ok(
        "memories/add",
        {
            "content": "  Use ruff for linting  ",
            "type": "decision",
            "tags": ["python", "lint", "python"],
            "paths": ["pyproject.toml", "ruff.toml"],
            "category": "tooling",
            "metadata": {"source": "review", "nested": {"n": 1, "list": [1, 2]}},
            "embeddingModel": "local/all-MiniLM-L6-v2",
        },
        status=201,
    )
    memory = data["memory"]
    assert memory["content"] == "Use ruff for linting"
    assert memory["type"] == "decision" and memory["layer"] == "long_term"
    assert memory["tags"] == ["python", "lint"]
    assert memory["paths"] == ["pyproject.toml", "ruff.toml"]
    assert memory["category"] == "tooling"
    assert memory["metadata"] == {"source": "review", "nested": {"n": 1, "list": [1, 2]}}
    assert data["embeddingModel"] == "local/all-MiniLM-L6-v2"
    assert data["embeddingModelSource"] == "request"
    listed = alice_api.ok("memories/list", {})["memories"]
    assert listed == [memory]


def test_it_accepts_every_type(alice_api):
    for memory_type in ("rule", "decision", "fact", "note", "skill"):
        assert alice_api.add(f"a {memory_type}", type=memory_type)["type"] == memory_type


def test_it_puts_rules_in_the_rule_layer(alice_api):
    memory = alice_api.add("Never force-push to main", type="rule")
    assert memory["layer"] == "rule" and memory["expiresAt"] is None


def test_it_keeps_an_explicit_layer(alice_api):
    assert alice_api.add("rule kept long", type="rule", layer="long_term")["layer"] == "long_term"
    assert alice_api.add("fact as rule", type="fact", layer="rule")["layer"] == "rule"


def test_it_gives_working_memories_a_day_to_live(alice_api):
    memory = alice_api.add("Currently debugging the login flow", layer="working")
    assert memory["layer"] == "working"
    assert_about(memory["expiresAt"], timezone.now() + timedelta(hours=24))


def test_it_uses_the_configured_working_ttl(alice_api, settings):
    settings.WORKING_MEMORY_TTL_HOURS = 2
    memory = alice_api.add("short-lived", layer="working")
    assert_about(memory["expiresAt"], timezone.now() + timedelta(hours=2))


def test_it_makes_project_memories_with_a_project_id(alice_api):
    memory = alice_api.add("The api repo uses Django", scope={"projectId": "github.com/alice/api"})
    assert memory["scope"] == "project"
    assert memory["projectId"] == "github.com/alice/api"


def test_it_trims_the_scope(personas):
    memory = personas.alice_api.add(
        "trimmed scope", scope={"projectId": "  github.com/alice/api  ", "userId": " u1 "}
    )
    assert memory["projectId"] == "github.com/alice/api"
    row = stored(personal_workspace_id(personas.alice), memory["id"])
    assert row.user_id == "u1"


def test_it_stores_the_user_id_without_returning_it(personas):
    memory = personas.alice_api.add("u1 likes tabs", scope={"userId": "u1"})
    assert "userId" not in memory
    row = stored(personal_workspace_id(personas.alice), memory["id"])
    assert row.user_id == "u1" and row.scope == "global"


def test_it_writes_into_the_callers_personal_workspace(personas):
    memory = personas.alice_api.add("personal note")
    assert stored(personal_workspace_id(personas.alice), memory["id"]) is not None
    assert stored(personas.acme.id, memory["id"]) is None


def test_it_routes_an_org_project_to_the_org(personas):
    memory = personas.alice_api.add("acme deploys on k8s", scope=ACME_SCOPE)
    assert stored(personas.acme.id, memory["id"]) is not None
    assert stored(personal_workspace_id(personas.alice), memory["id"]) is None
    # bob is a member of acme: he sees it; charlie's github.com/acme/* calls land in his own workspace.
    assert ids(personas.bob_api.ok("memories/list", {"scope": ACME_SCOPE})["memories"]) == [memory["id"]]
    assert personas.charlie_api.ok("memories/list", {"scope": ACME_SCOPE})["memories"] == []


def test_it_requires_content(alice_api):
    for body in ({}, {"content": ""}, {"content": "   "}, {"content": None}):
        error = alice_api.error("memories/add", body, status=400, code="MEMORY_CONTENT_REQUIRED")
        assert error["type"] == "validation_error" and error["retryable"] is False
        assert error["details"]["issues"][0]["field"] == "content"
    assert alice_api.ok("memories/list", {})["memories"] == []


def test_it_limits_content_to_8000_characters(alice_api):
    assert len(alice_api.add("x" * 8000)["content"]) == 8000
    error = alice_api.error("memories/add", {"content": "x" * 8001}, status=400, code="INVALID_REQUEST")
    assert error["details"]["issues"][0]["field"] == "content"
    assert "8000" in error["message"]


def test_it_rejects_an_unknown_type(alice_api):
    error = alice_api.error(
        "memories/add", {"content": "x", "type": "memo"}, status=400, code="INVALID_REQUEST"
    )
    assert [issue["field"] for issue in error["details"]["issues"]] == ["type"]


def test_it_rejects_an_unknown_layer(alice_api):
    error = alice_api.error(
        "memories/add", {"content": "x", "layer": "short_term"}, status=400, code="MEMORY_LAYER_INVALID"
    )
    assert error["details"]["issues"][0]["field"] == "layer"


def test_it_names_unknown_fields(alice_api):
    error = alice_api.error(
        "memories/add", {"content": "x", "importance": 5}, status=400, code="INVALID_REQUEST"
    )
    assert error["details"]["issues"] == [
        {"field": "importance", "message": "unknown field; remove it", "type": "extra_forbidden"}
    ]
    assert "importance" in error["message"]
    error = alice_api.error(
        "memories/add", {"content": "x", "scope": {"user": "u1"}}, status=400, code="INVALID_REQUEST"
    )
    assert [issue["field"] for issue in error["details"]["issues"]] == ["scope.user"]
    assert alice_api.ok("memories/list", {})["memories"] == []


def test_it_limits_tags(alice_api):
    assert len(alice_api.add("fifty tags", tags=[f"t{i}" for i in range(50)])["tags"]) == 50
    assert alice_api.add("long tag", tags=["x" * 120])["tags"] == ["x" * 120]
    error = alice_api.error(
        "memories/add",
        {"content": "x", "tags": [f"t{i}" for i in range(51)]},
        status=400,
        code="INVALID_REQUEST",
    )
    assert error["details"]["issues"][0]["field"] == "tags"
    error = alice_api.error(
        "memories/add", {"content": "x", "tags": ["ok", "y" * 121]}, status=400, code="INVALID_REQUEST"
    )
    assert error["details"]["issues"][0]["field"] == "tags.1"
    error = alice_api.error(
        "memories/add", {"content": "x", "tags": ["  "]}, status=400, code="INVALID_REQUEST"
    )
    assert error["details"]["issues"][0]["field"] == "tags.0"
    alice_api.error("memories/add", {"content": "x", "tags": "deploy"}, status=400, code="INVALID_REQUEST")


def test_it_limits_paths_category_and_model(alice_api):
    cases = {
        "paths": [f"p{i}" for i in range(101)],
        "category": "c" * 121,
        "embeddingModel": "m" * 161,
    }
    for field, value in cases.items():
        error = alice_api.error(
            "memories/add", {"content": "x", field: value}, status=400, code="INVALID_REQUEST"
        )
        assert error["details"]["issues"][0]["field"] == field
    error = alice_api.error(
        "memories/add", {"content": "x", "paths": ["p" * 301]}, status=400, code="INVALID_REQUEST"
    )
    assert error["details"]["issues"][0]["field"] == "paths.0"
    assert alice_api.ok("memories/list", {})["memories"] == []


def test_it_limits_metadata_to_16_kb(alice_api, settings):
    assert settings.MEMORY_METADATA_MAX_BYTES == 16_384
    # {"blob":"…"} is 11 bytes of JSON around the value.
    fits = {"blob": "x" * (16_384 - 11)}
    assert alice_api.add("fits", metadata=fits)["metadata"] == fits
    error = alice_api.error(
        "memories/add",
        {"content": "x", "metadata": {"blob": "x" * (16_384 - 10)}},
        status=400,
        code="INVALID_REQUEST",
    )
    assert error["details"]["issues"][0]["field"] == "metadata"
    assert "16384" in error["message"]


def test_it_measures_metadata_in_utf8_bytes(alice_api):
    # "é" is 2 bytes in UTF-8 (6 as an ASCII \u escape): 8000 of them are 16,011 bytes of JSON.
    fits = {"blob": "é" * 8000}
    assert alice_api.add("fits", metadata=fits)["metadata"] == fits
    error = alice_api.error(
        "memories/add", {"content": "x", "metadata": {"blob": "é" * 8200}}, status=400, code="INVALID_REQUEST"
    )
    assert "16411 bytes" in error["message"]


def test_it_wants_metadata_to_be_an_object(alice_api):
    for value in (["a"], "text", 5):
        error = alice_api.error(
            "memories/add", {"content": "x", "metadata": value}, status=400, code="INVALID_REQUEST"
        )
        assert error["details"]["issues"][0]["field"] == "metadata"


def test_it_refuses_what_postgres_cannot_store(alice_api):
    # NUL cannot go into Postgres text or jsonb; a lone surrogate cannot be encoded as UTF-8.
    cases = [
        ({"content": "nul\x00byte"}, "content"),
        ({"tags": ["ok", "a\x00"]}, "tags.1"),
        ({"paths": ["a\x00"]}, "paths.0"),
        ({"category": "a\x00"}, "category"),
        ({"metadata": {"k": ["a\x00"]}}, "metadata"),
        ({"metadata": {"a\x00": 1}}, "metadata"),
        ({"metadata": {"k": "a\ud800"}}, "metadata"),
        ({"content": "a\ud800"}, "content"),
    ]
    for fields, field in cases:
        error = alice_api.error(
            "memories/add", {"content": "x", **fields}, status=400, code="INVALID_REQUEST"
        )
        assert error["details"]["issues"][0]["field"] == field, fields
    # A backslash followed by "u0000" is ordinary text.
    assert alice_api.add("x", metadata={"k": "\\u0000"})["metadata"] == {"k": "\\u0000"}
    assert alice_api.ok("memories/list", {})["count"] == 1


def test_it_validates_the_scope(alice_api):
    alice_api.error(
        "memories/add", {"content": "x", "scope": {"userId": ""}}, status=400, code="USER_ID_INVALID"
    )
    alice_api.error(
        "memories/add", {"content": "x", "scope": {"userId": "u" * 121}}, status=400, code="USER_ID_INVALID"
    )
    alice_api.error(
        "memories/add",
        {"content": "x", "scope": {"tenantId": "t" * 121}},
        status=400,
        code="TENANT_ID_INVALID",
    )
    error = alice_api.error(
        "memories/add",
        {"content": "x", "scope": {"projectId": "p" * 241}},
        status=400,
        code="INVALID_REQUEST",
    )
    assert error["details"]["issues"][0]["field"] == "scope.projectId"


def test_it_rejects_a_body_that_is_not_an_object(alice_api):
    for body in ("[]", '"content"', "{not json"):
        r = alice_api.post("memories/add", body)
        assert r.status_code == 400, body
        assert r.json()["error"]["code"] == "INVALID_REQUEST"


def test_it_rejects_get(alice_api):
    r = alice_api.get("memories/add")
    assert r.status_code == 405
    assert r.json()["ok"] is False


def test_it_keeps_the_newest_working_memories(personas, settings):
    settings.WORKING_MEMORY_MAX_ITEMS_PER_USER = 3
    api = personas.alice_api
    added = [api.add(f"working {i}", layer="working")["id"] for i in range(5)]
    listed = api.ok("memories/list", {"layer": "working"})["memories"]
    assert ids(listed) == added[:1:-1]
    workspace_id = personal_workspace_id(personas.alice)
    assert stored_count(workspace_id, layer="working") == 5
    assert stored_count(workspace_id, layer="working", deleted_at__isnull=False) == 2


def test_it_caps_working_memories_per_user(personas, settings):
    settings.WORKING_MEMORY_MAX_ITEMS_PER_USER = 2
    api = personas.alice_api
    shared = [api.add(f"shared {i}", layer="working")["id"] for i in range(2)]
    u1 = [api.add(f"u1 {i}", layer="working", scope={"userId": "u1"})["id"] for i in range(3)]
    long_term = api.add("long-term stays")["id"]
    assert set(ids(api.ok("memories/list", {})["memories"])) == {*shared, long_term}
    listed_u1 = ids(api.ok("memories/list", {"layer": "working", "scope": {"userId": "u1"}})["memories"])
    assert listed_u1 == [u1[2], u1[1], *shared[::-1]]


def test_it_forgets_expired_working_memories_on_the_next_working_write(personas):
    api = personas.alice_api
    workspace_id = personal_workspace_id(personas.alice)
    old = api.add("yesterday's scratch", layer="working")
    with workspace_context(workspace_id):
        Memory.objects.filter(pk=old["id"]).update(expires_at=timezone.now() - timedelta(minutes=1))
    assert api.ok("memories/list", {})["memories"] == []
    assert stored(workspace_id, old["id"]).deleted_at is None
    new = api.add("today's scratch", layer="working")
    assert ids(api.ok("memories/list", {})["memories"]) == [new["id"]]
    assert stored(workspace_id, old["id"]).deleted_at is not None


def test_it_refuses_an_embedding_model_the_operator_did_not_allow(alice_api, settings):
    # A caller never chooses which provider the server calls with the operator's credentials.
    for model in ("ollama/x", "bedrock/amazon.titan-embed-text-v1", "openai/text-embedding-3-small"):
        error = alice_api.error(
            "memories/add",
            {"content": "x", "embeddingModel": model},
            status=400,
            code="EMBEDDING_MODEL_NOT_ALLOWED",
        )
        assert "local/all-MiniLM-L6-v2" in error["message"] and settings.EMBEDDING_MODEL in error["message"]
    assert alice_api.ok("memories/list", {})["memories"] == []
    settings.EMBEDDING_MODELS_ALLOWED = (*settings.EMBEDDING_MODELS_ALLOWED, "openai/text-embedding-3-small")
    alice_api.ok(
        "memories/add", {"content": "x", "embeddingModel": "openai/text-embedding-3-small"}, status=201
    )

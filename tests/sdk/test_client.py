"""cairn_sdk's sync and async clients against a live server: every endpoint, scopes, cursors, errors."""

from __future__ import annotations

import asyncio
from datetime import datetime

import httpx
import pytest
from cairn_sdk import (
    AsyncCairn,
    AuthenticationError,
    BadRequestError,
    Cairn,
    ConfigurationError,
    ConflictError,
    NotFoundError,
    models,
)

from memories.models import Memory
from tenancy.rls import workspace_context
from tests.sdk.conftest import LIVE, Account

pytestmark = LIVE


def stored_contents(account: Account, **filters) -> list[str]:
    workspace_id = account.workspace().id
    with workspace_context(workspace_id):
        return list(
            Memory.objects.filter(workspace_id=workspace_id, **filters).values_list("content", flat=True)
        )


def test_it_takes_key_and_base_url_from_the_environment(monkeypatch, base_url, alice):
    monkeypatch.setenv("CAIRN_API_KEY", alice.key)
    monkeypatch.setenv("CAIRN_BASE_URL", base_url + "/")
    with Cairn() as cairn:
        assert cairn.base_url == base_url + "/api/sdk/v1"
        added = cairn.memories.add("We deploy with blue-green releases on Fridays", tags=["deploy"])
        assert cairn.health().status == "ok"
        context = cairn.context.get("how do we deploy")
    assert isinstance(added, models.AddResult)
    assert "blue-green" in context.context
    assert stored_contents(alice) == ["We deploy with blue-green releases on Fridays"]


@pytest.mark.django_db(databases=[])
def test_it_refuses_to_start_without_a_key_or_with_a_bad_url(monkeypatch):
    monkeypatch.delenv("CAIRN_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="CAIRN_API_KEY"):
        Cairn()
    with pytest.raises(ConfigurationError, match="http"):
        Cairn("mem_" + "0" * 64, base_url="ftp://example.com")


def test_it_round_trips_every_memory_operation(cairn, alice):
    added = cairn.memories.add(
        "Use pnpm, not npm, in the web repo",
        type="rule",
        tags=["tooling"],
        paths=["web/package.json"],
        category="build",
        metadata={"source": "review"},
    )
    memory = added.memory
    assert (memory.type, memory.layer, memory.tags, memory.metadata) == (
        "rule",
        "rule",
        ["tooling"],
        {"source": "review"},
    )
    assert isinstance(memory.created_at, datetime) and memory.pipeline is not None
    assert added.embedding_model_source == "workspace_default"
    note = cairn.memories.add("The staging database is rebuilt every night")

    found = cairn.memories.search("staging database", strategy="lexical", limit=5)
    assert [m.id for m in found.memories] == [note.id]
    assert found.trace.applied_strategy == "lexical" and found.count == 1

    edited = cairn.memories.edit(
        added.id, content="Use pnpm in every repo", metadata=None, tags=["tooling", "js"]
    )
    assert edited.updated and edited.memory.content == "Use pnpm in every repo"
    assert edited.memory.metadata is None and edited.memory.tags == ["tooling", "js"]
    untouched = cairn.memories.edit(note.id, category="ops")  # metadata not given: left alone, not cleared
    assert untouched.memory.category == "ops"

    forgotten = cairn.memories.forget(note.id)
    assert forgotten.deleted and forgotten.id == note.id
    assert [m.id for m in cairn.memories.list().memories] == [added.id]

    preview = cairn.memories.bulk_forget(tags=["tooling"], dry_run=True)
    assert preview.count == 1 and [p.id for p in preview.memories] == [added.id]
    bulk = cairn.memories.bulk_forget(types=["rule"])
    assert bulk.count == 1 and bulk.ids == [added.id] and bulk.has_more is False
    assert cairn.memories.list().memories == []

    vacuumed = cairn.memories.vacuum()
    assert vacuumed.purged == 2
    assert stored_contents(alice) == []


def test_it_iterates_over_every_cursor_page(base_url, alice):
    list_calls = []
    hooks = {
        "request": [
            lambda request: list_calls.append(request) if request.url.path.endswith("/list") else None
        ]
    }
    with (
        httpx.Client(event_hooks=hooks) as http,
        Cairn(alice.key, base_url=base_url, http_client=http) as cairn,
    ):
        added = [cairn.memories.add(f"note number {i}", layer="long_term").id for i in range(7)]
        cairn.memories.add("a working note", layer="working")
        everything = list(cairn.memories.iter(page_size=3, layer="long_term"))
    assert [m.id for m in everything] == list(reversed(added))  # newest first, each once
    assert len(list_calls) == 3  # 3 + 3 + 1


def test_it_applies_the_default_scope_and_lets_a_call_replace_it(base_url, alice):
    with Cairn(alice.key, base_url=base_url, user_id="user-1") as cairn:
        mine = cairn.memories.add("user one prefers dark mode")
        other = cairn.with_scope(user_id="user-2")
        other.memories.add("user two prefers light mode")
        assert [m.content for m in cairn.memories.list().memories] == ["user one prefers dark mode"]
        assert [m.content for m in other.memories.list().memories] == ["user two prefers light mode"]
        assert [m.id for m in cairn.memories.list(scope={"userId": "user-1"}).memories] == [mine.id]
        assert cairn.memories.list(scope=models.Scope()).memories == []  # shared memories only: none
        tenant = cairn.with_scope(tenant_id="acme-customer")
        tenant.memories.add("tenant data")
        assert [m.content for m in tenant.memories.list().memories] == ["tenant data"]
        rollout = tenant.graph.rollout()
        assert rollout.scope.tenant_id == "acme-customer"
    assert sorted(stored_contents(alice)) == ["user one prefers dark mode", "user two prefers light mode"]


def test_it_raises_typed_errors_with_code_message_and_request_id(base_url, cairn, alice, bob):
    seen = []
    hooks = {"response": [lambda response: seen.append(response.headers.get("X-Request-Id"))]}
    with httpx.Client(event_hooks=hooks) as http:
        stranger = Cairn("mem_" + "a" * 64, base_url=base_url, http_client=http)
        with pytest.raises(AuthenticationError) as auth:
            stranger.memories.list()
    assert (auth.value.status, auth.value.code) == (401, "INVALID_API_KEY")
    assert auth.value.request_id == seen[-1] and auth.value.message == "This API key is not valid."

    with pytest.raises(NotFoundError) as missing:
        cairn.memories.forget("00000000-0000-0000-0000-000000000000")
    assert missing.value.code == "MEMORY_NOT_FOUND" and missing.value.request_id

    with pytest.raises(BadRequestError) as invalid:
        cairn.memories.add("x" * 8001)
    assert invalid.value.code == "INVALID_REQUEST"
    assert invalid.value.details["issues"][0]["field"] == "content"

    with pytest.raises(BadRequestError) as empty:
        cairn.memories.search("   ")
    assert empty.value.code == "QUERY_REQUIRED"

    # Another user's key cannot reach alice's memory: it does not exist for him.
    secret = cairn.memories.add("alice's private note")
    with Cairn(bob.key, base_url=base_url) as bobs:
        with pytest.raises(NotFoundError) as foreign:
            bobs.memories.forget(secret.id)
        assert foreign.value.code == "MEMORY_NOT_FOUND"
        assert bobs.memories.search("private note").memories == []
    assert stored_contents(alice) == ["alice's private note"]


def test_it_refuses_unknown_fields_before_sending(cairn):
    with pytest.raises(ValueError, match="extra"):
        models.AddRequest(content="x", colour="blue")


def test_it_reads_context_trace_status_and_rollout(cairn):
    cairn.memories.add("Always run the linter before pushing", type="rule")
    cairn.memories.add("The linter is ruff, configured in pyproject.toml")

    context = cairn.context.get("which linter do we use", limit=3, strategy="lexical")
    assert [r.content for r in context.rules] == ["Always run the linter before pushing"]
    assert "ruff" in context.context and context.trace.semantic_strategy_applied == "lexical"

    trace = cairn.graph.trace("linter", strategy="lexical")
    assert {item.source for item in trace.recall} == {"baseline"}
    assert [item.rank for item in trace.recall] == list(range(1, len(trace.recall) + 1))

    status = cairn.graph.status(top_nodes_limit=3)
    assert status.health in {"ok", "degraded"} and status.counts.nodes > 0
    assert len(status.top_connected_nodes) <= 3 and status.pipeline.queued >= 2

    rollout = cairn.graph.rollout(window_hours=6)
    assert rollout.quality_gate.window_hours == 6 and rollout.rollout.mode == "off"
    shadow = cairn.graph.set_rollout("shadow")
    assert shadow.rollout.mode == "shadow" and shadow.rollout.updated_by
    autopilot = cairn.graph.update_rollout(autopilot_enabled=True)
    assert autopilot.rollout.autopilot_enabled is True and autopilot.rollout.mode == "shadow"
    with pytest.raises(BadRequestError):
        cairn.graph.update_rollout()


def test_it_reads_and_sets_the_extraction_budget(cairn, settings):
    settings.GRAPH_LLM_DAILY_TOKEN_BUDGET, settings.GRAPH_LLM_DAILY_TOKEN_BUDGET_MAX = 2000, 10_000
    extraction = cairn.graph.extraction()
    assert extraction.enabled is bool(settings.GRAPH_LLM_MODEL) and extraction.entities == 0
    assert extraction.daily_token_budget == 2000  # the server's default
    assert cairn.graph.update_extraction(daily_token_budget=5000).daily_token_budget == 5000
    assert cairn.graph.status().extraction.daily_token_budget == 5000
    reset = cairn.graph.update_extraction(daily_token_budget=None)
    assert reset.daily_token_budget == 2000  # back to the server's default
    with pytest.raises(BadRequestError) as invalid:
        cairn.graph.update_extraction(daily_token_budget=0)
    assert invalid.value.details["issues"][0]["field"] == "dailyTokenBudget"
    with pytest.raises(BadRequestError) as above:
        cairn.graph.update_extraction(daily_token_budget=20_000)
    assert above.value.code == "TOKEN_BUDGET_ABOVE_CEILING" and above.value.details["ceiling"] == 10_000
    settings.GRAPH_LLM_DAILY_TOKEN_BUDGET = None
    assert cairn.graph.extraction().daily_token_budget == 10_000  # no default: the ceiling still applies

    eviction = models.Eviction.model_validate(
        {"expiredFacts": 1, "staleEntities": 0, "overCapEntities": 0, "ranAt": "2026-01-01T00:00:00Z"}
    )
    assert eviction.decayed_facts == 0  # an older server's eviction record, without decayedFacts


def test_it_refuses_an_embedding_model_the_server_does_not_allow(cairn, settings):
    with pytest.raises(BadRequestError) as refused:
        cairn.memories.add("x", embedding_model="ollama/x")
    assert refused.value.code == "EMBEDDING_MODEL_NOT_ALLOWED"
    assert settings.EMBEDDING_MODEL in refused.value.message
    allowed = cairn.memories.add("y", embedding_model=settings.EMBEDDING_MODEL)
    assert allowed.embedding_model == settings.EMBEDDING_MODEL
    with pytest.raises(BadRequestError) as edit:
        cairn.memories.edit(allowed.id, embedding_model="ollama/x")
    assert edit.value.code == "EMBEDDING_MODEL_NOT_ALLOWED"


def test_it_raises_a_conflict_error_for_409(cairn, settings):
    settings.MAX_TENANT_WORKSPACES_PER_OWNER = 1
    cairn.memories.add("first tenant", scope={"tenantId": "one"})
    with pytest.raises(ConflictError) as conflict:
        cairn.memories.add("second tenant", scope={"tenantId": "two"})
    assert (
        conflict.value.code == "TENANT_LIMIT_REACHED"
        and "MAX_TENANT_WORKSPACES_PER_OWNER" in conflict.value.message
    )


def test_it_calls_the_entity_graph_endpoints_where_the_server_has_them(cairn, client):
    paths = client.get("/api/sdk/v1/openapi.json").json()["paths"]
    calls = {
        "graph/facts": lambda: cairn.graph.facts("who works on the api"),
        "graph/traverse": lambda: cairn.graph.traverse("Alex", edge_types=["works_on"], max_hops=2),
        "graph/entities": lambda: cairn.graph.entities("alex"),
    }
    for path, call in calls.items():
        if f"/api/sdk/v1/{path}" in paths:
            try:
                call()
            except NotFoundError as exc:  # an empty graph has no entity "Alex"
                assert exc.code != "NOT_FOUND", f"{path} is listed but not routed"
        else:
            with pytest.raises(NotFoundError) as absent:
                call()
            assert absent.value.code == "NOT_FOUND"


def test_it_works_the_same_asynchronously(base_url, alice, bob):
    async def scenario() -> None:
        async with AsyncCairn(alice.key, base_url=base_url, project_id="github.com/acme/api") as cairn:
            ids = [(await cairn.memories.add(f"async note {i}")).id for i in range(5)]
            listed = [memory.id async for memory in cairn.memories.iter(page_size=2)]
            assert listed == list(reversed(ids))
            found = await cairn.memories.search("async note", limit=2)
            assert found.count == 2 and all(m.project_id == "github.com/acme/api" for m in found.memories)
            context, status = await asyncio.gather(cairn.context.get("async note"), cairn.graph.status())
            assert "async note" in context.context and status.counts.memory_links > 0
            with pytest.raises(NotFoundError):
                await cairn.memories.forget("00000000-0000-0000-0000-000000000000")
        async with AsyncCairn(bob.key, base_url=base_url) as stranger:
            with pytest.raises(NotFoundError):
                await stranger.memories.edit(ids[0], content="taken over")

    asyncio.run(scenario())
    assert len(stored_contents(alice, content__startswith="async note")) == 5

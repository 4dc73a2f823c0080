"""`manage.py mcp` driven by the official MCP Python client: over stdio (the server a subprocess on the test
database, as an agent would start it) and over streamable HTTP."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from typing import Any

import httpx2
import pytest
from django.contrib.auth import get_user_model
from django.db import connections
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from memories.models import Memory
from rollout.models import RetrievalMetric
from tenancy import services
from tenancy.rls import workspace_context
from tests.helpers.serving import ROOT, mcp_http_served

TOOLS = {
    "get_context",
    "add_memory",
    "search_memories",
    "forget_memory",
    "resolve_memories",
    "graph_facts",
    "graph_traverse",
    "graph_entities",
    "graph_communities",
    "graph_stats",
    "start_session",
    "record_turn",
    "end_session",
    "session_transcript",
    "save_skill_file",
    "list_skill_files",
    "promote_session",
}

# The server is another process: what the test writes must be committed, and what it writes must be seen here.
pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def server_env(**extra: str) -> dict[str, str]:
    return {"CAIRN_DATABASE_NAME": connections["default"].settings_dict["NAME"], **extra}


def new_key(username: str) -> tuple[str, int]:
    user = get_user_model().objects.create_user(username, email=f"{username}@example.com", password="pw")
    return services.api_key_create(user=user).raw_key, services.personal_workspace_ensure(user=user).id


def stdio(key: str, *args: str) -> Client:
    return Client(
        StdioServerParameters(
            command=sys.executable,
            args=["manage.py", "mcp", *args],
            env=server_env(CAIRN_API_KEY=key),
            cwd=str(ROOT),
        ),
        read_timeout_seconds=60,
    )


async def ok(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content


async def failure(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    """The error text: the API's code, its message (never the SDK's "Error executing tool <name>" prefix)."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return error_text(result, tool)


def error_text(result: Any, tool: str) -> str:
    text = result.content[0].text
    assert not text.startswith("Error executing tool"), text
    assert text.split(":", 1)[0].isupper(), text  # begins with the code
    return text


def test_it_serves_the_memory_tools_over_stdio():
    alice_key, alice_ws = new_key("mcp-alice")
    bob_key, _ = new_key("mcp-bob")

    async def scenario() -> dict[str, Any]:
        async with stdio(alice_key) as alice, stdio(bob_key, "--user-id", "bob-agent") as bob:
            assert {tool.name for tool in (await alice.list_tools()).tools} == TOOLS

            rule = await ok(alice, "add_memory", {"content": "Never deploy on Fridays", "type": "rule"})
            note = await ok(
                alice,
                "add_memory",
                {
                    "content": "Deploys run through the blue-green pipeline",
                    "tags": ["deploy"],
                    "metadata": {"source": "mcp"},
                },
            )
            private = await ok(
                alice, "add_memory", {"content": "User u1 deploys from a fork", "scope": {"userId": "u1"}}
            )
            assert note["memory"]["tags"] == ["deploy"] and rule["memory"]["layer"] == "rule"

            found = await ok(alice, "search_memories", {"query": "blue-green pipeline"})
            assert [m["id"] for m in found["memories"]] == [note["id"]]
            assert (await ok(alice, "search_memories", {"query": "fork"}))["count"] == 0  # u1's, not shared
            mine = await ok(alice, "search_memories", {"query": "fork", "scope": {"userId": "u1"}})
            assert [m["id"] for m in mine["memories"]] == [private["id"]]

            context = await ok(alice, "get_context", {"query": "how do we deploy", "limit": 3})
            assert [r["content"] for r in context["rules"]] == ["Never deploy on Fridays"]
            assert "blue-green" in context["context"] and "Never deploy on Fridays" in context["context"]

            # The same limits, validation and codes as the HTTP API.
            assert (await failure(alice, "search_memories", {"query": "x", "limit": 99})).startswith(
                "INVALID_REQUEST"
            )
            assert (await failure(alice, "add_memory", {"content": "   "})).startswith(
                "MEMORY_CONTENT_REQUIRED"
            )
            assert (await failure(alice, "get_context", {"graph_depth": 5})).startswith("INVALID_REQUEST")
            missing = await failure(alice, "forget_memory", {"id": "00000000-0000-0000-0000-000000000000"})
            assert missing.startswith("MEMORY_NOT_FOUND")

            # Bob's key reaches nothing of alice's.
            assert (await failure(bob, "forget_memory", {"id": note["id"]})).startswith("MEMORY_NOT_FOUND")
            assert (await ok(bob, "search_memories", {"query": "deploy"}))["count"] == 0
            bobs = await ok(bob, "add_memory", {"content": "bob's agent note"})
            assert bobs["memory"]["content"] == "bob's agent note"

            # Which of two memories is current: declared write, the caller's memories only.
            resolved = await ok(
                alice,
                "resolve_memories",
                {"action": "supersedes", "memory_id": note["id"], "other_memory_id": rule["id"]},
            )
            assert (
                resolved["decision"]["origin"] == "manual"
                and resolved["decision"]["newerMemoryId"] == note["id"]
            )
            assert (
                await failure(
                    bob,
                    "resolve_memories",
                    {"action": "revert", "memory_id": note["id"], "other_memory_id": rule["id"]},
                )
            ).startswith("MEMORY_NOT_FOUND")
            undone = await ok(
                alice,
                "resolve_memories",
                {"action": "revert", "memory_id": note["id"], "other_memory_id": rule["id"]},
            )
            assert undone["decision"] is None and [d["id"] for d in undone["reverted"]] == [
                resolved["decision"]["id"]
            ]

            forgotten = await ok(alice, "forget_memory", {"id": note["id"]})
            assert forgotten == {"id": note["id"], "deleted": True, "message": "Memory forgotten."}
            assert (await ok(alice, "search_memories", {"query": "blue-green"}))["count"] == 0

            graph = await alice.call_tool("graph_facts", {"query": "deploy"})
            traverse = await alice.call_tool("graph_traverse", {"start_entity": "pipeline"})
            return {"graph": graph, "traverse": traverse}

    results = asyncio.run(scenario())
    with workspace_context(alice_ws):
        stored = dict(Memory.objects.filter(workspace_id=alice_ws).values_list("content", "deleted_at"))
        endpoints = set(
            RetrievalMetric.objects.filter(workspace_id=alice_ws).values_list("endpoint", flat=True)
        )
    assert set(stored) == {
        "Never deploy on Fridays",
        "Deploys run through the blue-green pipeline",
        "User u1 deploys from a fork",
    }
    assert stored["Deploys run through the blue-green pipeline"] is not None  # forgotten = soft-deleted
    assert endpoints == {"mcp/get_context"}
    # The entity graph is empty here (no model configured): recall finds nothing, traversal names the problem.
    assert not results["graph"].is_error, results["graph"].content
    assert results["graph"].structured_content["facts"] == []
    assert error_text(results["traverse"], "graph_traverse").startswith("ENTITY_NOT_FOUND")


def test_it_refuses_to_start_with_a_key_no_tool_call_would_accept():
    env = {**os.environ, **server_env(CAIRN_API_KEY="mem_" + "b" * 64)}
    done = subprocess.run(
        [sys.executable, "manage.py", "mcp"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode != 0 and "INVALID_API_KEY: This API key is not valid." in done.stderr, done.stderr


def test_it_serves_streamable_http_with_the_key_of_each_request():
    alice_key, alice_ws = new_key("mcp-http-alice")
    with mcp_http_served(env=server_env()) as port:

        async def scenario() -> None:
            url = f"http://127.0.0.1:{port}/mcp"
            headers = {"Authorization": f"Bearer {alice_key}"}
            async with (
                httpx2.AsyncClient(headers=headers) as http,
                Client(streamable_http_client(url, http_client=http)) as alice,
            ):
                added = await ok(alice, "add_memory", {"content": "served over streamable HTTP"})
                found = await ok(alice, "search_memories", {"query": "streamable"})
                assert [m["id"] for m in found["memories"]] == [added["id"]]
            async with Client(url) as anonymous:  # no key at start, none in the request
                assert (await failure(anonymous, "search_memories", {"query": "x"})).startswith(
                    "MISSING_API_KEY"
                )

        asyncio.run(scenario())
    with workspace_context(alice_ws):
        assert list(Memory.objects.values_list("content", flat=True)) == ["served over streamable HTTP"]


def test_it_derives_every_tools_arguments_from_its_routes_request_schema():
    """One source: each tool's arguments are its route's request fields (snake_case), with the field's own
    type, limits, default and description; graph/communities's admin-only refresh is the one left out."""
    import asyncio as _asyncio

    from mcp_server.server import TOOL_SCHEMAS, McpSettings, build_server

    tools = {tool.name: tool for tool in _asyncio.run(build_server(McpSettings(api_key=None)).list_tools())}
    assert set(tools) == set(TOOL_SCHEMAS)
    for name, (schema, excluded) in TOOL_SCHEMAS.items():
        route = schema.model_json_schema()
        shown = tools[name].input_schema["properties"]
        expected = {
            "".join(f"_{c.lower()}" if c.isupper() else c for c in field)
            for field in route["properties"]
            if field not in excluded
        }
        assert set(shown) == expected, name
        for field, spec in route["properties"].items():
            if field in excluded or field == "scope":
                continue
            arg = shown["".join(f"_{c.lower()}" if c.isupper() else c for c in field)]
            assert arg["description"] == spec["description"], (name, field)
            for limit in ("maximum", "minimum", "maxLength", "enum", "maxItems"):
                if limit in spec:
                    assert arg[limit] == spec[limit], (name, field, limit)
            if "default" in spec and not isinstance(spec["default"], list | dict):
                assert arg["default"] == spec["default"], (name, field)
    assert "strategy" in tools["graph_facts"].input_schema["properties"]
    assert tools["graph_communities"].input_schema["properties"]["limit"]["default"] == 50
    assert "refresh" not in tools["graph_communities"].input_schema["properties"]
    assert "importance_weight" in tools["get_context"].input_schema["properties"]

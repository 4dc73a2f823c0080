"""graph_facts and graph_traverse hand their validated arguments to graphsvc's fact recall and traversal.

Those functions come with the entity-graph work; until they exist the tools answer GRAPH_FEATURE_UNAVAILABLE
(tests/mcp/test_mcp_server.py checks that over stdio). These tests pin the call the tools make, with stand-ins
for the two graphsvc functions installed only here, driven in-process by the official MCP client.
"""

from __future__ import annotations

import asyncio
import sys
import types
from datetime import UTC, datetime
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.db import connections
from mcp import Client

from config.errors import ApiError
from mcp_server.server import McpSettings, build_server
from memories.selectors import MemoryScope
from retrieval.embeddings import embed_query
from tenancy import services
from tenancy.rls import current_workspace_id

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


@pytest.fixture
def graph_calls(monkeypatch) -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = []

    def facts_recall(**kwargs: Any) -> dict[str, Any]:
        calls.append(("facts", {**kwargs, "_rls_workspace": current_workspace_id()}))
        return {
            "facts": [
                {
                    "source": "Alex",
                    "relation": "works_on",
                    "target": "ProjectX",
                    "validFrom": datetime(2026, 1, 1, tzinfo=UTC),
                }
            ]
        }

    def graph_traverse(**kwargs: Any) -> dict[str, Any]:
        calls.append(("traverse", kwargs))
        raise ApiError(404, "ENTITY_NOT_FOUND", f"No entity named {kwargs['start_entity']!r}.")

    for name, function in (("graphsvc.facts", facts_recall), ("graphsvc.traverse", graph_traverse)):
        module = types.ModuleType(name)
        setattr(module, function.__name__, function)
        monkeypatch.setitem(sys.modules, name, module)
    return calls


def test_it_passes_validated_arguments_to_graphsvc(graph_calls):
    user = get_user_model().objects.create_user("graph-mcp", email="g@example.com", password="pw")
    key = services.api_key_create(user=user).raw_key
    workspace_id = services.personal_workspace_ensure(user=user).id
    server = build_server(McpSettings(api_key=key, default_scope={"userId": "agent-7"}))

    async def scenario() -> tuple[Any, ...]:
        async with Client(server) as client:
            facts = await client.call_tool(
                "graph_facts", {"query": "who works on ProjectX", "at": "2026-03-01T00:00:00Z"}
            )
            missing = await client.call_tool(
                "graph_traverse", {"start_entity": "Nobody", "edge_types": ["works_on"]}
            )
            too_deep = await client.call_tool("graph_traverse", {"start_entity": "Alex", "max_hops": 4})
            neither = await client.call_tool("graph_facts", {"limit": 5})
            misspelt = await client.call_tool("graph_facts", {"query": "x", "scope": {"user": "someone"}})
            assert misspelt.is_error and "user" in misspelt.content[0].text
        # The tools' database thread outlives the test: leave no connection open on the test database.
        await sync_to_async(connections.close_all, thread_sensitive=True)()
        return facts, missing, too_deep, neither

    facts, missing, too_deep, neither = asyncio.run(scenario())
    assert not facts.is_error, facts.content
    assert facts.structured_content == {
        "facts": [
            {
                "source": "Alex",
                "relation": "works_on",
                "target": "ProjectX",
                "validFrom": "2026-01-01T00:00:00Z",
            }
        ]
    }
    assert missing.is_error and "ENTITY_NOT_FOUND: No entity named 'Nobody'." in missing.content[0].text
    assert (
        too_deep.is_error
        and "INVALID_REQUEST" in too_deep.content[0].text
        and "maxHops" in too_deep.content[0].text
    )
    assert neither.is_error and "send query or entity" in neither.content[0].text

    (kind, fact_call), (kind2, traverse_call) = graph_calls  # the invalid calls never reached graphsvc
    assert kind == "facts" and kind2 == "traverse"
    assert fact_call == {
        "workspace_id": workspace_id,
        "scope": MemoryScope(user_id="agent-7", project_id=None),
        "query": "who works on ProjectX",
        "entity": None,
        "max_hops": 2,
        "limit": 10,
        "at": datetime(2026, 3, 1, tzinfo=UTC),
        "edge_classes": None,
        "embed": embed_query,
        "_rls_workspace": workspace_id,
    }
    assert traverse_call == {
        "workspace_id": workspace_id,
        "scope": MemoryScope(user_id="agent-7", project_id=None),
        "start_entity": "Nobody",
        "edge_types": ["works_on"],
        "max_hops": 2,
        "limit": 20,
        "at": None,
    }

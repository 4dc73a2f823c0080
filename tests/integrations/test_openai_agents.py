"""The OpenAI Agents SDK recipe (integrations/openai-agents/cairn_mcp.py): the `openai-agents` package's own
MCP clients, over stdio and HTTP, list Cairn's tools, call add_memory and get_context; no model."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from types import ModuleType
from typing import Any

import pytest
from django.db import connections

from memories.models import Memory
from tenancy.rls import workspace_context
from tests.helpers.serving import mcp_http_served
from tests.integrations.conftest import ROOT, Account, account
from tests.mcp_server.test_mcp_server import TOOLS

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def recipe() -> ModuleType:
    path = ROOT / "integrations" / "openai-agents" / "cairn_mcp.py"
    spec = importlib.util.spec_from_file_location("cairn_mcp", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["cairn_mcp"] = module
    spec.loader.exec_module(module)
    return module


def test_it_remembers_and_recalls_over_stdio():
    alice: Account = account("agents-stdio")
    cairn_mcp = recipe()
    server = cairn_mcp.cairn_stdio(
        cairn_dir=ROOT,
        api_key=alice.key,
        user_id="agent-user",
        extra_env={"CAIRN_DATABASE_NAME": connections["default"].settings_dict["NAME"]},
        timeout=60,
    )

    async def scenario() -> dict[str, Any]:
        async with server:
            return await cairn_mcp.remember_and_recall(
                server,
                fact="The agent's user prefers answers in French",
                question="Which language to answer in?",
            )

    answer = asyncio.run(scenario())
    assert set(answer["tools"]) == TOOLS
    assert "prefers answers in French" in answer["context"]
    workspace = alice.workspace()
    with workspace_context(workspace.id):
        stored = Memory.objects.get(workspace_id=workspace.id, id=answer["memory_id"])
    assert (stored.content, stored.user_id) == ("The agent's user prefers answers in French", "agent-user")


def test_it_remembers_and_recalls_over_streamable_http_and_reports_a_tool_error():
    alice: Account = account("agents-http")
    cairn_mcp = recipe()
    env = {"CAIRN_DATABASE_NAME": connections["default"].settings_dict["NAME"]}

    async def scenario(port: int) -> dict[str, Any]:
        server = cairn_mcp.cairn_http(url=f"http://127.0.0.1:{port}/mcp", api_key=alice.key, timeout=60)
        async with server:
            answer = await cairn_mcp.remember_and_recall(
                server, fact="Releases are cut from the main branch", question="Where are releases cut from?"
            )
            with pytest.raises(RuntimeError, match="MEMORY_CONTENT_REQUIRED"):
                await cairn_mcp.remember_and_recall(server, fact="   ", question="anything")
            return answer

    with mcp_http_served(env=env) as port:
        answer = asyncio.run(scenario(port))
    assert set(answer["tools"]) == TOOLS
    assert "cut from the main branch" in answer["context"]
    assert answer["memory_id"]

"""Every MCP client config in docs/integrations/mcp-clients.md starts the server it names: the snippet is read
from the page, its placeholders become this checkout's path and a real key, and the MCP client lists the tools
(and, for one, stores and recalls a memory)."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
from pathlib import Path
from typing import Any

import httpx2
import pytest
from django.db import connections
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.helpers.serving import mcp_http_served
from tests.integrations.conftest import ROOT, Account, account
from tests.mcp_server.test_mcp_server import TOOLS

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
PAGE = ROOT / "docs" / "integrations" / "mcp-clients.md"
SNIPPET = re.compile(r"<!-- snippet: ([\w-]+) -->\n```(\w+)\n(.*?)\n```", re.S)
CHECKOUT = "/path/to/cairn"
KEY = "mem_…"


def snippets() -> dict[str, tuple[str, str]]:
    return {name: (language, body) for name, language, body in SNIPPET.findall(PAGE.read_text())}


def filled(text: str, key: str) -> str:
    return text.replace(CHECKOUT, str(ROOT)).replace(KEY, key)


def test_it_documents_a_config_for_each_client():
    assert set(snippets()) == {"claude-desktop", "cursor", "cursor-http", "claude-code", "claude-code-json"}


def stdio_params(name: str, key: str) -> StdioServerParameters:
    """The server a snippet names: the mcpServers entry of a JSON config, or `claude mcp add`'s arguments."""
    language, body = snippets()[name]
    text = filled(body, key)
    if language == "json":
        server: dict[str, Any] = json.loads(text)["mcpServers"]["cairn"]
        assert server.get("type", "stdio") == "stdio"
        command, args, env = server["command"], server["args"], server.get("env", {})
    else:
        words = shlex.split(text)
        assert words[:4] == ["claude", "mcp", "add", "cairn"], words
        split = words.index("--")
        options, (command, *args) = words[4:split], words[split + 1 :]
        env = dict(
            value.split("=", 1) for flag, value in zip(options, options[1:], strict=False) if flag == "--env"
        )
    assert Path(command) == ROOT / ".venv" / "bin" / "python" and Path(args[0]) == ROOT / "manage.py"
    assert env["CAIRN_API_KEY"] == key
    # The only addition: the test database, where the key lives.
    database = {"CAIRN_DATABASE_NAME": connections["default"].settings_dict["NAME"]}
    return StdioServerParameters(command=command, args=args, env={**env, **database}, cwd="/")


@pytest.mark.parametrize("name", ["claude-desktop", "cursor", "claude-code", "claude-code-json"])
def test_it_starts_the_stdio_server_a_snippet_names(name):
    alice: Account = account(f"cfg-{name}")

    async def tools() -> set[str]:
        async with Client(stdio_params(name, alice.key), read_timeout_seconds=60) as client:
            return {tool.name for tool in (await client.list_tools()).tools}

    assert asyncio.run(tools()) == TOOLS


def test_it_reaches_the_http_server_of_the_cursor_snippet(tmp_path):
    alice: Account = account("cfg-cursor-http")
    server = json.loads(filled(snippets()["cursor-http"][1], alice.key))["mcpServers"]["cairn"]
    assert server["url"] == "http://127.0.0.1:8765/mcp"
    env = {"CAIRN_DATABASE_NAME": connections["default"].settings_dict["NAME"]}

    async def remember_and_recall(url: str) -> tuple[set[str], str]:
        async with (
            httpx2.AsyncClient(headers=server["headers"]) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            names = {tool.name for tool in (await client.list_tools()).tools}
            added = await client.call_tool("add_memory", {"content": "Cursor users deploy with make ship"})
            assert not added.is_error, added.content
            context = await client.call_tool("get_context", {"query": "how do Cursor users deploy?"})
            assert not context.is_error, context.content
            return names, context.structured_content["context"]

    with mcp_http_served(env=env) as port:  # no startup key: every request brings the snippet's header
        names, context = asyncio.run(remember_and_recall(server["url"].replace("8765", str(port))))
    assert names == TOOLS
    assert "make ship" in context

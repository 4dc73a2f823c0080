"""Cairn's memory tools for the OpenAI Agents SDK (`pip install openai-agents`), through Cairn's MCP server.

    from agents import Agent, Runner
    from cairn_mcp import cairn_stdio, cairn_http

    async with cairn_stdio(cairn_dir="/srv/cairn", api_key="mem_…", user_id="alice") as cairn:
        agent = Agent(name="assistant", instructions="Use get_context before answering.", mcp_servers=[cairn])
        print((await Runner.run(agent, "How do we deploy?")).final_output)

`cairn_stdio` starts `manage.py mcp` of a Cairn checkout on this machine (the server runs next to the
database); `cairn_http` connects to `manage.py mcp --http` elsewhere, e.g. http://cairn.internal:8765/mcp,
sending the key in every request. Either is an `agents.mcp` server: give it to an Agent, or call its tools
yourself (`list_tools`, `call_tool`), as `remember_and_recall` below does without any model.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from agents.mcp import MCPServerStdio, MCPServerStreamableHttp


def cairn_stdio(
    *,
    cairn_dir: str | os.PathLike[str],
    api_key: str,
    user_id: str | None = None,
    tenant_id: str | None = None,
    extra_env: dict[str, str] | None = None,
    timeout: float = 30,
) -> MCPServerStdio:
    """`manage.py mcp` of the Cairn checkout at `cairn_dir`, over stdio, acting with `api_key`."""
    root = Path(cairn_dir)
    env = {"CAIRN_API_KEY": api_key, **(extra_env or {})}
    if user_id:
        env["CAIRN_USER_ID"] = user_id
    if tenant_id:
        env["CAIRN_TENANT_ID"] = tenant_id
    return MCPServerStdio(
        params={
            "command": str(root / ".venv" / "bin" / "python"),
            "args": [str(root / "manage.py"), "mcp"],
            "env": env,
            "cwd": str(root),
        },
        name="cairn",
        # The first call loads the embedding model; the SDK's default of 5 s is too short for it.
        client_session_timeout_seconds=timeout,
    )


def cairn_http(*, url: str, api_key: str, timeout: float = 30) -> MCPServerStreamableHttp:
    """`manage.py mcp --http` at `url` (e.g. http://127.0.0.1:8765/mcp), every request with `api_key`."""
    return MCPServerStreamableHttp(
        params={"url": url, "headers": {"Authorization": f"Bearer {api_key}"}, "timeout": timeout},
        name="cairn",
        client_session_timeout_seconds=timeout,
    )


async def remember_and_recall(
    server: MCPServerStdio | MCPServerStreamableHttp, *, fact: str, question: str
) -> dict[str, Any]:
    """List the tools, store `fact` with add_memory and ask get_context about `question`: no model needed.
    The server must be connected (`async with server:`)."""
    tools = sorted(tool.name for tool in await server.list_tools())
    added = await server.call_tool("add_memory", {"content": fact})
    context = await server.call_tool("get_context", {"query": question})
    return {
        "tools": tools,
        "memory_id": _structured(added).get("id"),
        "context": _structured(context).get("context") or _text(context),
    }


def _structured(result: Any) -> dict[str, Any]:
    """The tool's JSON answer; a tool error (its text starts with the API's code) raises."""
    # mcp 2 names the fields in snake_case, mcp 1 in camelCase; the Agents SDK accepts either.
    failed = getattr(result, "is_error", None) or getattr(result, "isError", False)
    if failed:
        raise RuntimeError(_text(result))
    content = getattr(result, "structured_content", None) or getattr(result, "structuredContent", None)
    return content if isinstance(content, dict) else {}


def _text(result: Any) -> str:
    return "\n".join(getattr(part, "text", json.dumps(part, default=str)) for part in result.content)

"""The OpenAI Agents SDK recipe (integrations/openai-agents/cairn_mcp.py): the `openai-agents` package's own
MCP clients, over stdio and HTTP, list Cairn's tools, call add_memory and get_context with no model; and an
Agent whose (scripted) model calls get_context through the stdio server."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from types import ModuleType
from typing import Any

import pytest
from agents import Agent, Model, ModelResponse, RunConfig, Runner, Usage
from django.db import connections
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from memories.models import Memory
from tenancy.rls import workspace_context
from tests.helpers.serving import mcp_http_served
from tests.integrations.conftest import ROOT, Account, account
from tests.mcp_server.test_mcp_server import TOOLS

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


class ScriptedModel(Model):
    """The language model, the one part off this machine: first asks for get_context, then answers with what
    the tool returned. `inputs` keeps what the Agents SDK sent it each turn."""

    def __init__(self, question: str) -> None:
        self.question = question
        self.inputs: list[Any] = []

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        self.inputs.append(input)
        if len(self.inputs) == 1:
            call = ResponseFunctionToolCall(
                type="function_call",
                id="fc_1",
                call_id="call_1",
                name="get_context",
                arguments=json.dumps({"query": self.question}),
                status="completed",
            )
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        outputs = [
            item for item in input if isinstance(item, dict) and item.get("type") == "function_call_output"
        ]
        text = ResponseOutputText(type="output_text", text=str(outputs[-1]["output"]), annotations=[])
        message = ResponseOutputMessage(
            id="msg_1", type="message", role="assistant", status="completed", content=[text]
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


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

    model = ScriptedModel("Which language should answers be in?")

    async def scenario() -> tuple[dict[str, Any], str]:
        async with server:
            recalled = await cairn_mcp.remember_and_recall(
                server,
                fact="The agent's user prefers answers in French",
                question="Which language to answer in?",
            )
            agent = Agent(
                name="assistant", instructions="Call get_context.", mcp_servers=[server], model=model
            )
            result = await Runner.run(
                agent, "Which language should answers be in?", run_config=RunConfig(tracing_disabled=True)
            )
            return recalled, str(result.final_output)

    answer, final = asyncio.run(scenario())
    # An Agent with the server: its model's get_context call went through MCP to Cairn and back.
    assert "prefers answers in French" in final
    assert len(model.inputs) == 2
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

"""`manage.py mcp --http` bound to every address (0.0.0.0): a request must bring its own key (the startup key
acts for nobody), and DNS-rebinding protection stays on, so a Host header that is not allowed is refused."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from memories.models import Memory
from tenancy.rls import workspace_context
from tests.helpers.serving import mcp_http_served
from tests.mcp_server.test_mcp_server import failure, new_key, ok, server_env

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


@pytest.fixture
def served_on_every_address() -> Iterator[tuple[int, str, int]]:
    key, workspace_id = new_key("mcp-any-address")
    with mcp_http_served("--host", "0.0.0.0", env=server_env(CAIRN_API_KEY=key)) as port:
        yield port, key, workspace_id


def test_it_never_lends_the_startup_key_when_bound_beyond_loopback(served_on_every_address):
    port, key, workspace_id = served_on_every_address
    url = f"http://127.0.0.1:{port}/mcp"

    async def scenario() -> None:
        async with Client(url) as anonymous:
            text = await failure(anonymous, "add_memory", {"content": "from anyone on the network"})
            assert text.startswith("MISSING_API_KEY")
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as http,
            Client(streamable_http_client(url, http_client=http)) as owner,
        ):
            await ok(owner, "add_memory", {"content": "with my own key"})

    asyncio.run(scenario())
    with workspace_context(workspace_id):
        assert list(Memory.objects.values_list("content", flat=True)) == ["with my own key"]


def test_it_refuses_a_host_header_it_does_not_serve(served_on_every_address):
    port, key, _ = served_on_every_address
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    headers = {"Authorization": f"Bearer {key}", "Accept": "application/json, text/event-stream"}
    rebound = httpx2.post(
        f"http://127.0.0.1:{port}/mcp", json=body, headers={**headers, "Host": "evil.example:80"}, timeout=10
    )
    assert rebound.status_code in (400, 403, 421), rebound.text
    served = httpx2.post(f"http://127.0.0.1:{port}/mcp", json=body, headers=headers, timeout=10)
    assert served.status_code not in (400, 403, 421), served.text

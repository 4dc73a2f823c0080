"""Retries: 429 after Retry-After, 5xx and lost answers through a failing proxy,
idempotent adds, dead servers."""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest
from cairn_sdk import (
    APIConnectionError,
    APITimeoutError,
    AsyncCairn,
    Cairn,
    RateLimitError,
    RetryPolicy,
    ServerError,
)

from memories.models import IdempotencyRecord
from tenancy.rls import workspace_context
from tests.sdk.conftest import LIVE, Account
from tests.sdk.test_client import stored_contents

pytestmark = LIVE
FAST = RetryPolicy(max_retries=3, backoff_base=0.01, backoff_max=0.05)


def recording_sleep(client: Cairn | AsyncCairn) -> list[float]:
    """Wrap the client's sleep: the waits still happen, and the test sees how long each was."""
    waits: list[float] = []
    real = client._sleep
    if isinstance(client, AsyncCairn):

        async def sleep(seconds: float) -> None:
            waits.append(seconds)
            await real(seconds)
    else:

        def sleep(seconds: float) -> None:
            waits.append(seconds)
            real(seconds)

    client._sleep = sleep
    return waits


def test_it_waits_what_retry_after_says_on_429_then_succeeds(settings, base_url, alice):
    settings.RATE_LIMIT_REQUESTS, settings.RATE_LIMIT_WINDOW_SECONDS = 1, 3
    answers: list[tuple[int, str | None]] = []
    hooks = {"response": [lambda r: answers.append((r.status_code, r.headers.get("Retry-After")))]}
    with httpx.Client(event_hooks=hooks) as http:
        cairn = Cairn(alice.key, base_url=base_url, http_client=http, retry=RetryPolicy(max_retries=2))
        waits = recording_sleep(cairn)
        # The budget is one request per 3 s window: the second call of a window meets a 429 and waits it out.
        for _ in range(4):
            cairn.memories.list()
            if any(status == 429 for status, _ in answers):
                break
    limited = [(status, after) for status, after in answers if status == 429]
    assert limited, answers
    assert waits[0] == float(limited[0][1]) and 1 <= waits[0] <= 3
    assert answers[-1][0] == 200  # the call after the wait succeeded


def test_it_raises_rate_limit_error_when_the_wait_is_too_long(settings, base_url, alice):
    settings.RATE_LIMIT_REQUESTS, settings.RATE_LIMIT_WINDOW_SECONDS = 1, 600
    # Retry-After is at least 1 s, so a limit under that refuses every wait, wherever the window stands.
    cairn = Cairn(alice.key, base_url=base_url, retry=RetryPolicy(max_retries=3, max_retry_after=0.5))
    waits = recording_sleep(cairn)
    cairn.memories.list()
    with pytest.raises(RateLimitError) as limited:
        cairn.memories.list()
    assert limited.value.code == "RATE_LIMITED" and limited.value.status == 429
    assert limited.value.retry_after is not None and limited.value.retry_after >= 1
    assert limited.value.headers["retry-after"] == str(int(limited.value.retry_after))
    assert waits == []  # not worth waiting for: raised at once


def test_it_retries_5xx_answers_then_succeeds(proxy, alice):
    proxy.plan = ["503", "502_html"]
    cairn = Cairn(alice.key, base_url=proxy.url, retry=FAST)
    waits = recording_sleep(cairn)
    result = cairn.memories.search("anything")
    assert result.count == 0
    assert [seen.status for seen in proxy.seen] == [503, 502, 200]
    assert len(waits) == 2 and all(0 < wait <= 0.05 for wait in waits)


def test_it_raises_server_error_after_the_last_retry(proxy, alice):
    proxy.plan = ["503"] * 3
    cairn = Cairn(alice.key, base_url=proxy.url, retry=RetryPolicy(max_retries=2, backoff_base=0.01))
    with pytest.raises(ServerError) as failed:
        cairn.memories.list()
    assert (failed.value.status, failed.value.code) == (503, "SERVICE_UNAVAILABLE")
    assert failed.value.request_id == "proxy-503-request" and failed.value.retryable
    assert len(proxy.seen) == 3

    proxy.plan = ["502_html"] * 3
    with pytest.raises(ServerError) as bare:
        cairn.memories.list()
    assert bare.value.code == "HTTP_502" and "Bad Gateway" in bare.value.message


def test_it_does_not_store_an_add_twice_when_its_answer_is_lost(proxy, alice: Account):
    proxy.plan = ["lose_answer", "lose_answer"]
    cairn = Cairn(alice.key, base_url=proxy.url, retry=FAST)
    added = cairn.memories.add("written once, answered on the third try", tags=["retry"])
    assert [seen.action for seen in proxy.seen] == ["lose_answer", "lose_answer", "forward"]
    keys = {seen.headers["Idempotency-Key"] for seen in proxy.seen}
    assert len(keys) == 1  # every attempt carried the same key
    assert stored_contents(alice) == ["written once, answered on the third try"]
    assert added.memory.content == "written once, answered on the third try" and added.memory.tags == [
        "retry"
    ]
    workspace_id = alice.workspace().id
    with workspace_context(workspace_id):
        assert IdempotencyRecord.objects.filter(key=keys.pop()).count() == 1

    # A second add is a new write with its own key.
    cairn.memories.add("written once, answered on the third try", tags=["retry"])
    assert len(stored_contents(alice)) == 2


def test_it_retries_a_dead_server_then_raises_a_connection_error(alice):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cairn = Cairn(alice.key, base_url=f"http://127.0.0.1:{port}", retry=FAST, timeout=2)
    waits = recording_sleep(cairn)
    with pytest.raises(APIConnectionError, match=f"127.0.0.1:{port}"):
        cairn.health()
    assert len(waits) == 3


def test_it_times_out_retries_and_raises_a_timeout_error(proxy, alice):
    proxy.plan, proxy.hang_seconds = ["hang", "hang"], 4
    cairn = Cairn(
        alice.key, base_url=proxy.url, timeout=1.5, retry=RetryPolicy(max_retries=1, backoff_base=0.01)
    )
    waits = recording_sleep(cairn)
    with pytest.raises(APITimeoutError, match="within the timeout"):
        cairn.memories.list()
    assert len(waits) == 1 and proxy.plan == []  # both attempts were made and timed out
    proxy.plan = ["hang"]
    assert cairn.memories.list().memories == []  # the timed-out first attempt is retried and answered


def test_it_retries_asynchronously_too(proxy, settings, alice):
    async def scenario() -> tuple[list[float], list[float]]:
        proxy.plan = ["503", "lose_answer"]
        async with AsyncCairn(alice.key, base_url=proxy.url, retry=FAST) as cairn:
            waits = recording_sleep(cairn)
            added = await cairn.memories.add("async retry")
            assert added.memory.content == "async retry"
        settings.RATE_LIMIT_REQUESTS, settings.RATE_LIMIT_WINDOW_SECONDS = 1, 2
        async with AsyncCairn(alice.key, base_url=proxy.url, retry=RetryPolicy(max_retries=3)) as cairn:
            limited_waits = recording_sleep(cairn)
            for _ in range(4):
                await cairn.memories.list()
                if limited_waits:
                    break
        return waits, limited_waits

    waits, limited_waits = asyncio.run(scenario())
    assert len(waits) == 2
    assert stored_contents(alice) == ["async retry"]
    assert limited_waits and 1 <= limited_waits[0] <= 2
    assert any(seen.status == 429 for seen in proxy.seen)

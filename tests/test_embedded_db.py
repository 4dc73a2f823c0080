"""The embedded server: one per data directory, safe when processes start together, stopped by the
last one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

HELPER = Path(__file__).parent / "helpers" / "embedded_starter.py"


@pytest.mark.django_db(databases=[])
def test_it_starts_one_server_for_two_processes_and_stops_it(tmp_path):
    var = tmp_path / "var"
    var.mkdir()
    env = {**os.environ, "CAIRN_VAR_DIR": str(var)}
    start_at = str(time.time() + 1)
    release = tmp_path / "release"
    processes = [
        subprocess.Popen(
            [sys.executable, str(HELPER), start_at, str(release)], env=env, stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    reports = [json.loads(process.stdout.readline()) for process in processes]
    release.touch()
    for process in processes:
        process.wait(timeout=60)
        process.stdout.close()
    assert all(process.returncode == 0 for process in processes)
    assert reports[0] == reports[1], "both processes must share one server"

    # Both handles are gone, so the server was stopped: no postgres process serves that data directory.
    pgdata = str(var / "pgdata")
    deadline = time.time() + 10
    while time.time() < deadline and _servers_for(pgdata):
        time.sleep(0.2)
    assert not _servers_for(pgdata)
    assert not (var / "pgdata" / "postmaster.pid").exists()


def _servers_for(pgdata: str) -> list[int]:
    found = []
    for process in psutil.process_iter(attrs=["name", "cmdline"]):
        if process.info["name"] == "postgres" and pgdata in " ".join(process.info["cmdline"] or []):
            found.append(process.pid)
    return found

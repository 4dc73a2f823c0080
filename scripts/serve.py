"""Run web (gunicorn) and worker (qcluster) in the foreground, as the Procfile describes, until Ctrl-C.

This process holds its own handle on the embedded database (when DATABASE_URL is unset), so the server stays
up while web workers come and go, and stops cleanly when `make run` ends. The web server's worker model comes
from config/gunicorn_conf.py, as for the Procfile: WEB_CONCURRENCY processes of WEB_THREADS threads, so a slow
client holds a thread, not a process (bench/slow_clients.py).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


# prctl option: the signal a process receives when its parent dies (Linux).
PR_SET_PDEATHSIG = 1
# Loaded here, in the runner: a child between fork and exec should do as little as it can.
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


def _stopped_with_us() -> None:
    """Run in each child between fork and exec (Linux): SIGTERM to it should the runner die without stopping
    it (kill -9), rather than an orphan that keeps the port or the job queue."""
    if _LIBC is not None:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    if not os.environ.get("DATABASE_URL"):
        from config.embedded_db import ensure_embedded_postgres

        ensure_embedded_postgres()
    bind = os.environ.get("BIND", "127.0.0.1:8000")
    web_workers = os.environ.get("WEB_CONCURRENCY", "2")
    python = sys.executable
    gunicorn = str(Path(python).with_name("gunicorn"))
    commands = {
        "web": [
            gunicorn,
            "config.wsgi",
            "--config",
            "config/gunicorn_conf.py",
            "--bind",
            bind,
            "--workers",
            web_workers,
            "--access-logfile",
            "-",
        ],
        "worker": [python, "manage.py", "qcluster"],
    }
    children = {
        "web": subprocess.Popen(commands["web"], cwd=ROOT, preexec_fn=_stopped_with_us),
        # The worker cluster in a process group of its own, so a signal sent to ours (Ctrl-C in a terminal, a
        # supervisor's SIGTERM to the whole group) reaches only this runner, which then stops the cluster the
        # way django-q2 stops cleanly: SIGTERM to its main process. The same SIGTERM sent to every process of
        # the cluster at once kills its sentinel mid-shutdown and leaves the main process waiting for a kill.
        "worker": subprocess.Popen(
            commands["worker"], cwd=ROOT, process_group=0, preexec_fn=_stopped_with_us
        ),
    }
    threads = os.environ.get("WEB_THREADS", "8")
    print(
        f"Cairn is running on http://{bind} (web: {web_workers} processes x {threads} threads; worker). "
        "Ctrl-C stops both.",
        flush=True,
    )

    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    exit_code = 0
    while not stopping:
        for name, child in children.items():
            if child.poll() is not None:
                print(f"{name} exited with {child.returncode}; stopping.", flush=True)
                exit_code = child.returncode or 1
                stopping = True
        time.sleep(0.5)
    for child in children.values():
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    deadline = time.time() + 20
    for child in children.values():
        try:
            child.wait(timeout=max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            child.kill()
    return exit_code


if __name__ == "__main__":
    raise SystemExit(main())

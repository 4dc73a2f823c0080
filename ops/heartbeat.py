"""The worker heartbeat: a daemon thread in the qcluster process upserts its row; /readyz reads the newest."""

from __future__ import annotations

import logging
import os
import socket
import threading
from datetime import datetime

from django.conf import settings
from django.db import connections
from django.utils import timezone

logger = logging.getLogger("cairn.ops")
_started = threading.Event()


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def heartbeat_beat(*, started_at: datetime, worker: str | None = None) -> None:
    with connections["app"].cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO ops_worker_heartbeats (worker, cluster, started_at, seen_at) VALUES (%s, %s, %s, now())
            ON CONFLICT (worker) DO UPDATE SET seen_at = now()
            """,
            [worker or worker_name(), settings.Q_CLUSTER["name"], started_at],
        )


def _loop() -> None:
    started_at = timezone.now()
    interval = settings.OPS_HEARTBEAT_SECONDS
    stop = threading.Event()
    while not stop.wait(0 if not _started.is_set() else interval):
        _started.set()
        try:
            heartbeat_beat(started_at=started_at)
        except Exception:  # noqa: BLE001 - a database restart must not kill the beat; the next one retries
            logger.warning("worker heartbeat failed", exc_info=True)
        finally:
            # This thread's own connection: closing it means a restarted database is reconnected next beat.
            connections["app"].close()


def heartbeat_start() -> None:
    if _started.is_set():
        return
    threading.Thread(target=_loop, name="cairn-heartbeat", daemon=True).start()

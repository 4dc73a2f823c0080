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
            INSERT INTO ops_worker_heartbeats (worker, cluster, started_at, seen_at)
            VALUES (%s, %s, %s, now())
            ON CONFLICT (worker) DO UPDATE SET seen_at = EXCLUDED.seen_at
            """,
            [worker or worker_name(), settings.Q_CLUSTER["name"], started_at],
        )


# django-q2 forks its sentinel from this process while the beat thread may be inside a beat. A lock that
# thread holds at that moment (a module import's, the connection's) stays held forever in the child, which
# then hangs on it; so a fork waits for the beat in flight, and no beat starts during a fork.
_beat_in_flight = threading.Lock()


def _fork_prepare() -> None:
    _beat_in_flight.acquire()


def _fork_done() -> None:
    # In the parent the beat may go on; in the child there is no beat thread, and the lock must not stay
    # taken.
    _beat_in_flight.release()


def _loop() -> None:
    from django.apps import apps

    started_at = timezone.now()
    interval = settings.OPS_HEARTBEAT_SECONDS
    stop = threading.Event()
    # The thread starts inside AppConfig.ready(): a beat before every app is ready would query the database
    # during app initialisation (Django warns about that, and a half-loaded registry is no place for a query).
    while not apps.ready:
        stop.wait(0.05)
    wait = 0.0
    while not stop.wait(wait):
        wait = interval
        with _beat_in_flight:
            try:
                heartbeat_beat(started_at=started_at)
            except Exception:  # noqa: BLE001 - a database restart must not kill the beat; the next one retries
                logger.warning("worker heartbeat failed", exc_info=True)
            finally:
                # This thread's own connection: closing it means a restarted database is reconnected next
                # beat.
                connections["app"].close()


def heartbeat_start() -> None:
    if _started.is_set():
        return
    _started.set()
    os.register_at_fork(before=_fork_prepare, after_in_parent=_fork_done, after_in_child=_fork_done)
    threading.Thread(target=_loop, name="cairn-heartbeat", daemon=True).start()

"""Reads for the health endpoints."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import connections
from django.db.migrations.executor import MigrationExecutor

_migrations_done = False


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def database_check() -> Check:
    try:
        with connections["app"].cursor() as cursor:
            cursor.execute("SELECT 1")
        return Check("database", True, "reachable")
    except Exception as exc:  # noqa: BLE001 - any failure means "not ready"; the class name says which
        connections["app"].close()
        return Check("database", False, f"unreachable ({type(exc).__name__})")


def migrations_check() -> Check:
    global _migrations_done
    if _migrations_done:  # applied migrations do not un-apply; after one success the check costs nothing
        return Check("migrations", True, "applied")
    try:
        executor = MigrationExecutor(connections["default"])
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except Exception as exc:  # noqa: BLE001
        connections["default"].close()
        return Check("migrations", False, f"cannot read the migration state ({type(exc).__name__})")
    if pending:
        return Check("migrations", False, f"{len(pending)} migration(s) not applied: run manage.py migrate")
    _migrations_done = True
    return Check("migrations", True, "applied")


def worker_check() -> Check:
    if not settings.OPS_READYZ_REQUIRE_WORKER:
        return Check("worker", True, "not required (OPS_READYZ_REQUIRE_WORKER=0)")
    max_age = settings.OPS_HEARTBEAT_MAX_AGE_SECONDS
    try:
        with connections["app"].cursor() as cursor:
            cursor.execute("SELECT extract(epoch FROM now() - max(seen_at)) FROM ops_worker_heartbeats")
            age = cursor.fetchone()[0]
    except Exception as exc:  # noqa: BLE001
        connections["app"].close()
        return Check("worker", False, f"cannot read heartbeats ({type(exc).__name__})")
    if age is None:
        return Check("worker", False, "no worker heartbeat yet: is `manage.py qcluster` running?")
    if float(age) > max_age:
        return Check("worker", False, f"last worker heartbeat {float(age):.0f} s ago (limit {max_age} s)")
    return Check("worker", True, f"last heartbeat {float(age):.0f} s ago")


def readiness() -> list[Check]:
    database = database_check()
    if not database.ok:
        return [database, Check("migrations", False, "skipped"), Check("worker", False, "skipped")]
    return [database, migrations_check(), worker_check()]

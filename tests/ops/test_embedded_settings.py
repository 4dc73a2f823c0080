"""The embedded server asks for the configured shared_buffers (applied at its next start)."""

from __future__ import annotations

import psycopg
import pytest

from config.embedded_db import SUPERUSER, _shared_buffers_configure, ensure_embedded_postgres


def _superuser_connection() -> psycopg.Connection:
    server = ensure_embedded_postgres()
    return psycopg.connect(host=server.socket_dir, port=server.port, user=SUPERUSER, autocommit=True)


def _pending_shared_buffers(conn: psycopg.Connection) -> str | None:
    row = conn.execute(
        "SELECT setting FROM pg_file_settings WHERE name = 'shared_buffers' "
        "AND sourcefile LIKE '%%auto.conf' ORDER BY seqno DESC LIMIT 1"
    ).fetchone()
    return row[0] if row else None


def test_it_records_the_wanted_shared_buffers_for_the_next_start(monkeypatch: pytest.MonkeyPatch) -> None:
    with _superuser_connection() as conn:
        before = _pending_shared_buffers(conn)
        try:
            monkeypatch.setenv("CAIRN_EMBEDDED_SHARED_BUFFERS", "384MB")
            _shared_buffers_configure(conn)
            assert _pending_shared_buffers(conn) == "384MB"
        finally:
            if before is None:
                conn.execute("ALTER SYSTEM RESET shared_buffers")
            else:
                conn.execute(f"ALTER SYSTEM SET shared_buffers = '{before}'")


@pytest.mark.parametrize("value", ["512", "1TB", "512MB; DROP TABLE x", "0MB", ""])
def test_it_refuses_a_malformed_shared_buffers(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CAIRN_EMBEDDED_SHARED_BUFFERS", value)
    with _superuser_connection() as conn, pytest.raises(ValueError, match="CAIRN_EMBEDDED_SHARED_BUFFERS"):
        _shared_buffers_configure(conn)

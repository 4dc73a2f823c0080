"""Timestamps read through psycopg's C loader on the runtime connection.

Django registers its own timestamptz loader on every PostgreSQL connection: a Python subclass of psycopg's
pure-Python loader that then replaces the time zone with the connection's. A context/get reads ~300
timestamps, and that loader was about a tenth of the call's Python time (bench/README.md). When the session's
time zone already is the one Django wants (UTC, which Django sets with USE_TZ), psycopg's C loader returns the
same values with the same tzinfo, so it takes over; any other set-up keeps Django's loader.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from psycopg import DataError, postgres
from psycopg.adapt import Loader
from psycopg.pq import Format

_TIMESTAMPTZ_OID = postgres.types["timestamptz"].oid
_fast_loader = postgres.adapters.get_loader(_TIMESTAMPTZ_OID, Format.TEXT)
assert _fast_loader is not None  # psycopg's default adapters always load timestamptz text
_FAST_LOADER = _fast_loader


class UtcTimestamptzLoader(Loader):
    # Django's create_cursor compares this with the connection's time zone and re-registers its own loader on
    # a mismatch, so a connection in another time zone can never keep this one.
    timezone = UTC

    def __init__(self, oid: int, context: Any = None) -> None:
        super().__init__(oid, context)
        self._load = _FAST_LOADER(oid, context).load

    def load(self, data: Any) -> Any:
        try:
            return self._load(data)
        except DataError:
            return _clamped(data)


logger = logging.getLogger("cairn.db")
_LOW, _HIGH = datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)


def _clamped(data: Any) -> datetime:
    """A stored time Python's datetime cannot hold (before year 1 or after 9999 in UTC, or ±infinity; the
    write rules refuse them, older rows may hold them): read as the nearest end of the range, so one row
    never fails every read that loads it. graph/status counts such rows; `manage.py stored_rows_repair`
    fixes them."""
    text = bytes(data).decode("ascii", "replace")
    low = text.endswith(" BC") or text.startswith("-")
    logger.warning("timestamp %r is outside years 1-9999 UTC; read as %s", text[:40], _LOW if low else _HIGH)
    return _LOW if low else _HIGH


def fast_timestamps_ensure(sender: object, connection: Any, **kwargs: object) -> None:
    """connection_created receiver: psycopg's C loader where the session is in UTC and Django expects UTC."""
    if (
        connection.vendor != "postgresql"
        or connection.timezone != UTC
        or not hasattr(connection.connection, "info")
    ):
        return
    if connection.connection.info.timezone != UTC or _FAST_LOADER.__module__.startswith("psycopg.types"):
        # Another session time zone, or no C implementation (pure-Python psycopg): Django's loader stays.
        return
    connection.connection.adapters.register_loader("timestamptz", UtcTimestamptzLoader)

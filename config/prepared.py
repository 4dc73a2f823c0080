"""Statements bound on the server and prepared, for the hot read statements whose generic plan is as good as a
custom one (graph recall and traversal, the expansion, contradictions, context/get's BM25 statement).

Django binds parameters on the client, so PostgreSQL parses and plans every statement afresh; for large
statements that cost more than running them. The runtime connection plans prepared statements generically
(graphsvc.apps.generic_plans_ensure). GRAPH_PREPARED_STATEMENTS=false turns preparing off (a pooler in
transaction mode cannot keep prepared statements)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from django.conf import settings
from django.db import connections

# psycopg's placeholders in our own statement texts (never in data): named, positional, an escaped percent.
_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%s|%%")
_NATIVE_CACHE_MAX = 256  # the statement texts are few (hops × flags); the cache never grows past this


class _NativeStatements:
    """Statement texts rewritten once to PostgreSQL's own $n placeholders, with the order to pass values in.

    psycopg rewrites placeholders on every execute and keeps the result only for statements up to 4 KB; the
    recall statements are 5-13 KB, and rewriting them cost a tenth of a context/get's CPU. A raw cursor
    (psycopg's public RawCursor) takes $n placeholders as they are, so each text is rewritten here once."""

    converted: dict[str, tuple[str, tuple[str, ...] | int]] = {}

    @classmethod
    def native(cls, query: str, params: Any) -> tuple[str, list[Any]]:
        found = cls.converted.get(query)
        if found is None:
            found = cls._convert(query)
            if len(cls.converted) < _NATIVE_CACHE_MAX:
                cls.converted[query] = found
        text, order = found
        if isinstance(order, int):
            if isinstance(params, Mapping) or len(params) != order:
                raise TypeError(f"the statement takes {order} positional values")
            return text, list(params)
        if not isinstance(params, Mapping):
            raise TypeError("the statement takes named values")
        return text, [params[name] for name in order]

    @staticmethod
    def _convert(query: str) -> tuple[str, tuple[str, ...] | int]:
        parts: list[str] = []
        names: dict[str, int] = {}
        positional = 0
        at = 0
        for match in _PLACEHOLDER.finditer(query):
            parts.append(query[at : match.start()])
            at = match.end()
            token, name = match.group(0), match.group(1)
            if token == "%%":
                parts.append("%")
            elif name is None:
                positional += 1
                parts.append(f"${positional}")
            else:
                names.setdefault(name, len(names) + 1)
                parts.append(f"${names[name]}")
        parts.append(query[at:])
        if names and positional:
            raise TypeError("a statement takes named or positional values, not both")
        return "".join(parts), (tuple(names) if names else positional)


class _PreparingCursor:
    """Built on first use: Django's server-binding cursor class, told to prepare every statement it runs, and
    a debug wrapper that logs the statement as written (Django would log None: it reads the text of
    client-bound statements back from psycopg)."""

    cls: Any = None
    debug: Any = None

    @classmethod
    def get(cls) -> tuple[Any, Any]:
        if cls.cls is None:
            import psycopg
            from django.db.backends.postgresql.base import CursorMixin
            from django.db.backends.utils import CursorDebugWrapper

            class PreparingCursor(CursorMixin, psycopg.RawCursor):
                def execute(
                    self,
                    query: Any,
                    params: Sequence[Any] | Mapping[str, Any] | None = None,
                    *,
                    prepare: bool | None = None,
                    binary: bool | None = None,
                ) -> Any:
                    if isinstance(query, str) and params is not None:
                        query, params = _NativeStatements.native(query, params)
                    return super().execute(query, params, prepare=True, binary=binary)

            # Statements reach this wrapper as text only (prepared_cursor's callers write SQL strings); the
            # base class also takes composed SQL, which debug_sql does not.
            class DebugWrapper(CursorDebugWrapper):
                def execute(self, sql: str, params: Any = None) -> Any:  # type: ignore[override]
                    with self.debug_sql(sql, params, use_last_executed_query=False):
                        return self._execute_with_wrappers(sql, params, many=False, executor=self._execute)

            cls.cls, cls.debug = PreparingCursor, DebugWrapper
        return cls.cls, cls.debug


def prepared_cursor() -> Any:
    """A cursor on the runtime connection whose statements are bound on the server and prepared.

    Django binds parameters on the client, so PostgreSQL plans every statement afresh; the recall statements
    are large (a CTE per hop) and planning them cost 2-6 ms, more than running them. Prepared once per
    connection, they are planned once (PostgreSQL switches to a generic plan after five executions when it is
    no worse). Django leaves psycopg's prepare_threshold at None, which disables preparing altogether; a
    threshold no statement reaches lets an explicit prepare through and changes nothing else (Django's
    client-binding cursors never prepare). GRAPH_PREPARED_STATEMENTS=false turns this off for poolers that
    cannot keep prepared statements. The cursor is wrapped like Django's own, so query logging and counts
    still see it."""
    connection = connections["app"]
    if not settings.GRAPH_PREPARED_STATEMENTS:
        return connection.cursor()
    connection.ensure_connection()
    if connection.connection.prepare_threshold is None:
        connection.connection.prepare_threshold = 2**31 - 1
    cursor_class, debug_wrapper = _PreparingCursor.get()
    raw = cursor_class(connection.connection)
    connection.validate_thread_sharing()
    return debug_wrapper(raw, connection) if connection.queries_logged else connection.make_cursor(raw)

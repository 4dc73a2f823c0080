"""The row-level-security context: which workspace the current transaction may see and write, and how long any
one of its statements may run."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.conf import settings
from django.db import connections, transaction
from django.http import HttpRequest, HttpResponse

from config.errors import ApiError
from tenancy.policy import READ

_current_workspace: ContextVar[int | None] = ContextVar("cairn_workspace", default=None)
# The request being served in this context (set by StatementTimeoutMiddleware); None in jobs and commands.
_current_request: ContextVar[HttpRequest | None] = ContextVar("cairn_request", default=None)
# The declared role of an SDK call served outside an HTTP request (an MCP tool; set by sdk_call_limits).
_sdk_call_role: ContextVar[str | None] = ContextVar("cairn_sdk_call_role", default=None)

# SQLSTATE query_canceled: what PostgreSQL answers when statement_timeout cancels a statement.
QUERY_CANCELED = "57014"


# SET LOCAL, not set_config(..., true): the same transaction-local settings, but on Citus only a SET reaches
# the workers (the runtime role has citus.propagate_set_commands = 'local'), and without the workspace there
# the policies on every shard let nothing through. A SET takes no bind parameter: both values are integers
# made here.
_SET = "SET LOCAL app.workspace_id = {workspace}; SET LOCAL statement_timeout = {timeout}"
# Inside an outer transaction the limit in force is read in the same round trip, to be put back on the way
# out.
_SET_NESTED = "SELECT current_setting('statement_timeout'); " + _SET


@contextmanager
def workspace_context(workspace_id: int) -> Iterator[None]:
    """Open a transaction on the runtime connection in which RLS lets through `workspace_id` and nothing else,
    and in which no statement runs longer than `statement_timeout_ms()`.

    SET LOCAL is local to the transaction, so a pooled connection never carries either setting into the next
    request; both are set in the one round trip that was there for the workspace alone. Nesting
    is allowed for the same workspace only: a savepoint would not undo a switch on release.
    """
    current = _current_workspace.get()
    if current is not None and current != workspace_id:
        raise RuntimeError(f"already in workspace {current}; cannot nest workspace {workspace_id}")
    connection = connections["app"]
    # Inside an outer transaction (a test, a caller's atomic block) the settings would outlive this block, so
    # put them back on the way out; a query after the block must see nothing, as it would in production.
    outer_transaction = connection.in_atomic_block and current is None
    previous_timeout = ""
    token = _current_workspace.set(workspace_id)
    try:
        with transaction.atomic(using="app"):
            if current is None:
                values = {"workspace": int(workspace_id), "timeout": int(statement_timeout_ms())}
                with connection.cursor() as cursor:
                    if outer_transaction:
                        cursor.execute(_SET_NESTED.format(**values))
                        previous_timeout = cursor.fetchone()[0]
                    else:
                        cursor.execute(_SET.format(**values))
            yield
        if outer_transaction:
            with connection.cursor() as cursor:
                quoted = previous_timeout.replace("'", "''")
                cursor.execute(f"SET LOCAL app.workspace_id = ''; SET LOCAL statement_timeout = '{quoted}'")
    finally:
        _current_workspace.reset(token)


def current_workspace_id() -> int | None:
    return _current_workspace.get()


# --- statement timeouts -------------------------------------------------------------------------------------


def statement_timeout_ms() -> int:
    """The statement_timeout of a workspace transaction opened now (milliseconds, 0 = none).

    An SDK call's by the role it declared (tenancy.policy.requires, or the MCP tool's body): a read answers in
    milliseconds, so seconds mean a runaway; a write may also wait on a lock. A dashboard page's. Outside
    both (jobs, commands) the background limit."""
    request = _current_request.get()
    if request is None:
        role = _sdk_call_role.get()
        return int(settings.STATEMENT_TIMEOUT_BACKGROUND_MS) if role is None else _sdk_limit(role)
    if request.path.startswith("/api/"):
        return _sdk_limit(getattr(request, "cairn_required_role", None))
    return int(settings.STATEMENT_TIMEOUT_DASHBOARD_MS)


def _sdk_limit(role: str | None) -> int:
    if role == READ:
        return int(settings.STATEMENT_TIMEOUT_SDK_READ_MS)
    return int(settings.STATEMENT_TIMEOUT_SDK_WRITE_MS)


@contextmanager
def sdk_call_limits(*, role: str) -> Iterator[None]:
    """The statement limits of an SDK route that declares `role`, for a call served outside an HTTP request
    (an MCP tool): the same call through either way in is cut off at the same time."""
    token = _sdk_call_role.set(role)
    try:
        yield
    finally:
        _sdk_call_role.reset(token)


def statement_timeout_ceiling_ensure(sender: object, connection: Any, **kwargs: object) -> None:
    """connection_created receiver: the background limit for every statement of the runtime connection's
    session, the ceiling for those no workspace transaction covers (the key lookup before a route resolves its
    workspace, the account pages, the job queue's claims). Set on connect, in autocommit, so no rollback can
    undo it; every process sets the same value, so a pooler that hands the session on carries no surprise."""
    if connection.alias != "app" or connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('statement_timeout', %s, false)",
            [str(settings.STATEMENT_TIMEOUT_BACKGROUND_MS)],
        )


def is_statement_timeout(exc: BaseException) -> bool:
    """Whether `exc` (a Django database error, or what it wraps) is a statement PostgreSQL cancelled."""
    seen: BaseException | None = exc
    for _ in range(4):  # Django wraps the driver's error once; a few links are plenty and always end
        if seen is None:
            return False
        if getattr(seen, "sqlstate", None) == QUERY_CANCELED:
            return True
        seen = seen.__cause__
    return False


def statement_timeout_error() -> ApiError:
    """A statement ran past the request's statement_timeout (tenancy.rls) and PostgreSQL cancelled it; the
    request's workspace transaction was rolled back, so a retry starts clean."""
    return ApiError(
        503,
        "STATEMENT_TIMEOUT",
        f"A database statement of this request ran past its limit ({statement_timeout_ms()} ms) and was "
        "cancelled; nothing was changed. Retry after the Retry-After delay; if it happens again, ask for "
        "less (a smaller limit, a narrower scope or query).",
        retryable=True,
        headers={"Retry-After": "1"},
    )


class StatementTimeoutMiddleware:
    """Makes the request known to statement_timeout_ms for the time it is served, and answers a dashboard page
    whose statement ran out of time with the styled 503 page (SDK routes answer 503 STATEMENT_TIMEOUT in the
    envelope, config.api)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = _current_request.set(request)
        try:
            return self.get_response(request)
        finally:
            _current_request.reset(token)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if request.path.startswith("/api/") or not is_statement_timeout(exception):
            return None
        from django.shortcuts import render

        response = render(request, "503.html", {"limit_ms": statement_timeout_ms()}, status=503)
        response["Retry-After"] = "1"
        return response


def connection_on_citus() -> bool:
    """Whether the runtime connection's database is a Citus coordinator (noted once per connection, when it
    connects), for the few statements that are shaped differently there."""
    connection = connections["app"]
    connection.ensure_connection()
    return bool(getattr(connection, "cairn_on_citus", False))

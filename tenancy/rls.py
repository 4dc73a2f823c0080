"""The row-level-security context: which workspace the current transaction may see and write."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.db import connections, transaction

_current_workspace: ContextVar[int | None] = ContextVar("cairn_workspace", default=None)


@contextmanager
def workspace_context(workspace_id: int) -> Iterator[None]:
    """Open a transaction on the runtime connection in which RLS lets through `workspace_id` and nothing else.

    set_config(..., true) is local to the transaction, so a pooled connection never carries it into the next
    request. Nesting is allowed for the same workspace only: a savepoint would not undo a switch on release.
    """
    current = _current_workspace.get()
    if current is not None and current != workspace_id:
        raise RuntimeError(f"already in workspace {current}; cannot nest workspace {workspace_id}")
    connection = connections["app"]
    # Inside an outer transaction (a test, a caller's atomic block) the setting would outlive this block, so
    # clear it on the way out; a query after the block must see nothing, as it would in production.
    outer_transaction = connection.in_atomic_block and current is None
    token = _current_workspace.set(workspace_id)
    try:
        with transaction.atomic(using="app"):
            if current is None:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT set_config('app.workspace_id', %s, true)", [str(workspace_id)])
            yield
        if outer_transaction:
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('app.workspace_id', '', true)")
    finally:
        _current_workspace.reset(token)


def current_workspace_id() -> int | None:
    return _current_workspace.get()

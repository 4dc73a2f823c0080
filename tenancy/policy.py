"""The one authorization policy: which role each way in needs, and what role a caller holds in a workspace.

Roles, weakest first: `read` (search, list, context, graph reads), `write` (add, edit, forget memories),
`admin` (workspace settings, rollout, graph upkeep, bulk deletes, import/export, members, keys), `owner`
(owners and the organization itself). A caller's role in a workspace is the lower of
- what the user is there: the personal workspace's user is its owner, an org member has the membership's role
  (owner, admin; `member` is write), an SDK tenant gives the role its caller holds in the parent workspace;
- what the key may do: its scope (`read`, `write` or `admin`).
So a key never exceeds its user's role, and a change of membership applies to the user's keys on their next
call. Every SDK route, MCP tool and dashboard view declares the role it needs (`requires` here,
`workspace_page` and its kin in dashboard/access.py); the check runs before any service, and a refusal is 403
FORBIDDEN_ROLE naming the role needed. Management commands are the operator's and declare `OPERATOR`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from config.errors import ApiError

READ = "read"
WRITE = "write"
ADMIN = "admin"
OWNER = "owner"
ROLES = (READ, WRITE, ADMIN, OWNER)
# Declared by routes that need no workspace role: the health check (no key at all) and the signed-in user's
# own pages; and by management commands, which only the operator runs.
PUBLIC = "public"
USER = "user"
OPERATOR = "operator"
DECLARATIONS = (*ROLES, PUBLIC, USER, OPERATOR)

_LEVEL = {READ: 1, WRITE: 2, ADMIN: 3, OWNER: 4}
# Membership roles as stored; `member` may read and write.
MEMBERSHIP_ROLE = {"owner": OWNER, "admin": ADMIN, "member": WRITE}
KEY_SCOPES = (READ, WRITE, ADMIN)
DEFAULT_KEY_SCOPE = WRITE

F = TypeVar("F", bound=Callable[..., Any])


def level(role: str | None) -> int:
    return _LEVEL.get(role or "", 0)


def allows(held: str | None, needed: str) -> bool:
    return level(held) >= level(needed)


def weaker(first: str | None, second: str | None) -> str | None:
    """The lower of two roles (None when either is None: no role at all)."""
    if first is None or second is None:
        return None
    return first if level(first) <= level(second) else second


def role_of_membership(membership_role: str | None) -> str | None:
    return MEMBERSHIP_ROLE.get(membership_role or "")


def forbidden(needed: str, held: str | None) -> ApiError:
    held_text = f"your key acts here as {held}" if held else "your key has no role here"
    return ApiError(
        403,
        "FORBIDDEN_ROLE",
        f"This needs the {needed} role in this workspace; {held_text}. Ask a workspace admin, or use a key "
        f"with a wider scope.",
        details={"requiredRole": needed, "heldRole": held},
    )


def declared_role(view: Callable[..., Any]) -> str | None:
    """The role a view, tool or command declared (None: it declared nothing, which the meta-test refuses)."""
    seen: Any = view
    while seen is not None:
        role = getattr(seen, "cairn_role", None)
        if role is not None:
            return str(role)
        seen = getattr(seen, "__wrapped__", None)
    return None


def declare(role: str) -> Callable[[F], F]:
    """Mark a callable with the role it needs, without wrapping it (MCP tool bodies, commands)."""
    if role not in DECLARATIONS:
        raise ValueError(f"unknown role {role!r}")

    def mark(target: F) -> F:
        target.cairn_role = role  # type: ignore[attr-defined]
        return target

    return mark


def requires(role: str) -> Callable[[F], F]:
    """An SDK route's role, put under its router decorator. The request carries it from the start, so the key
    check (tenancy.auth) refuses a key whose scope is too weak before the body is read, and the workspace
    check (tenancy.access) reads it where the handler resolves its workspace: a handler cannot resolve a
    workspace without having declared a role."""
    from ninja.decorators import decorate_view

    if role not in DECLARATIONS:
        raise ValueError(f"unknown role {role!r}")

    def mark_request(run: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(run)
        def marked(request: Any, *args: Any, **kwargs: Any) -> Any:
            request.cairn_required_role = role
            return run(request, *args, **kwargs)

        return marked

    def decorate(view: F) -> F:
        declare(role)(view)
        return decorate_view(mark_request)(view)

    return decorate


def key_scope_check(request: Any, key_scope: str) -> None:
    """Refuse a key whose scope cannot reach the role the route declared (nothing to check when it declared a
    role that needs no workspace)."""
    role = getattr(request, "cairn_required_role", None)
    if role in ROLES and not allows(key_scope, role):
        raise forbidden(role, key_scope)

"""What every dashboard page shares: the layout's context, JSON errors in the SDK's envelope, query-parameter
parsing and the confirmation step of destructive actions."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from config.errors import ApiError, error_response
from dashboard import selectors
from dashboard.access import SignedInRequest
from tenancy import policy
from tenancy import selectors as tenancy_selectors
from tenancy.models import Workspace
from tenancy.rls import workspace_context

LIST_LIMIT = 100


def page(
    request: SignedInRequest,
    template: str,
    workspace: Workspace | None,
    role: str | None,
    context: dict[str, Any],
    *,
    section: str = "",
    status: int = 200,
) -> HttpResponse:
    """A full page in the layout: the workspace switcher, the section navigation with the open-conflicts
    badge, and what the role may do."""
    conflicts = 0
    if workspace is not None:
        with workspace_context(workspace.id):
            conflicts = selectors.conflict_count(workspace_id=workspace.id)
    base = {
        "workspace": workspace,
        "role": role,
        "can_write": policy.allows(role, policy.WRITE),
        "can_manage": policy.allows(role, policy.ADMIN),
        "section": section,
        "switcher": switcher_entries(request, workspace),
        "conflict_badge": conflicts,
    }
    return render(request, template, {**base, **context}, status=status)


# The switcher lists at most this many workspaces (own ones first, then SDK tenants); Home lists them all.
SWITCHER_LIMIT = 20


def switcher_entries(request: HttpRequest, current: Workspace | None) -> list[dict[str, Any]]:
    """The workspaces the user can open (personal, orgs, then the SDK tenants under them) with their memory
    counts, the current one marked. Each count runs in its own workspace's RLS context."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return []
    own = tenancy_selectors.workspaces_for_user(user=user)
    tenants = tenancy_selectors.tenants_for_workspaces(workspaces=own, limit=SWITCHER_LIMIT)
    entries = []
    for workspace in [*own, *tenants][:SWITCHER_LIMIT]:
        with workspace_context(workspace.id):
            count = selectors.memory_total(workspace_id=workspace.id)
        entries.append(
            {
                "workspace": workspace,
                "name": workspace.tenant_id if workspace.kind == "sdk_tenant" else workspace.name,
                "kind": "SDK tenant" if workspace.kind == "sdk_tenant" else workspace.kind,
                "count": count,
                "current": current is not None and workspace.id == current.id,
            }
        )
    return entries


def json_error(request: HttpRequest, code: str, message: str, *, status: int = 400) -> HttpResponse:
    # The SDK API's envelope, so a script reading graph/data handles errors the same way.
    return error_response(request, ApiError(status, code, message))


class BadRequest(Exception):
    """A query parameter a page cannot use; its message says what to send instead."""


def float_param(request: HttpRequest, name: str) -> float:
    raw = request.GET.get(name, "").strip()
    if not raw:
        return 0.0
    try:
        value = float(raw)
    except ValueError:
        raise BadRequest(f"{name} must be a number between 0 and 1, got {raw[:40]!r}") from None
    if not 0.0 <= value <= 1.0:
        raise BadRequest(f"{name} must be between 0 and 1, got {value}")
    return value


def list_param(request: HttpRequest, name: str) -> tuple[str, ...]:
    values = [v.strip() for raw in request.GET.getlist(name) for v in raw.split(",") if v.strip()]
    if len(values) > 50 or any(len(v) > 128 for v in values):
        raise BadRequest(f"{name} takes at most 50 comma-separated values of up to 128 characters")
    return tuple(dict.fromkeys(values))


def int_param(request: HttpRequest, name: str, *, default: int, low: int, high: int) -> int:
    raw = request.GET.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be a whole number from {low} to {high}") from None
    if not low <= value <= high:
        raise BadRequest(f"{name} must be from {low} to {high}, got {value}")
    return value


def int_or_zero(raw: str | None) -> int:
    try:
        return int(raw or 0)
    except ValueError:
        return 0


# --- destructive actions: confirmed twice -------------------------------------------------------------------


def confirmed(request: HttpRequest) -> bool:
    """A destructive POST carries confirmed=1: the page's <dialog> (static/dashboard/confirm.js) adds it, and
    without scripts the confirmation page's own form does."""
    return request.POST.get("confirmed") == "1"


def confirmation_page(
    request: SignedInRequest,
    workspace: Workspace | None,
    role: str | None,
    *,
    title: str,
    message: str,
    action: str,
    button: str,
    cancel_url: str,
    section: str = "",
) -> HttpResponse:
    """The second step of a destructive action sent without confirmation: the same POST, confirmed."""
    fields = [(k, v) for k, v in request.POST.items() if k not in {"csrfmiddlewaretoken", "confirmed"}]
    return page(
        request,
        "dashboard/confirm.html",
        workspace,
        role,
        {
            "title": title,
            "message": message,
            "action": action,
            "button": button,
            "fields": fields,
            "cancel_url": cancel_url,
        },
        section=section,
    )


# --- people -------------------------------------------------------------------------------------------------


def changed_by(raw: str | None) -> str:
    """Who a stored `updated_by` names, for people: "dashboard:alice" → "alice", "user:7" (an SDK key's
    user) → "alice (API key)", the autopilot as itself."""
    if not raw:
        return ""
    kind, _, rest = raw.partition(":")
    if kind == "dashboard" and rest:
        return rest
    if kind == "user" and rest.isdigit():
        user = get_user_model().objects.filter(pk=int(rest)).first()
        return f"{user.get_username()} (API key)" if user else "a deleted user (API key)"
    if raw == "autopilot":
        return "the autopilot"
    return raw

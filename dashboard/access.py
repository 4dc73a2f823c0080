"""Each dashboard view declares the role it needs, checked by the same policy as the SDK API (tenancy.policy):
an outsider gets 404 (another workspace's existence never leaks), a weaker role 403 with the role needed."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase

from tenancy import policy
from tenancy.access import user_role_in
from tenancy.models import Workspace

View = TypeVar("View", bound=Callable[..., HttpResponseBase])


class SignedInRequest(HttpRequest):
    """A request a signed-in-only view receives (login_required let it through): its user is a User."""

    user: User


def workspace_page(role: str) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """A view of /w/<workspace_id>/…: called as view(request, workspace, held_role, **rest) once the signed-in
    user holds `role` there."""
    if role not in policy.ROLES:
        raise ValueError(f"unknown role {role!r}")

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @functools.wraps(view)
        def checked(request: SignedInRequest, workspace_id: int, **kwargs: Any) -> HttpResponse:
            workspace = Workspace.objects.select_related("parent").filter(id=workspace_id).first()
            held = user_role_in(user=request.user, workspace=workspace) if workspace else None
            if workspace is None or held is None:
                raise Http404("No such workspace")
            if not policy.allows(held, role):
                raise PermissionDenied(
                    f"This needs the {role} role in {workspace.name}; you are {held} here."
                )
            return view(request, workspace, held, **kwargs)

        guarded = login_required(checked)
        guarded.cairn_role = role  # type: ignore[attr-defined]
        return guarded

    return decorate


def user_page(view: View) -> View:
    """A view of the signed-in user's own things (keys, routing, invitations): no workspace role."""
    guarded = login_required(view)
    guarded.cairn_role = policy.USER  # type: ignore[attr-defined]
    return guarded


def public_page(view: View) -> View:
    """Sign-in, sign-up: anyone."""
    view.cairn_role = policy.PUBLIC  # type: ignore[attr-defined]
    return view


def require_role(held: str, role: str, message: str) -> None:
    """A stronger role for one action of a page (e.g. only owners make owners)."""
    if not policy.allows(held, role):
        raise PermissionDenied(message)

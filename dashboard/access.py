"""Each dashboard view declares the role it needs, checked by the same policy as the SDK API (tenancy.policy):
an outsider gets 404 (another workspace's existence never leaks), a weaker role 403 with the role needed.

A signed-out request for a page is sent to sign-in. One made by a script (htmx or the explorer's fetch) gets
401 with HX-Redirect and a JSON envelope naming the sign-in URL instead: a redirect would be followed by the
script and the sign-in page injected into a panel."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast
from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.contrib.auth.models import User
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import resolve_url
from django.utils.http import url_has_allowed_host_and_scheme

from config.errors import ApiError, error_response
from tenancy import policy
from tenancy.access import user_role_in
from tenancy.models import Workspace

View = TypeVar("View", bound=Callable[..., HttpResponseBase])

# The policy's roles as the Members page names them (a membership of role `member` holds `write`), so the 403
# page and Members speak of the same roles.
ROLE_NAMES = {policy.READ: "read-only", policy.WRITE: "member", policy.ADMIN: "admin", policy.OWNER: "owner"}


class SignedInRequest(HttpRequest):
    """A request a signed-in-only view receives (login_required let it through): its user is a User."""

    user: User


def is_script_request(request: HttpRequest) -> bool:
    """htmx, or a fetch that asked for JSON: an answer a script reads rather than a browser tab shows."""
    return bool(request.headers.get("HX-Request")) or "application/json" in request.headers.get("Accept", "")


def _page_of(request: HttpRequest) -> str:
    """The page a script request was made from (htmx says so; fetch sends the Referer), else the URL itself:
    where sign-in should come back to."""
    for candidate in (request.headers.get("HX-Current-URL", ""), request.headers.get("Referer", "")):
        if candidate and url_has_allowed_host_and_scheme(candidate, allowed_hosts={request.get_host()}):
            parts = urlsplit(candidate)
            return parts.path + (f"?{parts.query}" if parts.query else "")
    return request.get_full_path()


def session_expired(request: HttpRequest) -> HttpResponse:
    login_url = resolve_url(settings.LOGIN_URL) + "?" + urlencode({"next": _page_of(request)})
    response = error_response(
        request,
        ApiError(
            401,
            "SESSION_EXPIRED",
            "Your session has ended. Sign in again to continue.",
            details={"loginUrl": login_url},
        ),
    )
    response["HX-Redirect"] = login_url
    return response


def signed_in(view: Callable[..., Any]) -> Callable[..., Any]:
    """login_required, except that a script's request gets session_expired() instead of a redirect."""

    @functools.wraps(view)
    def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        if request.user.is_authenticated:
            return view(request, *args, **kwargs)
        if is_script_request(request):
            return session_expired(request)
        return redirect_to_login(request.get_full_path())

    return checked


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
                    f"This needs the {ROLE_NAMES[role]} role in {workspace.name}; "
                    f"you are {ROLE_NAMES[held]} here."
                )
            return view(request, workspace, held, **kwargs)

        guarded = signed_in(checked)
        guarded.cairn_role = role  # type: ignore[attr-defined]
        return guarded

    return decorate


def user_page(view: View) -> View:
    """A view of the signed-in user's own things (keys, routing, invitations): no workspace role."""
    guarded = signed_in(view)
    guarded.cairn_role = policy.USER  # type: ignore[attr-defined]
    return cast(View, guarded)


def public_page(view: View) -> View:
    """Sign-in, sign-up: anyone."""
    view.cairn_role = policy.PUBLIC  # type: ignore[attr-defined]
    return view


def require_role(held: str, role: str, message: str) -> None:
    """A stronger role for one action of a page (e.g. only owners make owners)."""
    if not policy.allows(held, role):
        raise PermissionDenied(message)

"""The signed-in user's own pages: sign-up, the workspace list, invitations, API keys and repo routing."""

from __future__ import annotations

import hashlib
import uuid
from datetime import timedelta

from axes.helpers import get_client_ip_address
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.forms import UserCreationForm
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from dashboard import forms
from dashboard.access import SignedInRequest, public_page, user_page
from dashboard.views.common import confirmation_page, confirmed, int_or_zero, page
from tenancy import policy
from tenancy import selectors as tenancy_selectors
from tenancy import services as tenancy_services
from tenancy.models import UserSettings, Workspace
from tenancy.ratelimit import rate_limit_hit

TENANT_LIST_LIMIT = 50
KEY_LIST_LIMIT = 200


# --- sign in / up, home -------------------------------------------------------------------------------------


@public_page
@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    if not settings.DASHBOARD_SIGNUP_ENABLED:
        raise Http404("Sign-up is off")
    form: UserCreationForm[User] = UserCreationForm(request.POST or None)
    if request.method == "POST" and not _signup_allowed(request):
        response = render(request, "dashboard/locked.html", {"signup": True}, status=429)
        response["Retry-After"] = "3600"
        return response
    if request.method == "POST" and form.is_valid():
        user = form.save()
        tenancy_services.personal_workspace_ensure(user=user)
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect("dashboard-home")
    return render(request, "dashboard/signup.html", {"form": form})


def _signup_allowed(request: HttpRequest) -> bool:
    """Sign-up attempts per client address and hour (the SDK's exact counter, keyed by a hash of the
    address)."""
    address = get_client_ip_address(request) or "unknown"
    bucket = "signup:" + hashlib.sha256(address.encode()).hexdigest()[:48]
    decision = rate_limit_hit(bucket=bucket, limit=settings.SIGNUP_PER_ADDRESS_PER_HOUR, window_seconds=3600)
    return decision.allowed


@user_page
@require_GET
def home(request: SignedInRequest) -> HttpResponse:
    tenancy_services.personal_workspace_ensure(user=request.user)
    workspaces = tenancy_selectors.workspaces_for_user(user=request.user)
    tenants = tenancy_selectors.tenants_for_workspaces(workspaces=workspaces, limit=TENANT_LIST_LIMIT)
    return page(request, "dashboard/home.html", None, None, {"workspaces": workspaces, "tenants": tenants})


# --- invitations (per user) ---------------------------------------------------------------------------------


@user_page
@require_http_methods(["GET", "POST"])
def invitations(request: SignedInRequest) -> HttpResponse:
    """The signed-in user's pending invitations; POST accepts or declines one."""
    error = None
    if request.method == "POST":
        invitation = tenancy_selectors.invitation_get(
            invitation_id=int_or_zero(request.POST.get("invitation"))
        )
        if invitation is None or invitation.user_id != request.user.pk:
            raise Http404("No such invitation")
        if request.POST.get("action") == "decline" and not confirmed(request):
            return confirmation_page(
                request,
                None,
                None,
                title=f"Decline the invitation to {invitation.org.name}?",
                message="The invitation goes away; an admin of the organization would have to invite you "
                "again.",
                action=reverse("dashboard-invitations"),
                button="Decline invitation",
                cancel_url=reverse("dashboard-invitations"),
                section="invitations",
            )
        try:
            if request.POST.get("action") == "accept":
                tenancy_services.invitation_accept(invitation=invitation, user=request.user)
            elif request.POST.get("action") == "decline":
                tenancy_services.invitation_decline(invitation=invitation, user=request.user)
            else:
                raise ValueError("action must be accept or decline")
        except ValueError as exc:
            error = str(exc)
        else:
            return redirect("dashboard-invitations")
    context = {
        "invitations": tenancy_selectors.invitations_pending_for_user(user=request.user),
        "error": error,
    }
    response = page(request, "dashboard/invitations.html", None, None, context, section="invitations")
    if error:
        response.status_code = 400
    return response


# --- settings: keys and routing (per user) ------------------------------------------------------------------


def _keys_page(
    request: SignedInRequest,
    *,
    form: forms.ApiKeyCreateForm | None = None,
    status: int = 200,
) -> HttpResponse:
    form = form or forms.ApiKeyCreateForm(initial={"expires_in_days": settings.API_KEY_DEFAULT_EXPIRY_DAYS})
    keys = tenancy_selectors.api_keys_for_user(user=request.user, limit=KEY_LIST_LIMIT)
    # The secret of a key created just before the redirect: shown on this one page view, then gone.
    created = request.session.pop(_CREATED_KEY_SESSION, None)
    response = page(
        request,
        "dashboard/keys.html",
        None,
        None,
        {
            "form": form,
            "keys": keys,
            "created": created,
            "now": timezone.now(),
            "max_days": settings.API_KEY_MAX_EXPIRY_DAYS,
            "scopes": policy.KEY_SCOPES,
            "pin_choices": tenancy_selectors.workspaces_for_user(user=request.user),
            "api_base": request.build_absolute_uri("/api/sdk/v1"),
        },
        section="keys",
    )
    response.status_code = status
    # The raw key is in this page only; no cache may keep it.
    response["Cache-Control"] = "no-store"
    return response


_CREATED_KEY_SESSION = "cairn_created_key"


@user_page
@require_http_methods(["GET", "POST"])
def keys(request: SignedInRequest) -> HttpResponse:
    if request.method == "GET":
        return _keys_page(request)
    form = forms.ApiKeyCreateForm(request.POST)
    if not form.is_valid():
        return _keys_page(request, form=form, status=400)
    pin = None
    if form.cleaned_data["pin"]:
        pin = Workspace.objects.filter(pk=form.cleaned_data["pin"]).first()
        if pin is None:
            form.add_error("pin", "No such workspace.")
            return _keys_page(request, form=form, status=400)
    expires_at = timezone.now() + timedelta(days=form.cleaned_data["expires_in_days"])
    try:
        created = tenancy_services.api_key_create(
            user=request.user,
            expires_at=expires_at,
            name=form.cleaned_data["name"],
            created_via="dashboard",
            scope=form.cleaned_data["scope"],
            workspace=pin,
        )
    except ValueError as error:
        form.add_error(None, str(error))
        return _keys_page(request, form=form, status=400)
    # Post/redirect/get: reloading the page shows the list, it never makes a second key.
    request.session[_CREATED_KEY_SESSION] = {"raw_key": created.raw_key, "id": str(created.api_key.id)}
    return redirect("dashboard-keys")


@user_page
@require_POST
def key_revoke(request: SignedInRequest, key_id: uuid.UUID) -> HttpResponse:
    api_key = tenancy_selectors.api_key_for_user(user=request.user, key_id=str(key_id))
    if api_key is None:
        raise Http404("No such key")
    if not confirmed(request):
        return confirmation_page(
            request,
            None,
            None,
            title="Revoke this key?",
            message=f"Key {api_key.name or 'without a name'} ({api_key.prefix}…{api_key.last4}) stops "
            "working at "
            "once; agents using it get 401. This cannot be undone.",
            action=reverse("dashboard-key-revoke", args=[api_key.id]),
            button="Revoke key",
            cancel_url=reverse("dashboard-keys"),
            section="keys",
        )
    tenancy_services.api_key_revoke(api_key=api_key)
    messages.success(request, f"Key {api_key.prefix}…{api_key.last4} revoked.")
    return redirect("dashboard-keys")


def _routing_page(
    request: SignedInRequest,
    *,
    error: str | None = None,
    status: int = 200,
    rejected: dict[str, str] | None = None,
) -> HttpResponse:
    user_settings = tenancy_selectors.user_settings_get(user=request.user)
    orgs = [
        w for w in tenancy_selectors.workspaces_for_user(user=request.user) if w.kind == Workspace.Kind.ORG
    ]
    context = {
        "user_settings": user_settings,
        "orgs": orgs,
        "error": error,
        "mappings": tenancy_selectors.repo_owner_mappings_for_user(user=request.user),
        "modes": UserSettings.RoutingMode.values,
        # What a refused form held, shown again so nothing typed is lost.
        "rejected": rejected or {},
    }
    response = page(request, "dashboard/routing.html", None, None, context, section="routing")
    response.status_code = status
    return response


@user_page
@require_http_methods(["GET", "POST"])
def routing(request: SignedInRequest) -> HttpResponse:
    if request.method == "GET":
        return _routing_page(request)
    action = request.POST.get("action", "")
    try:
        if action == "mode":
            _routing_mode_apply(request)
        elif action == "map":
            form = forms.OwnerMappingForm(request.POST)
            if not form.is_valid():
                raise ValueError("owner and org are required (owner up to 39 characters)")
            org = tenancy_selectors.member_org_by_slug(
                user=request.user, slug=form.cleaned_data["org"].lower()
            )
            if org is None:
                raise ValueError(f"you are not a member of an organization {form.cleaned_data['org']!r}")
            tenancy_services.repo_owner_mapping_set(
                user=request.user, owner=form.cleaned_data["owner"], org=org
            )
        elif action == "unmap":
            if not confirmed(request):
                owner = request.POST.get("owner", "")[:60]
                return confirmation_page(
                    request,
                    None,
                    None,
                    title=f"Delete the mapping of {owner}?",
                    message=f"Memories of github.com/{owner}/… projects will be routed by the remaining "
                    "rules.",
                    action=reverse("dashboard-routing"),
                    button="Delete mapping",
                    cancel_url=reverse("dashboard-routing"),
                    section="routing",
                )
            tenancy_services.repo_owner_mapping_delete(
                user=request.user, owner=request.POST.get("owner", "")[:60]
            )
        else:
            raise ValueError("action must be mode, map or unmap")
    except ValueError as error:
        rejected = {
            "action": action,
            "owner": request.POST.get("owner", "")[:60],
            "org": request.POST.get("org", "")[:60],
        }
        return _routing_page(request, error=str(error), status=400, rejected=rejected)
    return redirect("dashboard-routing")


def _routing_mode_apply(request: SignedInRequest) -> None:
    form = forms.RoutingModeForm(request.POST)
    if not form.is_valid():
        raise ValueError(f"routing mode must be one of {', '.join(UserSettings.RoutingMode.values)}")
    slug = form.cleaned_data["active_org"]
    org = None
    if slug:
        org = tenancy_selectors.member_org_by_slug(user=request.user, slug=slug.lower())
        if org is None:
            raise ValueError(f"you are not a member of an organization {slug!r}")
    tenancy_services.routing_mode_set(user=request.user, mode=form.cleaned_data["mode"])
    tenancy_services.active_org_set(user=request.user, org=org)

"""Dashboard pages: thin function views (Healthchecks style). Each workspace page starts with one call that
checks membership (404 for outsiders, so another workspace's existence never leaks) and opens the workspace's
RLS transaction; writes go through tenancy / rollout services."""

from __future__ import annotations

import hashlib
import uuid
from datetime import timedelta
from typing import Any

from axes.helpers import get_client_ip_address
from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth.forms import UserCreationForm
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from config.errors import ApiError, error_response
from dashboard import forms, selectors
from dashboard.access import SignedInRequest, public_page, require_role, user_page, workspace_page
from graphsvc.models import ENTITY_TYPES
from memories.selectors import MemoryScope, pipeline_status, recent_pipeline_errors
from retrieval import search
from rollout import services as rollout_services
from rollout.models import RolloutConfig
from tenancy import policy
from tenancy import selectors as tenancy_selectors
from tenancy import services as tenancy_services
from tenancy.models import Membership, UserSettings, Workspace
from tenancy.ratelimit import rate_limit_hit
from tenancy.rls import workspace_context

MEMORY_PAGE_SIZE = 25
LIST_LIMIT = 100
FACT_LIMIT = 200
KEY_LIST_LIMIT = 200
TENANT_LIST_LIMIT = 50
MODE_HELP = {
    "off": (
        "Graph retrieval never runs: context/get answers from the baseline "
        "(lexical, semantic or hybrid) only."
    ),
    "shadow": (
        "The graph runs next to the baseline and is measured, but callers still get the baseline answer."
    ),
    "canary": "Hybrid requests get graph-expanded results; allowed only while the quality gate passes.",
}


# --- access -------------------------------------------------------------------------------------------------


def _page(
    request: SignedInRequest,
    template: str,
    workspace: Workspace | None,
    role: str | None,
    context: dict[str, Any],
    *,
    section: str = "",
) -> HttpResponse:
    workspaces = tenancy_selectors.workspaces_for_user(user=request.user)
    base = {
        "workspace": workspace,
        "role": role,
        "can_manage": policy.allows(role, policy.ADMIN),
        "section": section,
        "switcher": workspaces,
    }
    return render(request, template, {**base, **context})


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
    return _page(request, "dashboard/home.html", None, None, {"workspaces": workspaces, "tenants": tenants})


# --- graph explorer -----------------------------------------------------------------------------------------


def _float_param(request: SignedInRequest, name: str) -> float:
    raw = request.GET.get(name, "").strip()
    if not raw:
        return 0.0
    try:
        value = float(raw)
    except ValueError:
        raise _BadRequest(f"{name} must be a number between 0 and 1, got {raw[:40]!r}") from None
    if not 0.0 <= value <= 1.0:
        raise _BadRequest(f"{name} must be between 0 and 1, got {value}")
    return value


def _list_param(request: SignedInRequest, name: str) -> tuple[str, ...]:
    values = [v.strip() for raw in request.GET.getlist(name) for v in raw.split(",") if v.strip()]
    if len(values) > 50 or any(len(v) > 128 for v in values):
        raise _BadRequest(f"{name} takes at most 50 comma-separated values of up to 128 characters")
    return tuple(dict.fromkeys(values))


class _BadRequest(Exception):
    """A query parameter the explorer cannot use; its message says what to send instead."""


def graph_filters_from(request: SignedInRequest) -> selectors.GraphFilters:
    return selectors.GraphFilters(
        edge_types=_list_param(request, "graph_et"),
        node_types=_list_param(request, "graph_nt"),
        min_weight=_float_param(request, "graph_mw"),
        min_confidence=_float_param(request, "graph_mc"),
        evidence_only=request.GET.get("graph_ev", "") in {"1", "true", "on"},
    )


@workspace_page(policy.READ)
@require_GET
def explorer(request: SignedInRequest, workspace: Workspace, role: str) -> HttpResponse:
    with workspace_context(workspace.id):
        edge_types = selectors.graph_edge_types(workspace_id=workspace.id, limit=LIST_LIMIT)
        node_types = selectors.graph_node_types(workspace_id=workspace.id, limit=LIST_LIMIT)
    config = {
        "dataUrl": f"/w/{workspace.id}/graph/data/",
        "edgeUrl": f"/w/{workspace.id}/graph/edges/",
        "nodeUrl": f"/w/{workspace.id}/graph/node/",
        "defaultNodes": settings.DASHBOARD_EXPLORER_DEFAULT_NODES,
    }
    return _page(
        request,
        "dashboard/explorer.html",
        workspace,
        role,
        {"edge_types": edge_types, "node_types": node_types, "explorer_config": config},
        section="graph",
    )


@workspace_page(policy.READ)
@require_GET
def explorer_data(request: SignedInRequest, workspace: Workspace, role: str) -> HttpResponse:
    """Nodes and edges for Cytoscape: the top nodes, or the 1-hop view of graph_node_type/graph_node_key."""
    try:
        filters = graph_filters_from(request)
    except _BadRequest as error:
        return _json_error(request, "INVALID_FILTER", str(error))
    try:
        limit = int(request.GET.get("limit") or settings.DASHBOARD_EXPLORER_DEFAULT_NODES)
    except ValueError:
        limit = 0
    if not 1 <= limit <= settings.DASHBOARD_EXPLORER_MAX_NODES:
        return _json_error(
            request, "INVALID_LIMIT", f"limit must be between 1 and {settings.DASHBOARD_EXPLORER_MAX_NODES}"
        )
    node_type, node_key = request.GET.get("graph_node_type", ""), request.GET.get("graph_node_key", "")
    edge_limit = settings.DASHBOARD_EXPLORER_MAX_EDGES
    with workspace_context(workspace.id):
        if node_type and node_key:
            node = selectors.graph_node_get(
                workspace_id=workspace.id, node_type=node_type[:32], node_key=node_key[:600]
            )
            if node is None:
                return _json_error(
                    request,
                    "NODE_NOT_FOUND",
                    "No node with this graph_node_type and graph_node_key here.",
                    status=404,
                )
            view = selectors.graph_ego(
                workspace_id=workspace.id, node=node, filters=filters, edge_limit=edge_limit
            )
        else:
            view = selectors.graph_top(
                workspace_id=workspace.id, filters=filters, node_limit=limit, edge_limit=edge_limit
            )
    return JsonResponse(
        {"nodes": view.nodes, "edges": view.edges, "truncated": view.truncated, "focus": view.focus}
    )


def _json_error(request: SignedInRequest, code: str, message: str, *, status: int = 400) -> HttpResponse:
    # The SDK API's envelope, so a script reading graph/data handles errors the same way.
    return error_response(request, ApiError(status, code, message))


@workspace_page(policy.READ)
@require_GET
def explorer_edge(request: SignedInRequest, workspace: Workspace, role: str, edge_id: int) -> HttpResponse:
    """The selected-edge panel (an htmx partial)."""
    with workspace_context(workspace.id):
        edge = selectors.graph_edge_get(workspace_id=workspace.id, edge_id=edge_id)
        if edge is None:
            raise Http404("No such edge")
        evidence = (
            selectors.memory_get(workspace_id=workspace.id, memory_id=edge.evidence_memory_id)
            if edge.evidence_memory_id
            else None
        )
    return render(
        request,
        "dashboard/_edge_panel.html",
        {"workspace": workspace, "edge": edge, "evidence": evidence, "now": timezone.now()},
    )


@workspace_page(policy.READ)
@require_GET
def explorer_node(request: SignedInRequest, workspace: Workspace, role: str) -> HttpResponse:
    """Linked memories of the selected node (an htmx partial); the evidence memory of the selected edge is
    marked."""
    node_type, node_key = request.GET.get("graph_node_type", ""), request.GET.get("graph_node_key", "")
    with workspace_context(workspace.id):
        node = selectors.graph_node_get(
            workspace_id=workspace.id, node_type=node_type[:32], node_key=node_key[:600]
        )
        if node is None:
            raise Http404("No such node")
        memories = selectors.node_memories(
            workspace_id=workspace.id, node=node, limit=settings.DASHBOARD_LINKED_MEMORIES
        )
    return render(
        request,
        "dashboard/_node_panel.html",
        {
            "workspace": workspace,
            "node": node,
            "memories": memories,
            "evidence_id": request.GET.get("evidence", ""),
        },
    )


# --- rollout ------------------------------------------------------------------------------------------------


def _rollout_context(workspace: Workspace, role: str) -> dict[str, Any]:
    overview = rollout_services.rollout_overview(workspace_id=workspace.id)
    with workspace_context(workspace.id):
        errors = recent_pipeline_errors(workspace_id=workspace.id, limit=10)
    modes = [{"value": value, "help": MODE_HELP[value]} for value in RolloutConfig.Mode.values]
    return {
        "workspace": workspace,
        "overview": overview,
        "errors": errors,
        "modes": modes,
        "can_manage": policy.allows(role, policy.ADMIN),
    }


@workspace_page(policy.READ)
@require_GET
def rollout(request: SignedInRequest, workspace: Workspace, role: str) -> HttpResponse:
    context = _rollout_context(workspace, role)
    if request.headers.get("HX-Request"):
        return render(request, "dashboard/_rollout_panel.html", context)
    return _page(request, "dashboard/rollout.html", workspace, role, context, section="rollout")


@workspace_page(policy.ADMIN)
@require_POST
def rollout_mode(request: SignedInRequest, workspace: Workspace, role: str) -> HttpResponse:
    mode = request.POST.get("mode", "")
    blocked = None
    if mode not in RolloutConfig.Mode.values:
        blocked = f"mode must be one of {', '.join(RolloutConfig.Mode.values)}"
    else:
        try:
            rollout_services.rollout_mode_set(
                workspace_id=workspace.id,
                mode=mode,
                autopilot_enabled=None,
                updated_by=f"dashboard:{request.user.get_username()}",
            )
        except ApiError as error:
            blocked = error.message
    context = {**_rollout_context(workspace, role), "blocked": blocked}
    if request.headers.get("HX-Request"):
        # htmx swaps only 2xx answers by default; the blocked message must show, so it comes with a 200.
        return render(request, "dashboard/_rollout_panel.html", context)
    if blocked:
        response = _page(request, "dashboard/rollout.html", workspace, role, context, section="rollout")
        response.status_code = 409
        return response
    return redirect("dashboard-rollout", workspace_id=workspace.id)


# --- memories -----------------------------------------------------------------------------------------------


@workspace_page(policy.READ)
@require_GET
def memories(request: SignedInRequest, workspace: Workspace, role: str) -> HttpResponse:
    form = forms.MemorySearchForm(request.GET)
    if not form.is_valid():
        return _page(
            request,
            "dashboard/memories.html",
            workspace,
            role,
            {"form": form, "rows": []},
            section="memories",
        )
    data = form.cleaned_data
    trace, next_cursor = None, None
    with workspace_context(workspace.id):
        try:
            if data["q"]:
                outcome = search.memory_search(
                    workspace_id=workspace.id,
                    scope=MemoryScope(user_id=data["user_id"] or None, project_id=data["project_id"] or None),
                    query=data["q"],
                    limit=MEMORY_PAGE_SIZE,
                    strategy=data["strategy"] or "lexical",
                )
                rows, trace = outcome.memories, outcome.trace()
            else:
                rows, next_cursor = selectors.memory_page(
                    workspace_id=workspace.id, cursor=data["cursor"] or None, limit=MEMORY_PAGE_SIZE
                )
        except ApiError as error:
            form.add_error(None, error.message)
            rows = []
        statuses = pipeline_status(workspace_id=workspace.id, memory_ids=[row.id for row in rows])
    context = {
        "form": form,
        "rows": [(row, statuses.get(row.id)) for row in rows],
        "trace": trace,
        "next_cursor": next_cursor,
    }
    if request.headers.get("HX-Request"):
        # "Load more" swaps in just the next rows; a new search replaces the whole table.
        partial = "dashboard/_memory_page.html" if request.GET.get("page") else "dashboard/_memory_rows.html"
        return render(request, partial, {"workspace": workspace, **context})
    return _page(request, "dashboard/memories.html", workspace, role, context, section="memories")


@workspace_page(policy.READ)
@require_GET
def memory_detail(
    request: SignedInRequest, workspace: Workspace, role: str, memory_id: uuid.UUID
) -> HttpResponse:
    with workspace_context(workspace.id):
        memory = selectors.memory_get(workspace_id=workspace.id, memory_id=memory_id)
        if memory is None:
            raise Http404("No such memory")
        status = pipeline_status(workspace_id=workspace.id, memory_ids=[memory.id]).get(memory.id)
        links = selectors.memory_graph_links(workspace_id=workspace.id, memory_id=memory.id, limit=LIST_LIMIT)
        edges = selectors.memory_evidence_edges(
            workspace_id=workspace.id, memory_id=memory.id, limit=LIST_LIMIT
        )
    return _page(
        request,
        "dashboard/memory_detail.html",
        workspace,
        role,
        {"memory": memory, "pipeline": status, "links": links, "edges": edges},
        section="memories",
    )


# --- entities, facts, communities ---------------------------------------------------------------------------


@workspace_page(policy.READ)
@require_GET
def entities(request: SignedInRequest, workspace: Workspace, role: str) -> HttpResponse:
    query = request.GET.get("q", "").strip()[:200]
    raw_type = request.GET.get("type", "")
    entity_type = raw_type if raw_type in ENTITY_TYPES else None
    with workspace_context(workspace.id):
        rows = selectors.entity_list(
            workspace_id=workspace.id, query=query, entity_type=entity_type, limit=LIST_LIMIT
        )
    return _page(
        request,
        "dashboard/entities.html",
        workspace,
        role,
        {"rows": rows, "q": query, "type": entity_type or "", "types": ENTITY_TYPES},
        section="entities",
    )


@workspace_page(policy.READ)
@require_GET
def entity_detail(request: SignedInRequest, workspace: Workspace, role: str, node_id: int) -> HttpResponse:
    include_invalid = request.GET.get("all") == "1"
    with workspace_context(workspace.id):
        entity = selectors.entity_get(workspace_id=workspace.id, node_id=node_id)
        if entity is None:
            raise Http404("No such entity")
        aliases = selectors.entity_aliases(workspace_id=workspace.id, node=entity, limit=LIST_LIMIT)
        facts = selectors.fact_list(
            workspace_id=workspace.id, node=entity, include_invalid=include_invalid, limit=FACT_LIMIT
        )
    return _page(
        request,
        "dashboard/entity_detail.html",
        workspace,
        role,
        {"entity": entity, "aliases": aliases, "facts": facts, "include_invalid": include_invalid},
        section="entities",
    )


@workspace_page(policy.READ)
@require_GET
def facts(request: SignedInRequest, workspace: Workspace, role: str) -> HttpResponse:
    query = request.GET.get("q", "").strip()[:200]
    include_invalid = request.GET.get("all") == "1"
    with workspace_context(workspace.id):
        rows = selectors.fact_list(
            workspace_id=workspace.id, query=query, include_invalid=include_invalid, limit=FACT_LIMIT
        )
    return _page(
        request,
        "dashboard/facts.html",
        workspace,
        role,
        {"facts": rows, "q": query, "include_invalid": include_invalid},
        section="facts",
    )


@workspace_page(policy.READ)
@require_GET
def communities(request: SignedInRequest, workspace: Workspace, role: str) -> HttpResponse:
    with workspace_context(workspace.id):
        rows = selectors.community_list(workspace_id=workspace.id, limit=LIST_LIMIT, member_limit=20)
    return _page(
        request, "dashboard/communities.html", workspace, role, {"rows": rows}, section="communities"
    )


# --- members ------------------------------------------------------------------------------------------------


def _members_page(
    request: SignedInRequest,
    workspace: Workspace,
    role: str,
    *,
    error: str | None = None,
    form: forms.MemberAddForm | None = None,
    status: int = 200,
) -> HttpResponse:
    context = {
        "members": tenancy_selectors.memberships_for_workspace(workspace=workspace),
        "form": form or forms.MemberAddForm(),
        "error": error,
        "roles": Membership.Role.values,
        "invitations": tenancy_selectors.invitations_pending_for_org(org=workspace),
    }
    response = _page(request, "dashboard/members.html", workspace, role, context, section="members")
    response.status_code = status
    return response


@workspace_page(policy.READ)
@require_http_methods(["GET", "POST"])
def members(request: SignedInRequest, workspace: Workspace, role: str) -> HttpResponse:
    """The member list (read); POST invites someone (admin): they become a member when they accept."""
    if request.method == "GET":
        return _members_page(request, workspace, role)
    require_role(role, policy.ADMIN, "Only owners and admins can invite members.")
    form = forms.MemberAddForm(request.POST)
    if not form.is_valid():
        return _members_page(request, workspace, role, form=form, status=400)
    new_role = form.cleaned_data["role"]
    if new_role == Membership.Role.OWNER:
        require_role(role, policy.OWNER, "Only owners can invite owners.")
    user = tenancy_selectors.user_find(identifier=form.cleaned_data["identifier"])
    if user is None:
        return _members_page(
            request,
            workspace,
            role,
            form=form,
            status=400,
            error="No single active user has this username or e-mail; check the spelling.",
        )
    try:
        tenancy_services.invitation_create(org=workspace, user=user, role=new_role, invited_by=request.user)
    except ValueError as error:
        return _members_page(request, workspace, role, form=form, status=400, error=str(error))
    return redirect("dashboard-members", workspace_id=workspace.id)


@workspace_page(policy.ADMIN)
@require_POST
def invitation_cancel(
    request: SignedInRequest, workspace: Workspace, role: str, invitation_id: int
) -> HttpResponse:
    invitation = tenancy_selectors.invitation_get(invitation_id=invitation_id)
    if invitation is None or invitation.org_id != workspace.id:
        raise Http404("No such invitation")
    tenancy_services.invitation_cancel(invitation=invitation)
    return redirect("dashboard-members", workspace_id=workspace.id)


def _target_member(workspace: Workspace, actor_role: str, user_id: int) -> Any:
    membership = (
        Membership.objects.select_related("user").filter(workspace=workspace, user_id=user_id).first()
    )
    if membership is None:
        raise Http404("No such member")
    # Admins manage members and admins; only owners touch owners.
    if membership.role == Membership.Role.OWNER and actor_role != Membership.Role.OWNER:
        raise PermissionDenied("Only owners can change owners.")
    return membership.user


@workspace_page(policy.ADMIN)
@require_POST
def member_role(request: SignedInRequest, workspace: Workspace, role: str, user_id: int) -> HttpResponse:
    user = _target_member(workspace, role, user_id)
    form = forms.MemberRoleForm(request.POST)
    if not form.is_valid():
        return _members_page(
            request,
            workspace,
            role,
            status=400,
            error=f"role must be one of {', '.join(Membership.Role.values)}",
        )
    if form.cleaned_data["role"] == Membership.Role.OWNER and role != Membership.Role.OWNER:
        raise PermissionDenied("Only owners can make owners.")
    try:
        tenancy_services.membership_role_change(org=workspace, user=user, role=form.cleaned_data["role"])
    except ValueError as error:
        return _members_page(request, workspace, role, status=400, error=str(error))
    return redirect("dashboard-members", workspace_id=workspace.id)


@workspace_page(policy.ADMIN)
@require_POST
def member_remove(request: SignedInRequest, workspace: Workspace, role: str, user_id: int) -> HttpResponse:
    user = _target_member(workspace, role, user_id)
    try:
        tenancy_services.membership_remove(org=workspace, user=user)
    except ValueError as error:
        return _members_page(request, workspace, role, status=400, error=str(error))
    return redirect("dashboard-members", workspace_id=workspace.id)


# --- invitations (per user) ---------------------------------------------------------------------------------


@user_page
@require_http_methods(["GET", "POST"])
def invitations(request: SignedInRequest) -> HttpResponse:
    """The signed-in user's pending invitations; POST accepts or declines one."""
    error = None
    if request.method == "POST":
        invitation = tenancy_selectors.invitation_get(
            invitation_id=_int_or_zero(request.POST.get("invitation"))
        )
        if invitation is None or invitation.user_id != request.user.pk:
            raise Http404("No such invitation")
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
    response = _page(request, "dashboard/invitations.html", None, None, context, section="invitations")
    if error:
        response.status_code = 400
    return response


def _int_or_zero(raw: str | None) -> int:
    try:
        return int(raw or 0)
    except ValueError:
        return 0


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
    response = _page(
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
    tenancy_services.api_key_revoke(api_key=api_key)
    return redirect("dashboard-keys")


def _routing_page(request: SignedInRequest, *, error: str | None = None, status: int = 200) -> HttpResponse:
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
    }
    response = _page(request, "dashboard/routing.html", None, None, context, section="routing")
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
            tenancy_services.repo_owner_mapping_delete(
                user=request.user, owner=request.POST.get("owner", "")[:60]
            )
        else:
            raise ValueError("action must be mode, map or unmap")
    except ValueError as error:
        return _routing_page(request, error=str(error), status=400)
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

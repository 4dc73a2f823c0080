"""Which workspace a call acts in, and with what role: the caller's key plus the call's scope (tenantId, repo
routing), decided here once for every surface that takes a scope (the SDK routers and the MCP tools).

The role is the policy's (tenancy.policy): the user's role in the target workspace, never more than the key's
scope. A key pinned to a workspace acts there and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import User
from django.http import HttpRequest

from config.errors import ApiError
from config.schemas import ScopeIn
from tenancy import policy, selectors
from tenancy.auth import SdkCaller
from tenancy.caller import PinnedWorkspace
from tenancy.models import UserSettings, Workspace
from tenancy.routing import github_owner_from_project
from tenancy.services import tenant_workspace_resolve, workspace_for_scope


@dataclass(frozen=True)
class Access:
    workspace_id: int
    # The effective role (policy.READ … OWNER); None means no role at all.
    role: str | None


def caller_access(caller: SdkCaller, scope: ScopeIn) -> Access:
    if caller.pin is not None:
        workspace_id, user_role = _pinned(caller.pin, scope)
    else:
        workspace_id, user_role = _routed(caller, scope)
    return Access(workspace_id=workspace_id, role=policy.weaker(user_role, caller.key_scope))


def authorize(caller: SdkCaller, scope: ScopeIn, *, role: str) -> int:
    """The workspace of the scope, once the caller holds `role` there; 403 FORBIDDEN_ROLE otherwise."""
    access = caller_access(caller, scope)
    if not policy.allows(access.role, role):
        raise policy.forbidden(role, access.role)
    return access.workspace_id


def request_workspace_id(request: HttpRequest, scope: ScopeIn, *, at_least: str | None = None) -> int:
    """authorize() for the role the route declared with policy.requires, or the stronger `at_least` where a
    route's own options ask for more (a bulk forget across every end user needs admin)."""
    role = getattr(request, "cairn_required_role", None)
    if role not in policy.ROLES:
        # A route that resolves a workspace must have declared the role it needs (the meta-test checks it).
        raise RuntimeError(f"{request.path} declared no workspace role")
    if at_least is not None and policy.level(at_least) > policy.level(role):
        role = at_least
    caller: SdkCaller = request.auth  # type: ignore[attr-defined]
    workspace_id = authorize(caller, scope, role=role)
    request.cairn_workspace_id = workspace_id  # type: ignore[attr-defined]  # for the request log line
    return workspace_id


def user_role_in(*, user: User, workspace: Workspace) -> str | None:
    """The user's role in a workspace, as the policy names roles (an SDK tenant: its parent's)."""
    return policy.role_of_membership(selectors.workspace_role(user=user, workspace=workspace))


def _pinned(pin: PinnedWorkspace, scope: ScopeIn) -> tuple[int, str | None]:
    if pin.membership_role is None:
        raise ApiError(
            404,
            "WORKSPACE_NOT_FOUND",
            "The workspace this key is pinned to is not one you belong to (any more).",
        )
    if scope.tenantId and not (pin.kind == Workspace.Kind.SDK_TENANT and pin.tenant_id == scope.tenantId):
        raise ApiError(
            403,
            "KEY_PINNED",
            "This key is pinned to one workspace and cannot reach another through tenantId; leave tenantId "
            "out or use a key that is not pinned.",
            details={"tenantId": scope.tenantId},
        )
    return pin.id, policy.role_of_membership(pin.membership_role)


def _routed(caller: SdkCaller, scope: ScopeIn) -> tuple[int, str | None]:
    """The routing rules of tenancy.services.workspace_for_scope, deciding from what the auth statement
    already read: only a GitHub projectId in auto mode (owner mappings, org slugs) or a workspace still to be
    provisioned takes the full path, so the common calls cost at most the tenant lookup."""
    user, tenant_id, project_id = caller.user, scope.tenantId, scope.projectId
    auto_project = caller.routing_mode == UserSettings.RoutingMode.AUTO and bool(project_id) and not tenant_id
    if auto_project and github_owner_from_project(project_id) is not None:
        workspace = workspace_for_scope(user=user, tenant_id=tenant_id, project_id=project_id)
        return workspace.id, user_role_in(user=user, workspace=workspace)
    routed_role: str | None
    if auto_project or caller.active_org_id is None:
        routed, routed_role = caller.personal_workspace_id, policy.OWNER
    else:
        routed, routed_role = caller.active_org_id, policy.role_of_membership(caller.active_org_role)
    if routed is None:
        workspace = workspace_for_scope(user=user, tenant_id=tenant_id, project_id=project_id)
        return workspace.id, user_role_in(user=user, workspace=workspace)
    if not tenant_id:
        return routed, routed_role
    existing = (
        Workspace.objects.filter(kind=Workspace.Kind.SDK_TENANT, parent_id=routed, tenant_id=tenant_id)
        .values_list("id", flat=True)
        .first()
    )
    if existing is not None:
        return existing, routed_role
    return tenant_workspace_resolve(user=user, tenant_id=tenant_id).id, routed_role

"""Which workspace a call acts in: the caller's key plus the call's scope (tenantId, repo routing), decided here
once for every surface that takes a scope (the SDK routers and the MCP tools)."""

from __future__ import annotations

from django.http import HttpRequest

from config.schemas import ScopeIn
from tenancy.auth import SdkCaller
from tenancy.services import caller_workspace_id


def scope_workspace_id(caller: SdkCaller, scope: ScopeIn) -> int:
    return caller_workspace_id(
        user=caller.user,
        routing_mode=caller.routing_mode,
        active_org_id=caller.active_org_id,
        personal_workspace_id=caller.personal_workspace_id,
        tenant_id=scope.tenantId,
        project_id=scope.projectId,
    )


def request_workspace_id(request: HttpRequest, scope: ScopeIn) -> int:
    caller: SdkCaller = request.auth  # type: ignore[attr-defined]
    workspace_id = scope_workspace_id(caller, scope)
    request.cairn_workspace_id = workspace_id  # type: ignore[attr-defined]  # for the request log line
    return workspace_id

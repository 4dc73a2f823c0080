"""Organization members and invitations: read for everyone, changes for admins (owners for owners); removing
someone and cancelling an invitation are confirmed first."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from dashboard import forms
from dashboard.access import SignedInRequest, require_role, workspace_page
from dashboard.views.common import confirmation_page, confirmed, page
from tenancy import policy
from tenancy import selectors as tenancy_selectors
from tenancy import services as tenancy_services
from tenancy.models import Membership, Workspace

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
    return page(request, "dashboard/members.html", workspace, role, context, section="members", status=status)


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
    if not confirmed(request):
        return confirmation_page(
            request,
            workspace,
            role,
            title=f"Cancel the invitation of {invitation.user.get_username()}?",
            message="They will no longer be able to accept it.",
            action=reverse("dashboard-invitation-cancel", args=[workspace.id, invitation.id]),
            button="Cancel invitation",
            cancel_url=reverse("dashboard-members", args=[workspace.id]),
            section="members",
        )
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
    if not confirmed(request):
        return confirmation_page(
            request,
            workspace,
            role,
            title=f"Remove {user.get_username()} from {workspace.name}?",
            message="Their access ends at once, their keys included; memories they wrote stay in the "
            "workspace.",
            action=reverse("dashboard-member-remove", args=[workspace.id, user.id]),
            button="Remove member",
            cancel_url=reverse("dashboard-members", args=[workspace.id]),
            section="members",
        )
    try:
        tenancy_services.membership_remove(org=workspace, user=user)
    except ValueError as error:
        return _members_page(request, workspace, role, status=400, error=str(error))
    return redirect("dashboard-members", workspace_id=workspace.id)

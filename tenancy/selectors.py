"""Reads on the control plane."""

from __future__ import annotations

from django.contrib.auth.models import User

from tenancy.models import ApiKey, Invitation, Membership, RepoOwnerMapping, UserSettings, Workspace


def personal_workspace_get(*, user: User) -> Workspace | None:
    return Workspace.objects.filter(kind=Workspace.Kind.PERSONAL, personal_owner=user).first()


def user_settings_get(*, user: User) -> UserSettings:
    user_settings = UserSettings.objects.select_related("active_org").filter(user=user).first()
    return user_settings or UserSettings(user=user)


def is_member(*, user: User, workspace: Workspace) -> bool:
    return Membership.objects.filter(user=user, workspace=workspace).exists()


def mapped_org_for_owner(*, user: User, owner: str) -> Workspace | None:
    mapping = (
        RepoOwnerMapping.objects.select_related("org")
        .filter(user=user, owner=owner, org__memberships__user=user)
        .first()
    )
    return mapping.org if mapping else None


def member_org_by_slug(*, user: User, slug: str) -> Workspace | None:
    return Workspace.objects.filter(kind=Workspace.Kind.ORG, slug=slug, memberships__user=user).first()


def org_by_slug(*, slug: str) -> Workspace | None:
    return Workspace.objects.filter(kind=Workspace.Kind.ORG, slug=slug).first()


def workspaces_for_user(*, user: User) -> list[Workspace]:
    return list(Workspace.objects.filter(memberships__user=user).order_by("kind", "slug", "id"))


def user_find(*, identifier: str) -> User | None:
    """A user by exact username, else by e-mail (case-insensitive); None when absent or the e-mail is
    shared."""
    from django.contrib.auth import get_user_model

    model = get_user_model()
    identifier = identifier.strip()
    if not identifier:
        return None
    user = model.objects.filter(username=identifier, is_active=True).first()
    if user is not None or "@" not in identifier:
        return user
    matches = list(model.objects.filter(email__iexact=identifier, is_active=True)[:2])
    return matches[0] if len(matches) == 1 else None


def workspace_role(*, user: User, workspace: Workspace) -> str | None:
    """The user's role in a workspace; an SDK tenant inherits the role its parent workspace gives."""
    target = workspace.parent if workspace.kind == Workspace.Kind.SDK_TENANT else workspace
    if target is None:
        return None
    return Membership.objects.filter(user=user, workspace=target).values_list("role", flat=True).first()


def memberships_for_workspace(*, workspace: Workspace) -> list[Membership]:
    return list(
        Membership.objects.select_related("user")
        .filter(workspace=workspace)
        .order_by("role", "user__username")
    )


def tenants_for_workspaces(*, workspaces: list[Workspace], limit: int) -> list[Workspace]:
    return list(
        Workspace.objects.filter(kind=Workspace.Kind.SDK_TENANT, parent__in=workspaces).order_by(
            "parent_id", "tenant_id"
        )[:limit]
    )


def api_keys_for_user(*, user: User, limit: int, pinned_to: int | None = None) -> list[ApiKey]:
    """The user's keys; with `pinned_to`, only those pinned to that workspace (what a pinned key may see)."""
    keys = ApiKey.objects.filter(user=user)
    if pinned_to is not None:
        keys = keys.filter(workspace_id=pinned_to)
    return list(keys.order_by("revoked_at", "-created_at")[:limit])


def api_key_for_user(*, user: User, key_id: str, pinned_to: int | None = None) -> ApiKey | None:
    keys = ApiKey.objects.filter(user=user, id=key_id)
    if pinned_to is not None:
        keys = keys.filter(workspace_id=pinned_to)
    return keys.first()


def repo_owner_mappings_for_user(*, user: User) -> list[RepoOwnerMapping]:
    return list(RepoOwnerMapping.objects.select_related("org").filter(user=user).order_by("owner"))


def invitations_pending_for_user(*, user: User) -> list[Invitation]:
    return list(
        Invitation.objects.select_related("org", "invited_by")
        .filter(user=user, status=Invitation.Status.PENDING)
        .order_by("-created_at")
    )


def invitations_pending_for_org(*, org: Workspace) -> list[Invitation]:
    return list(
        Invitation.objects.select_related("user", "invited_by")
        .filter(org=org, status=Invitation.Status.PENDING)
        .order_by("-created_at")
    )


def invitation_get(*, invitation_id: int) -> Invitation | None:
    return Invitation.objects.select_related("org").filter(pk=invitation_id).first()

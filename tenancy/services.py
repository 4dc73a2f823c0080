"""Writes on the control plane: workspaces, memberships, keys, routing, SDK-tenant provisioning."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone

from config.errors import ApiError
from tenancy import policy, selectors
from tenancy.models import ApiKey, Invitation, Membership, RepoOwnerMapping, UserSettings, Workspace
from tenancy.routing import MAX_OWNER_MAPPINGS, github_owner_from_project, normalize_owner

API_KEY_PREFIX = "mem_"
MAX_PENDING_INVITATIONS = 200
KEY_LIST_LIMIT = 200


class KeyLimitReached(ValueError):
    """The user already has as many active keys as one user may."""


def personal_workspace_ensure(*, user: User) -> Workspace:
    with transaction.atomic(using="app"):
        workspace, _ = Workspace.objects.get_or_create(
            personal_owner=user,
            defaults={"kind": Workspace.Kind.PERSONAL, "name": f"{user.get_username()} (personal)"},
        )
        Membership.objects.get_or_create(
            workspace=workspace, user=user, defaults={"role": Membership.Role.OWNER}
        )
        UserSettings.objects.get_or_create(user=user)
    return workspace


def org_create(*, owner: User, slug: str, name: str | None = None) -> Workspace:
    slug = normalize_owner(slug)
    with transaction.atomic(using="app"):
        if Workspace.objects.filter(kind=Workspace.Kind.ORG, slug=slug).exists():
            raise ValueError(f"an organization with slug {slug!r} already exists")
        org = Workspace.objects.create(kind=Workspace.Kind.ORG, slug=slug, name=name or slug)
        Membership.objects.create(workspace=org, user=owner, role=Membership.Role.OWNER)
    return org


def membership_set(*, org: Workspace, user: User, role: str) -> Membership:
    if org.kind != Workspace.Kind.ORG:
        raise ValueError("members can only be added to organization workspaces")
    if role not in Membership.Role.values:
        raise ValueError(f"role must be one of {', '.join(Membership.Role.values)}")
    membership, _ = Membership.objects.update_or_create(workspace=org, user=user, defaults={"role": role})
    return membership


# --- API keys -----------------------------------------------------------------------------------------------


def api_key_hash(raw_key: str) -> str:
    # Keys carry 256 random bits, so a fast hash is enough; only the hash is stored.
    return hashlib.sha256(raw_key.encode()).hexdigest()


@dataclass(frozen=True)
class CreatedApiKey:
    api_key: ApiKey
    raw_key: str


def api_key_create(
    *,
    user: User,
    expires_at: datetime | None = None,
    name: str = "",
    created_via: str = "command",
    scope: str = policy.DEFAULT_KEY_SCOPE,
    workspace: Workspace | None = None,
) -> CreatedApiKey:
    """A new key, shown once. `scope` caps what it may do (read, write, admin); `workspace` pins it to one
    workspace the user belongs to. Either way the key never does more than its user's role allows."""
    now = timezone.now()
    if expires_at is None:
        expires_at = now + timedelta(days=settings.API_KEY_DEFAULT_EXPIRY_DAYS)
    if expires_at <= now:
        raise ValueError("expires_at must be in the future")
    if expires_at > now + timedelta(days=settings.API_KEY_MAX_EXPIRY_DAYS):
        raise ValueError(f"keys expire within {settings.API_KEY_MAX_EXPIRY_DAYS} days at most")
    if scope not in policy.KEY_SCOPES:
        raise ValueError(f"scope must be one of {', '.join(policy.KEY_SCOPES)}")
    if workspace is not None and selectors.workspace_role(user=user, workspace=workspace) is None:
        raise ValueError(f"{user.get_username()} is not a member of the workspace to pin the key to")
    active = ApiKey.objects.filter(user=user, revoked_at__isnull=True, expires_at__gt=now).count()
    if active >= settings.MAX_ACTIVE_KEYS_PER_USER:
        raise KeyLimitReached(f"You already have {active} active keys; revoke one before creating another.")
    raw_key = API_KEY_PREFIX + secrets.token_hex(32)
    api_key = ApiKey.objects.create(
        user=user,
        name=name[:100],
        key_hash=api_key_hash(raw_key),
        prefix=raw_key[:12],
        last4=raw_key[-4:],
        expires_at=expires_at,
        created_via=created_via,
        scope=scope,
        workspace=workspace,
    )
    return CreatedApiKey(api_key=api_key, raw_key=raw_key)


def api_key_revoke(*, api_key: ApiKey) -> ApiKey:
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at"])
    return api_key


# --- Repo routing settings ----------------------------------------------------------------------------------


def routing_mode_set(*, user: User, mode: str) -> UserSettings:
    if mode not in UserSettings.RoutingMode.values:
        raise ValueError(f"routing mode must be one of {', '.join(UserSettings.RoutingMode.values)}")
    user_settings, _ = UserSettings.objects.get_or_create(user=user)
    user_settings.routing_mode = mode
    user_settings.save(update_fields=["routing_mode"])
    return user_settings


def active_org_set(*, user: User, org: Workspace | None) -> UserSettings:
    if org is not None and not selectors.is_member(user=user, workspace=org):
        raise ValueError(f"{user.get_username()} is not a member of {org.slug}")
    user_settings, _ = UserSettings.objects.get_or_create(user=user)
    user_settings.active_org = org
    user_settings.save(update_fields=["active_org"])
    return user_settings


def repo_owner_mapping_set(*, user: User, owner: str, org: Workspace) -> RepoOwnerMapping:
    owner = normalize_owner(owner)
    if org.kind != Workspace.Kind.ORG:
        raise ValueError("repo owners can only be mapped to organization workspaces")
    if not selectors.is_member(user=user, workspace=org):
        raise ValueError(f"{user.get_username()} is not a member of {org.slug}")
    with transaction.atomic(using="app"):
        existing = RepoOwnerMapping.objects.select_for_update().filter(user=user)
        if not existing.filter(owner=owner).exists() and existing.count() >= MAX_OWNER_MAPPINGS:
            raise ValueError(f"at most {MAX_OWNER_MAPPINGS} repo owner mappings per user")
        mapping, _ = RepoOwnerMapping.objects.update_or_create(user=user, owner=owner, defaults={"org": org})
    return mapping


def repo_owner_mapping_delete(*, user: User, owner: str) -> int:
    deleted, _ = RepoOwnerMapping.objects.filter(user=user, owner=normalize_owner(owner)).delete()
    return deleted


# --- Scope → workspace --------------------------------------------------------------------------------------


def routed_workspace(*, user: User, project_id: str | None) -> Workspace:
    """The personal or org workspace a call without tenantId lands in: in auto mode a github.com projectId
    goes to the org its owner maps to (or is the slug of) when the user is a member; else the active org, else
    the personal workspace."""
    user_settings = selectors.user_settings_get(user=user)
    if user_settings.routing_mode == UserSettings.RoutingMode.AUTO and project_id:
        owner = github_owner_from_project(project_id)
        if owner is None:
            return personal_workspace(user=user)
        mapped = selectors.mapped_org_for_owner(user=user, owner=owner)
        if mapped is not None:
            return mapped
        by_slug = selectors.member_org_by_slug(user=user, slug=owner)
        if by_slug is not None:
            return by_slug
        return personal_workspace(user=user)
    active = user_settings.active_org
    if active is not None and selectors.is_member(user=user, workspace=active):
        return active
    return personal_workspace(user=user)


def personal_workspace(*, user: User) -> Workspace:
    """The user's personal workspace: one read on the hot path, created only for users that predate it."""
    return selectors.personal_workspace_get(user=user) or personal_workspace_ensure(user=user)


def tenant_workspace_resolve(*, user: User, tenant_id: str) -> Workspace:
    """The SDK-tenant workspace for tenantId under the caller's own workspace, provisioned on first use."""
    parent = routed_workspace(user=user, project_id=None)
    existing = Workspace.objects.filter(
        kind=Workspace.Kind.SDK_TENANT, parent=parent, tenant_id=tenant_id
    ).first()
    if existing is not None:
        return existing
    if not settings.SDK_AUTO_PROVISION_TENANTS:
        raise ApiError(
            404,
            "TENANT_NOT_FOUND",
            f"No workspace exists for tenantId {tenant_id!r} and automatic provisioning is off.",
            details={"tenantId": tenant_id},
        )
    if Workspace.objects.filter(kind=Workspace.Kind.SDK_TENANT, parent=parent).count() >= (
        settings.MAX_TENANT_WORKSPACES_PER_OWNER
    ):
        raise ApiError(
            409,
            "TENANT_LIMIT_REACHED",
            f"This workspace already has {settings.MAX_TENANT_WORKSPACES_PER_OWNER} tenants; "
            "reuse a tenantId or raise MAX_TENANT_WORKSPACES_PER_OWNER.",
        )
    try:
        with transaction.atomic(using="app"):
            return Workspace.objects.create(
                kind=Workspace.Kind.SDK_TENANT, parent=parent, tenant_id=tenant_id, name=f"tenant {tenant_id}"
            )
    except IntegrityError:
        # Another request provisioned the same tenant a moment ago.
        return Workspace.objects.get(kind=Workspace.Kind.SDK_TENANT, parent=parent, tenant_id=tenant_id)


def workspace_for_scope(*, user: User, tenant_id: str | None, project_id: str | None) -> Workspace:
    if tenant_id:
        return tenant_workspace_resolve(user=user, tenant_id=tenant_id)
    return routed_workspace(user=user, project_id=project_id)


# --- Members (dashboard) ------------------------------------------------------------------------------------


def _owner_count(*, org: Workspace) -> int:
    return Membership.objects.filter(workspace=org, role=Membership.Role.OWNER).count()


def membership_role_change(*, org: Workspace, user: User, role: str) -> Membership:
    """Change an existing member's role; an org always keeps at least one owner."""
    if role not in Membership.Role.values:
        raise ValueError(f"role must be one of {', '.join(Membership.Role.values)}")
    with transaction.atomic(using="app"):
        # Locking the org's owner rows makes two concurrent demotions of the last two owners wait for each
        # other.
        list(Membership.objects.select_for_update().filter(workspace=org, role=Membership.Role.OWNER))
        membership = Membership.objects.select_for_update().filter(workspace=org, user=user).first()
        if membership is None:
            raise ValueError(f"{user.get_username()} is not a member of {org.slug}")
        if (
            membership.role == Membership.Role.OWNER
            and role != Membership.Role.OWNER
            and _owner_count(org=org) <= 1
        ):
            raise ValueError("an organization needs at least one owner: make someone else owner first")
        membership.role = role
        membership.save(update_fields=["role"])
    return membership


def membership_remove(*, org: Workspace, user: User) -> None:
    """Remove a member, never the last owner; their repo mappings and active org to this org go with them."""
    with transaction.atomic(using="app"):
        list(Membership.objects.select_for_update().filter(workspace=org, role=Membership.Role.OWNER))
        membership = Membership.objects.select_for_update().filter(workspace=org, user=user).first()
        if membership is None:
            raise ValueError(f"{user.get_username()} is not a member of {org.slug}")
        if membership.role == Membership.Role.OWNER and _owner_count(org=org) <= 1:
            raise ValueError("an organization needs at least one owner: make someone else owner first")
        membership.delete()
        RepoOwnerMapping.objects.filter(user=user, org=org).delete()
        UserSettings.objects.filter(user=user, active_org=org).update(active_org=None)


# --- Invitations: membership by consent ---------------------------------------------------------------------


def invitation_create(*, org: Workspace, user: User, role: str, invited_by: User | None) -> Invitation:
    """Offer membership; nothing routes to the org for this user until they accept."""
    if org.kind != Workspace.Kind.ORG:
        raise ValueError("only organizations have members")
    if role not in Membership.Role.values:
        raise ValueError(f"role must be one of {', '.join(Membership.Role.values)}")
    if selectors.is_member(user=user, workspace=org):
        raise ValueError(f"{user.get_username()} is already a member; change their role instead")
    with transaction.atomic(using="app"):
        if (
            Invitation.objects.filter(org=org, status=Invitation.Status.PENDING).count()
            >= MAX_PENDING_INVITATIONS
        ):
            raise ValueError(
                f"{org.slug} already has {MAX_PENDING_INVITATIONS} pending invitations; cancel some first"
            )
        try:
            with transaction.atomic(using="app"):
                return Invitation.objects.create(org=org, user=user, role=role, invited_by=invited_by)
        except IntegrityError:
            raise ValueError(
                f"{user.get_username()} already has a pending invitation to {org.slug}"
            ) from None


def invitation_accept(*, invitation: Invitation, user: User) -> Membership:
    with transaction.atomic(using="app"):
        locked = _pending_for(invitation=invitation, user=user)
        membership, _ = Membership.objects.get_or_create(
            workspace_id=locked.org_id, user=user, defaults={"role": locked.role}
        )
        locked.status, locked.decided_at = Invitation.Status.ACCEPTED, timezone.now()
        locked.save(update_fields=["status", "decided_at"])
    return membership


def invitation_decline(*, invitation: Invitation, user: User) -> None:
    with transaction.atomic(using="app"):
        locked = _pending_for(invitation=invitation, user=user)
        locked.status, locked.decided_at = Invitation.Status.DECLINED, timezone.now()
        locked.save(update_fields=["status", "decided_at"])


def invitation_cancel(*, invitation: Invitation) -> None:
    Invitation.objects.filter(pk=invitation.pk, status=Invitation.Status.PENDING).update(
        status=Invitation.Status.CANCELLED, decided_at=timezone.now()
    )


def _pending_for(*, invitation: Invitation, user: User) -> Invitation:
    locked = Invitation.objects.select_for_update().filter(pk=invitation.pk, user=user).first()
    if locked is None or locked.status != Invitation.Status.PENDING:
        raise ValueError("this invitation is no longer pending")
    return locked

"""Reads on the control plane."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser

from tenancy.models import ApiKey, Membership, RepoOwnerMapping, UserSettings, Workspace


def api_key_by_hash(*, key_hash: str) -> ApiKey | None:
    return ApiKey.objects.select_related("user").filter(key_hash=key_hash).first()


def personal_workspace_get(*, user: AbstractBaseUser) -> Workspace | None:
    return Workspace.objects.filter(kind=Workspace.Kind.PERSONAL, personal_owner=user).first()


def user_settings_get(*, user: AbstractBaseUser) -> UserSettings:
    user_settings = UserSettings.objects.select_related("active_org").filter(user=user).first()
    return user_settings or UserSettings(user=user)


def is_member(*, user: AbstractBaseUser, workspace: Workspace) -> bool:
    return Membership.objects.filter(user=user, workspace=workspace).exists()


def mapped_org_for_owner(*, user: AbstractBaseUser, owner: str) -> Workspace | None:
    mapping = (
        RepoOwnerMapping.objects.select_related("org")
        .filter(user=user, owner=owner, org__memberships__user=user)
        .first()
    )
    return mapping.org if mapping else None


def member_org_by_slug(*, user: AbstractBaseUser, slug: str) -> Workspace | None:
    return Workspace.objects.filter(kind=Workspace.Kind.ORG, slug=slug, memberships__user=user).first()


def org_by_slug(*, slug: str) -> Workspace | None:
    return Workspace.objects.filter(kind=Workspace.Kind.ORG, slug=slug).first()


def workspaces_for_user(*, user: AbstractBaseUser) -> list[Workspace]:
    return list(Workspace.objects.filter(memberships__user=user).order_by("kind", "slug", "id"))

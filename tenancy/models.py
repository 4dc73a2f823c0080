"""Control plane: workspaces (the security boundary), memberships, API keys and repo routing.

These tables hold no memory data, so they carry no row-level security; every table that holds workspace data
(memories, graph, rollout, idempotency records, …) carries workspace_id and a FORCE RLS policy instead.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q


class WorkspaceRow(models.Model):
    """Base of the models of workspace tables: an ORM save of an existing row updates it by (id, workspace_id)
    and never writes workspace_id. A row never changes workspace; on Citus, where the tables are distributed
    by workspace_id, the update then goes to the row's one shard (by id alone it would visit every shard), and
    setting the distribution column, even to its own value, is refused."""

    class Meta:
        abstract = True

    # Untyped: Django's private signature, which django-stubs already gives a later Django's form.
    def _do_update(self, base_qs, using, pk_val, values, update_fields, forced_update):
        workspace_id = getattr(self, "workspace_id", None)
        if workspace_id is not None and not self._meta.get_field("workspace").primary_key:
            base_qs = base_qs.filter(workspace_id=workspace_id)
            values = [value for value in values if value[0].attname != "workspace_id"]
        return super()._do_update(base_qs, using, pk_val, values, update_fields, forced_update)


class Workspace(models.Model):
    class Kind(models.TextChoices):
        PERSONAL = "personal"
        ORG = "org"
        SDK_TENANT = "sdk_tenant"

    kind = models.CharField(max_length=16, choices=Kind.choices)
    name = models.CharField(max_length=200)
    # Orgs only: the GitHub-owner-shaped handle repo routing matches a projectId's owner against.
    slug = models.CharField(max_length=39, null=True, blank=True)
    personal_owner = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="personal_workspace",
    )
    # SDK tenants only: the personal or org workspace that owns the tenant, and the caller's tenantId.
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="tenants"
    )
    tenant_id = models.CharField(max_length=120, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "workspaces"
        constraints = [
            models.UniqueConstraint(
                fields=["slug"], condition=Q(kind="org"), name="workspaces_org_slug_unique"
            ),
            models.UniqueConstraint(
                fields=["parent", "tenant_id"],
                condition=Q(kind="sdk_tenant"),
                name="workspaces_tenant_unique",
            ),
            models.CheckConstraint(
                condition=(
                    Q(kind="personal", personal_owner__isnull=False, parent__isnull=True)
                    | Q(kind="org", slug__isnull=False, parent__isnull=True)
                    | Q(kind="sdk_tenant", parent__isnull=False, tenant_id__isnull=False)
                ),
                name="workspaces_kind_shape",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind}:{self.slug or self.tenant_id or self.name}"


class Membership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner"
        ADMIN = "admin"
        MEMBER = "member"

    # Column name on purpose: a `workspace_id` column marks workspace data, which always carries FORCE RLS
    # (tests/test_rls.py checks it). Memberships are the control plane that decides which workspace a key may
    # use.
    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="memberships", db_column="member_workspace_id"
    )
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "memberships"
        constraints = [models.UniqueConstraint(fields=["workspace", "user"], name="memberships_unique")]


class UserSettings(models.Model):
    class RoutingMode(models.TextChoices):
        AUTO = "auto"
        ACTIVE_WORKSPACE = "active_workspace"

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="cairn_settings"
    )
    routing_mode = models.CharField(max_length=20, choices=RoutingMode.choices, default=RoutingMode.AUTO)
    # The org the user works in when routing does not pick one from a repo (memories.sh's current_org_id).
    active_org = models.ForeignKey(
        Workspace, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        db_table = "user_settings"


class RepoOwnerMapping(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="repo_owner_mappings"
    )
    owner = models.CharField(max_length=39)
    org = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "repo_owner_mappings"
        constraints = [models.UniqueConstraint(fields=["user", "owner"], name="repo_owner_mappings_unique")]


class ApiKey(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100, blank=True, default="")
    key_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12)
    last4 = models.CharField(max_length=4)
    created_via = models.CharField(max_length=20, default="command")
    # What the key may do (read, write or admin; never more than its user's role where it is used) and, when
    # set, the one workspace it may act in (an org, a personal workspace or an SDK tenant).
    scope = models.CharField(max_length=8, default="write")
    workspace = models.ForeignKey(
        Workspace,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        db_column="pinned_workspace_id",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "api_keys"

    def __str__(self) -> str:
        return f"{self.prefix}…{self.last4}"


class Invitation(models.Model):
    """An org admin's offer of membership; nothing routes to the org until the invited user accepts it."""

    class Status(models.TextChoices):
        PENDING = "pending"
        ACCEPTED = "accepted"
        DECLINED = "declined"
        CANCELLED = "cancelled"

    # Not `workspace_id`: like memberships, invitations are control plane, not workspace data under RLS.
    org = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="invitations")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="invitations")
    role = models.CharField(max_length=16, choices=Membership.Role.choices, default=Membership.Role.MEMBER)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "invitations"
        constraints = [
            models.UniqueConstraint(
                fields=["org", "user"], condition=Q(status="pending"), name="invitations_one_pending"
            )
        ]

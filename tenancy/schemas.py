"""Request and response schemas of keys/*: restricted API keys managed through the SDK API."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from ninja import Schema
from pydantic import Field

from config.schemas import ApiDateTime, ScopeIn, StrictIn, Trimmed, scope_field

KeyScope = Literal["read", "write", "admin"]


class KeyCreateIn(StrictIn):
    name: Annotated[str, Trimmed(100, min_length=0)] = Field(
        "", description="A label to recognise the key by."
    )
    keyScope: KeyScope = Field(
        "write",
        description="What the key may do: read (search, context, graph reads), write (also add, edit, "
        "forget) or admin (also settings, rollout, upkeep, import/export, keys). Never more than your key's "
        "own scope, and never more than your role where the key is used.",
    )
    pinned: bool = Field(
        False,
        description="Pin the key to the workspace `scope` resolves to (needs admin there): it can then act "
        "in that workspace only, whatever tenantId or projectId a call sends.",
    )
    expiresInDays: int | None = Field(
        None, ge=1, le=3650, description="Days until the key expires (default and ceiling: the server's)."
    )
    scope: ScopeIn = scope_field()


class PinnedWorkspaceOut(Schema):
    id: int = Field(description="Workspace id.")
    kind: str = Field(description="personal, org or sdk_tenant.")
    name: str = Field(description="Workspace name.")


class KeyOut(Schema):
    id: str = Field(description="Key id (for keys/revoke).")
    name: str = Field(description="The key's label.")
    prefix: str = Field(description="The first characters of the key, to recognise it.")
    last4: str = Field(description="Its last four characters.")
    keyScope: KeyScope = Field(description="read, write or admin.")
    pinnedWorkspace: PinnedWorkspaceOut | None = Field(
        description="The one workspace it may act in, if pinned."
    )
    createdVia: str = Field(description="dashboard, api or command.")
    createdAt: ApiDateTime = Field(description="When it was made.")
    expiresAt: ApiDateTime = Field(description="When it stops working.")
    revokedAt: ApiDateTime | None = Field(description="When it was revoked, if it was.")
    lastUsedAt: ApiDateTime | None = Field(description="Last use (recorded at most once a minute).")
    active: bool = Field(description="Not revoked and not expired.")


class KeyCreateOut(Schema):
    key: KeyOut = Field(description="The new key's record.")
    secret: str = Field(description="The key itself: shown only in this answer, store it now.")


class KeyListIn(StrictIn):
    includeInactive: bool = Field(False, description="Also list revoked and expired keys.")


class KeyListOut(Schema):
    keys: list[KeyOut] = Field(description="Your keys, newest first.")
    count: int = Field(description="How many are listed.")


class KeyRevokeIn(StrictIn):
    id: Annotated[str, Trimmed(64)] = Field(description="The key's id, from keys/list or keys/create.")


class KeyRevokeOut(Schema):
    id: str = Field(description="The key revoked.")
    revoked: bool = Field(description="Always true (revoking twice is fine).")
    revokedAt: datetime = Field(description="When it was revoked.")

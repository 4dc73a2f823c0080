"""SDK routes keys/*: a caller's own API keys (admin key scope), restricted by scope and optionally pinned."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from django.http import HttpRequest
from django.utils import timezone
from ninja import Router, Status

from config.errors import ApiError, success_envelope
from config.schemas import Envelope, ScopeIn
from tenancy import policy, selectors, services
from tenancy.access import request_workspace_id
from tenancy.auth import SdkCaller, SdkKeyAuth
from tenancy.models import ApiKey, Workspace
from tenancy.policy import ADMIN, requires
from tenancy.schemas import (
    KeyCreateIn,
    KeyCreateOut,
    KeyListIn,
    KeyListOut,
    KeyRevokeIn,
    KeyRevokeOut,
)

router = Router(tags=["keys"], auth=SdkKeyAuth())


def key_payload(api_key: ApiKey) -> dict[str, Any]:
    pinned = api_key.workspace
    return {
        "id": str(api_key.id),
        "name": api_key.name,
        "prefix": api_key.prefix,
        "last4": api_key.last4,
        "keyScope": api_key.scope,
        "pinnedWorkspace": {"id": pinned.id, "kind": pinned.kind, "name": pinned.name} if pinned else None,
        "createdVia": api_key.created_via,
        "createdAt": api_key.created_at,
        "expiresAt": api_key.expires_at,
        "revokedAt": api_key.revoked_at,
        "lastUsedAt": api_key.last_used_at,
        "active": api_key.revoked_at is None and api_key.expires_at > timezone.now(),
    }


def _pinned_workspace_id(request: HttpRequest) -> int | None:
    """The workspace a pinned caller's key is pinned to, once it holds admin there (the role keys/* declare),
    or None for a key that is not pinned. A pinned key manages only keys pinned to that same workspace: it
    could otherwise mint an unpinned key, or revoke its user's other keys, and so leave its workspace."""
    caller: SdkCaller = request.auth  # type: ignore[attr-defined]
    if caller.pin is None:
        return None
    return request_workspace_id(request, ScopeIn())


def _unpinned_refused() -> ApiError:
    return ApiError(
        403,
        "KEY_PINNED",
        "This key is pinned to one workspace, so the keys it makes are pinned there too; send pinned: true "
        "(or use a key that is not pinned).",
        details={"pinned": False},
    )


@router.post(
    "/keys/create",
    response={201: Envelope[KeyCreateOut]},
    summary="Create an API key for yourself, restricted by scope and optionally pinned to one workspace",
    description="Needs an admin-scoped key. The new key's keyScope cannot exceed the calling key's; with "
    "pinned true it acts only in the workspace `scope` resolves to (admin there needed). A pinned key makes "
    "only keys pinned to its own workspace (pinned: true, 403 KEY_PINNED otherwise). The secret is in this "
    "answer only.",
)
@requires(ADMIN)
def keys_create(request: HttpRequest, payload: KeyCreateIn) -> Status[dict[str, Any]]:
    caller: SdkCaller = request.auth  # type: ignore[attr-defined]
    if not policy.allows(caller.key_scope, payload.keyScope):
        raise policy.forbidden(payload.keyScope, caller.key_scope)
    pinned_to = _pinned_workspace_id(request)
    if pinned_to is not None and not payload.pinned:
        raise _unpinned_refused()
    workspace = None
    if payload.pinned:
        # A pinned caller's scope resolves to its own workspace (a tenantId elsewhere is 403 KEY_PINNED).
        workspace = Workspace.objects.get(pk=request_workspace_id(request, payload.scope))
    expires_at = timezone.now() + timedelta(days=payload.expiresInDays) if payload.expiresInDays else None
    try:
        created = services.api_key_create(
            user=caller.user,
            expires_at=expires_at,
            name=payload.name,
            created_via="api",
            scope=payload.keyScope,
            workspace=workspace,
        )
    except services.KeyLimitReached as exc:
        raise ApiError(409, "KEY_LIMIT_REACHED", str(exc)) from None
    except ValueError as exc:
        raise ApiError(400, "INVALID_REQUEST", str(exc)) from None
    data = {"key": key_payload(created.api_key), "secret": created.raw_key}
    return Status(201, success_envelope(request, KeyCreateOut.model_validate(data).model_dump(mode="json")))


@router.post(
    "/keys/list",
    response=Envelope[KeyListOut],
    summary="Your API keys (never their secrets)",
    description="A pinned key lists only the keys pinned to its own workspace.",
)
@requires(ADMIN)
def keys_list(request: HttpRequest, payload: KeyListIn) -> dict[str, Any]:
    caller: SdkCaller = request.auth  # type: ignore[attr-defined]
    keys = selectors.api_keys_for_user(
        user=caller.user, limit=services.KEY_LIST_LIMIT, pinned_to=_pinned_workspace_id(request)
    )
    rows = [key_payload(key) for key in keys]
    if not payload.includeInactive:
        rows = [row for row in rows if row["active"]]
    return success_envelope(request, {"keys": rows, "count": len(rows)})


@router.post(
    "/keys/revoke",
    response=Envelope[KeyRevokeOut],
    summary="Revoke one of your API keys",
    description="A pinned key revokes only keys pinned to its own workspace; any other is 404 KEY_NOT_FOUND.",
)
@requires(ADMIN)
def keys_revoke(request: HttpRequest, payload: KeyRevokeIn) -> dict[str, Any]:
    caller: SdkCaller = request.auth  # type: ignore[attr-defined]
    pinned_to = _pinned_workspace_id(request)
    try:
        key_id = str(uuid.UUID(payload.id))
    except ValueError:
        raise ApiError(404, "KEY_NOT_FOUND", "No key of yours has this id.") from None
    api_key = selectors.api_key_for_user(user=caller.user, key_id=key_id, pinned_to=pinned_to)
    if api_key is None:
        raise ApiError(404, "KEY_NOT_FOUND", "No key of yours has this id.")
    services.api_key_revoke(api_key=api_key)
    return success_envelope(request, {"id": key_id, "revoked": True, "revokedAt": api_key.revoked_at})

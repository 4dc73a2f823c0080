"""SDK authentication, in the order memories.sh checks:
missing → format → rate limit → unknown → expired, and only then the body."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import User
from django.http import HttpRequest
from django.utils import timezone
from ninja.security.base import AuthBase

from config import tracing
from config.errors import ApiError
from tenancy import services
from tenancy.caller import PinnedWorkspace, caller_lookup
from tenancy.models import ApiKey, UserSettings
from tenancy.policy import key_scope_check

KEY_PATTERN = re.compile(r"^mem_[a-f0-9]{64}$")
_BEARER = re.compile(r"^bearer\s+(\S+)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class SdkCaller:
    api_key: ApiKey
    user: User
    # Read in the same statement as the key (tenancy.caller), so resolving a scope and the caller's role there
    # usually costs no query.
    routing_mode: str = UserSettings.RoutingMode.AUTO
    active_org_id: int | None = None
    active_org_role: str | None = None
    personal_workspace_id: int | None = None
    pin: PinnedWorkspace | None = None

    @property
    def key_scope(self) -> str:
        return self.api_key.scope


class SdkKeyAuth(AuthBase):
    openapi_type = "http"
    openapi_scheme = "bearer"

    def __init__(self) -> None:
        self.openapi_bearerFormat = "mem_<64 hex>"
        super().__init__()

    def __call__(self, request: HttpRequest) -> SdkCaller:
        with tracing.span("cairn.auth"):
            caller = self.caller_for_header(request.headers.get("Authorization", ""))
            # The route's declared role (tenancy.policy.requires) against the key's scope, before the body is
            # read.
            key_scope_check(request, caller.key_scope)
        return caller

    def caller_for_header(self, header: str) -> SdkCaller:
        """The key check alone, in its order: missing → format → rate limit → unknown → revoked → expired."""
        header = header.strip()
        if not header:
            raise ApiError(401, "MISSING_API_KEY", "Send your API key as 'Authorization: Bearer mem_…'.")
        match = _BEARER.match(header)
        token = match.group(1) if match else ""
        if not KEY_PATTERN.match(token):
            raise ApiError(
                401,
                "INVALID_API_KEY_FORMAT",
                "The Authorization header must be 'Bearer mem_' followed by 64 lowercase hex characters.",
            )
        key_hash = services.api_key_hash(token)
        now = timezone.now()
        found = caller_lookup(
            key_hash=key_hash,
            limit=settings.RATE_LIMIT_REQUESTS,
            window_seconds=settings.RATE_LIMIT_WINDOW_SECONDS,
            now=now,
        )
        decision = found.rate
        if not decision.allowed:
            raise ApiError(
                429,
                "RATE_LIMITED",
                f"Too many requests: {decision.limit} per {settings.RATE_LIMIT_WINDOW_SECONDS} s per key. "
                f"Retry in {decision.retry_after_seconds} s.",
                details={"retryAfterSeconds": decision.retry_after_seconds, "limit": decision.limit},
                headers={"Retry-After": str(decision.retry_after_seconds)},
            )
        api_key, user = found.api_key, found.user
        if api_key is None or user is None or not user.is_active:
            raise ApiError(401, "INVALID_API_KEY", "This API key is not valid.")
        if api_key.revoked_at is not None:
            raise ApiError(401, "INVALID_API_KEY", "This API key was revoked. Create a new one.")
        if api_key.expires_at <= now:
            raise ApiError(401, "API_KEY_EXPIRED", "This API key has expired. Create a new one.")
        return SdkCaller(
            api_key=api_key,
            user=user,
            routing_mode=found.routing_mode,
            active_org_id=found.active_org_id,
            active_org_role=found.active_org_role,
            personal_workspace_id=found.personal_workspace_id,
            pin=found.pin,
        )

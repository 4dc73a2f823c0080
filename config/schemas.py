"""Schemas shared by every router: the envelope and the scope object."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Generic, TypeVar

import annotated_types
from django.core.serializers.json import DjangoJSONEncoder
from ninja import Schema
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    StringConstraints,
    WithJsonSchema,
)

T = TypeVar("T")
NUL_MESSAGE = "must not contain NUL (\\u0000) characters"


def _refuse_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError(NUL_MESSAGE)
    return value


def _api_datetime(value: datetime) -> Any:
    return _DJANGO_JSON.default(value)


_DJANGO_JSON = DjangoJSONEncoder()
# A datetime in an answer: ISO 8601, milliseconds, "Z" for UTC: what ninja's renderer writes (through Django's
# encoder), also when an answer is serialised by pydantic itself (config.api.envelope_response).
ApiDateTime = Annotated[
    datetime,
    PlainSerializer(_api_datetime, when_used="json"),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]


@dataclass(frozen=True)
class Trimmed(annotated_types.GroupedMetadata):
    """A trimmed string of bounded length without NUL, which Postgres cannot store (it would be a 500).

    Written `Annotated[str, Trimmed(500)]`: a type checker sees a plain `str`, pydantic unpacks the group into
    the same constraints (strip, min/max length, the NUL check) as if they were listed in the annotation."""

    max_length: int
    min_length: int = 1

    def __iter__(self) -> Iterator[object]:
        yield from StringConstraints(
            strip_whitespace=True, min_length=self.min_length, max_length=self.max_length
        )
        yield AfterValidator(_refuse_nul)


def trimmed(max_length: int, min_length: int = 1) -> Any:
    """The older spelling of `Annotated[str, Trimmed(max_length, min_length)]`, same validation and schema.

    A call is not a type to a type checker, so new code writes the `Annotated` form; this stays until every
    field has moved to it."""
    return Annotated[str, Trimmed(max_length, min_length)]


class StrictIn(Schema):
    """Request bodies reject unknown fields, naming them, instead of silently dropping them."""

    model_config = ConfigDict(extra="forbid")


class ScopeIn(StrictIn):
    tenantId: Annotated[str, Trimmed(120)] | None = Field(
        default=None,
        description="Selects (and on first use provisions) an SDK-tenant workspace under your own workspace.",
    )
    userId: Annotated[str, Trimmed(120)] | None = Field(
        default=None,
        description="End user inside the workspace. Reads see shared memories plus this user's; writes touch "
        "only this user's. Without it, only shared (user-less) memories.",
    )
    projectId: Annotated[str, Trimmed(240)] | None = Field(
        default=None,
        description="Project (e.g. github.com/owner/repo). Writes become project-scoped; reads see global "
        "memories plus this project's. In routing mode 'auto' its GitHub owner also picks the org workspace.",
    )


class ScopeQuery(Schema):
    """The scope of a GET, as query parameters, validated like ScopeIn: a value ScopeIn would refuse (an empty
    projectId, a NUL) must be a 422 here, not an error raised later inside the handler (a 500)."""

    tenantId: Annotated[str, Trimmed(120)] | None = Field(None, description="As scope.tenantId.")
    userId: Annotated[str, Trimmed(120)] | None = Field(None, description="As scope.userId.")
    projectId: Annotated[str, Trimmed(240)] | None = Field(None, description="As scope.projectId.")

    def scope(self) -> ScopeIn:
        return ScopeIn(tenantId=self.tenantId, userId=self.userId, projectId=self.projectId)


def scope_field() -> ScopeIn:
    return Field(
        default_factory=ScopeIn,
        description="Where the call applies: {tenantId?, userId?, projectId?}. "
        "Omit for your default workspace.",
    )


class ErrorOut(BaseModel):
    type: str = Field(
        description="auth_error, validation_error, not_found_error, rate_limit_error or internal_error."
    )
    code: str = Field(description="Stable machine-readable code, e.g. MEMORY_NOT_FOUND.")
    message: str = Field(description="What went wrong and how to fix it.")
    status: int = Field(description="Same as the HTTP status.")
    retryable: bool = Field(description="Whether the same request may succeed later.")
    details: dict[str, Any] | None = Field(None, description="Extra facts, e.g. the offending fields.")


class MetaOut(BaseModel):
    version: str = Field(description="API contract version.")
    endpoint: str = Field(description="The path that answered.")
    requestId: str = Field(
        description="Request id, also in the X-Request-Id header; quote it in support requests."
    )
    timestamp: str = Field(description="Server time of the answer, ISO 8601 UTC.")


class Envelope(BaseModel, Generic[T]):
    ok: bool = Field(description="True on success.")
    data: T | None = Field(description="The payload on success, null on failure.")
    error: ErrorOut | None = Field(description="Null on success; the error otherwise.")
    meta: MetaOut = Field(description="Version, endpoint, requestId and timestamp of this answer.")

"""Schemas shared by every router: the envelope and the scope object."""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
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
    SerializerFunctionWrapHandler,
    Strict,
    StringConstraints,
    WithJsonSchema,
    model_serializer,
)

T = TypeVar("T")

# --- the rules every write shares ---------------------------------------------------------------------------
# What Cairn stores must be something it can always serve back: PostgreSQL refuses NUL in text and any JSON
# with NaN or Infinity (Python's json writes and reads both), UTF-8 has no lone surrogates, pydantic stops
# serialising a few hundred levels deep, and Python's datetime ends where PostgreSQL's timestamptz does not.
# The SDK schemas apply these rules to every write: API, MCP tools, import and dashboard forms.

NUL_MESSAGE = "must not contain NUL (\\u0000) characters"
SURROGATE_MESSAGE = "must be valid Unicode (no lone surrogates such as \\ud800)"
# Containers a JSON value (memory metadata) may nest, the outermost object counting as one.
JSON_MAX_DEPTH = 20
# Integers inside JSON fit 64 bits, like every integer column.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# Timestamps, once converted to UTC, stay within what Python's datetime holds (years 1–9999).
UTC_MIN = datetime.min.replace(tzinfo=UTC)
UTC_MAX = datetime.max.replace(tzinfo=UTC)
TIME_RANGE_MESSAGE = "must fall between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z once converted to UTC"


def text_problem(value: str) -> str | None:
    """Why `value` cannot be stored as text, or None."""
    if "\x00" in value:
        return NUL_MESSAGE
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return SURROGATE_MESSAGE
    return None


def _shown(key: str) -> str:
    """A key as an error message can name it: escaped when it holds what it may not, cut at 40 characters."""
    if text_problem(key) is not None:
        key = key.encode("unicode_escape").decode("ascii")
    return key if len(key) <= 40 else key[:39] + "…"


def _path(parts: tuple[str | int, ...]) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{_shown(part)}" for part in parts)


def json_problem(value: Any, *, name: str = "value", max_depth: int = JSON_MAX_DEPTH) -> str | None:
    """The first thing in a JSON value that Cairn must not store, named by its path (`metadata.a.b[2]`):
    nesting deeper than `max_depth` containers, a number that is not finite or an integer outside 64 bits, a
    string or key with NUL or a lone surrogate, anything that is not JSON. None when the value is fine.

    A loop with its own stack, not recursion: the value may be thousands of levels deep."""
    stack: list[tuple[Any, int, tuple[str | int, ...]]] = [(value, 1, ())]
    while stack:
        item, depth, parts = stack.pop()
        if isinstance(item, dict | list):
            if depth > max_depth:
                return f"{name}{_path(parts)} nests deeper than {max_depth} levels"
            if isinstance(item, dict):
                for key, child in item.items():
                    if not isinstance(key, str):
                        return f"{name}{_path(parts)}: keys must be strings"
                    problem = text_problem(key)
                    if problem is not None:
                        return f"key {name}{_path((*parts, key))} {problem}"
                    stack.append((child, depth + 1, (*parts, key)))
            else:
                stack.extend((child, depth + 1, (*parts, index)) for index, child in enumerate(item))
        elif isinstance(item, str):
            problem = text_problem(item)
            if problem is not None:
                return f"{name}{_path(parts)} {problem}"
        elif item is None or isinstance(item, bool):
            continue
        elif isinstance(item, int):
            if not INT64_MIN <= item <= INT64_MAX:
                return f"{name}{_path(parts)} is an integer outside 64 bits"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"{name}{_path(parts)} must be a finite number (not NaN or Infinity)"
        else:
            return f"{name}{_path(parts)} is not a JSON value"
    return None


def finite(value: Any, default: float = 0.0) -> float:
    """A stored number as an answer can carry it: NaN and ±Infinity, which JSON has no spelling for (Python
    writes them anyway, and the client's parser refuses the whole answer), become `default`."""
    number = float(value)
    return number if math.isfinite(number) else default


def _refuse_bad_text(value: str) -> str:
    problem = text_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _utc_in_range(value: datetime) -> datetime:
    """In UTC (a naive time is taken as UTC), and only if UTC can hold it."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError(TIME_RANGE_MESSAGE) from None


def _aware(value: datetime) -> datetime:
    if value.tzinfo is None:
        raise ValueError("must carry a time zone (e.g. Z or +02:00)")
    return value


# A time a request sends: stored and compared in UTC, refused when UTC cannot hold it (0001-01-01T00:00+05:00
# is in year 0 in UTC; stored, it would fail every later read).
ApiInstant = Annotated[datetime, AfterValidator(_utc_in_range)]
# The same, with its time zone required (import files, where a naive time would be a guess).
AwareInstant = Annotated[datetime, AfterValidator(_aware), AfterValidator(_utc_in_range)]


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
    """A trimmed string of bounded length without NUL or lone surrogates, which Postgres cannot store (it
    would be a 500).

    Written `Annotated[str, Trimmed(500)]`: a type checker sees a plain `str`, pydantic unpacks the group into
    the same constraints (strip, min/max length, the NUL check) as if they were listed in the annotation."""

    max_length: int
    min_length: int = 1

    def __iter__(self) -> Iterator[object]:
        yield from StringConstraints(
            strip_whitespace=True, min_length=self.min_length, max_length=self.max_length
        )
        yield AfterValidator(_refuse_bad_text)


def trimmed(max_length: int, min_length: int = 1) -> Any:
    """The older spelling of `Annotated[str, Trimmed(max_length, min_length)]`, same validation and schema.

    A call is not a type to a type checker, so new code writes the `Annotated` form; this stays until every
    field has moved to it."""
    return Annotated[str, Trimmed(max_length, min_length)]


_STRICT_SCALARS = (int, float, bool)


def _strict_scalars(annotation: Any) -> Any:
    """`annotation` with every int, float and bool in it (inside Optional, lists, dicts, Annotated) strict."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Annotated:
        return Annotated[(_strict_scalars(args[0]), *annotation.__metadata__)]
    if origin in (typing.Union, types.UnionType):
        return typing.Union[tuple(_strict_scalars(arg) for arg in args)]  # noqa: UP007
    if origin in (list, set, frozenset, tuple, dict) and args:
        return origin[tuple(arg if arg is Ellipsis else _strict_scalars(arg) for arg in args)]
    if annotation in _STRICT_SCALARS:
        return Annotated[annotation, Strict()]
    return annotation


class StrictIn(Schema):
    """Request bodies reject unknown fields, naming them, instead of silently dropping them, and numbers that
    are not finite (Python's json module reads NaN and Infinity).

    Integers, numbers and booleans are strict: `"1"`, `true` or `1.0` for an integer, `"0.5"` for a number,
    `"true"` or `1` for a boolean are refused (400) instead of coerced, so a value means what its JSON type
    says. An integer is accepted for a number. Query strings (ScopeQuery and its kin) stay lax: they are text.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        changed = False
        for field in cls.model_fields.values():
            strict = _strict_scalars(field.annotation)
            if strict != field.annotation:
                field.annotation = strict
                changed = True
        if changed:
            cls.model_rebuild(force=True)


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
    traceId: str | None = Field(
        None,
        description="The OpenTelemetry trace id of this request (32 hex digits); only while the server "
        "exports traces (docs/operations.md, Tracing), absent otherwise.",
    )

    @model_serializer(mode="wrap")
    def _without_absent_trace(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Absent rather than null: an answer from a server that does not trace looks as it always did.
        data: dict[str, Any] = handler(self)
        if data.get("traceId") is None:
            data.pop("traceId", None)
        return data


class Envelope(BaseModel, Generic[T]):
    ok: bool = Field(description="True on success.")
    data: T | None = Field(description="The payload on success, null on failure.")
    error: ErrorOut | None = Field(description="Null on success; the error otherwise.")
    meta: MetaOut = Field(description="Version, endpoint, requestId and timestamp of this answer.")

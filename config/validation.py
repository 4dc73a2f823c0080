"""Turn pydantic/ninja validation errors into one envelope error naming the fields to fix."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from config.errors import ApiError

# A few fields keep memories.sh's dedicated codes; everything else is INVALID_REQUEST.
_FIELD_CODES = {
    ("content",): "MEMORY_CONTENT_REQUIRED",
    ("id",): "MEMORY_ID_REQUIRED",
    ("layer",): "MEMORY_LAYER_INVALID",
    ("query",): "QUERY_REQUIRED",
    ("scope", "tenantId"): "TENANT_ID_INVALID",
    ("scope", "userId"): "USER_ID_INVALID",
}
# Errors a validator raises with a type of its own (pydantic_core.PydanticCustomError) keep a code of their
# own.
_TYPE_CODES = {"embedding_model_not_allowed": "EMBEDDING_MODEL_NOT_ALLOWED"}
# The *_REQUIRED codes mean "absent, null or blank"; anything else wrong there (too long) is INVALID_REQUEST.
_REQUIRED_CODES = {"MEMORY_CONTENT_REQUIRED", "MEMORY_ID_REQUIRED", "QUERY_REQUIRED"}
_ABSENT_TYPES = {"missing", "string_type", "string_too_short"}


def _field_path(loc: tuple[Any, ...] | list[Any]) -> tuple[str, ...]:
    parts = [str(part) for part in loc]
    if parts and parts[0] in {"body", "query", "path", "header"}:
        parts = parts[1:]
    if parts and parts[0] == "payload":
        parts = parts[1:]
    return tuple(parts)


def api_error_from_validation(errors: Sequence[Mapping[str, Any]]) -> ApiError:
    issues = []
    for error in errors:
        path = _field_path(error.get("loc", ()))
        kind = error.get("type", "")
        if kind == "extra_forbidden":
            message = "unknown field; remove it"
        else:
            # A validator's own ValueError reads "Value error, <what to fix>": the prefix says nothing.
            message = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
        issues.append({"field": ".".join(path) or "body", "message": message, "type": kind})
    code = "INVALID_REQUEST"
    first = issues[0] if issues else None
    if errors:
        first_path = _field_path(errors[0].get("loc", ()))
        code = _FIELD_CODES.get(first_path, code)
        first_type = errors[0].get("type")
        code = _TYPE_CODES.get(str(first_type), code)
        if code == "MEMORY_LAYER_INVALID" and first_type == "missing":
            code = "INVALID_REQUEST"
        if code in _REQUIRED_CODES and first_type not in _ABSENT_TYPES:
            code = "INVALID_REQUEST"
    summary = "; ".join(f"{issue['field']}: {issue['message']}" for issue in issues[:5])
    message = f"Invalid request: {summary}." if first else "Invalid request body."
    return ApiError(400, code, message, details={"issues": issues})

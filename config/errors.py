"""The SDK envelope `{ok, data, error, meta}` and the errors that travel in it."""

from __future__ import annotations

import functools
import json
import uuid
from datetime import UTC, datetime
from typing import Any

from django.http import HttpRequest, HttpResponse
from pydantic import TypeAdapter

from config import tracing

API_VERSION = "2026-11-22"

_TYPE_BY_STATUS = {
    400: "validation_error",
    401: "auth_error",
    403: "auth_error",
    404: "not_found_error",
    405: "validation_error",
    409: "validation_error",
    413: "validation_error",
    415: "validation_error",
    422: "validation_error",
    429: "rate_limit_error",
}


class ApiError(Exception):
    """Raised anywhere under /api; rendered as the envelope with its status, code and message."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        retryable: bool | None = None,
        error_type: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.retryable = status >= 500 or status == 429 if retryable is None else retryable
        self.error_type = error_type or (
            "internal_error" if status >= 500 else _TYPE_BY_STATUS.get(status, "unknown_error")
        )
        self.headers = headers or {}


def request_id(request: HttpRequest) -> str:
    rid = getattr(request, "cairn_request_id", None)
    if rid is None:
        rid = str(uuid.uuid4())
        request.cairn_request_id = rid  # type: ignore[attr-defined]
    return rid


def meta(request: HttpRequest) -> dict[str, str]:
    found = {
        "version": API_VERSION,
        "endpoint": request.path,
        "requestId": request_id(request),
        "timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
    }
    if tracing.ENABLED:
        trace_id = tracing.trace_id()
        if trace_id is not None:
            found["traceId"] = trace_id
    return found


def success_envelope(request: HttpRequest, data: Any) -> dict[str, Any]:
    return {"ok": True, "data": data, "error": None, "meta": meta(request)}


@functools.cache
def _envelope_adapter(schema: type) -> TypeAdapter[Any]:
    from config.schemas import Envelope

    return TypeAdapter(Envelope[schema])  # type: ignore[valid-type]


def _json_response(body: bytes) -> HttpResponse:
    response = HttpResponse(body, content_type="application/json; charset=utf-8")
    # Marked as config.middleware.mark does, so the middleware does not wrap this envelope again.
    response.cairn_envelope = True  # type: ignore[attr-defined]
    return response


def envelope_response(request: HttpRequest, data: Any, schema: type) -> HttpResponse:
    """success_envelope, validated against Envelope[schema] and serialised by pydantic in one pass. For the
    hot answers (context/get with its rules is ~100 KB): ninja validates, dumps to Python objects, then
    encodes them with the json module, calling back into Python for every datetime. Same contract, same JSON
    values; the route keeps `response=Envelope[schema]` for its docs."""
    adapter = _envelope_adapter(schema)
    body = adapter.dump_json(adapter.validate_python(success_envelope(request, data)))
    return _json_response(body)


def envelope_response_spliced(
    request: HttpRequest,
    data: dict[str, Any],
    schema: type,
    *,
    field: str,
    rendered: bytes,
    before: str,
) -> HttpResponse:
    """envelope_response, with `data[field]` (a list) taken as already validated and serialised: `rendered` is
    its JSON. The rest is validated and dumped with that field empty, then `rendered` takes the place of the
    first `"<field>":[]`. It must come before `"<before>":`, the first field that can hold caller content
    (memory metadata may contain a key named like `field`); everything ahead of it is the envelope's own
    structure and JSON strings, in which a quote is always escaped. Anything else falls back to the plain
    path."""
    adapter = _envelope_adapter(schema)
    body = adapter.dump_json(adapter.validate_python(success_envelope(request, {**data, field: []})))
    marker = f'"{field}":[]'.encode()
    at, limit = body.find(marker), body.find(f'"{before}":'.encode())
    if not 0 <= at < limit:
        return envelope_response(request, data, schema)
    body = body[:at] + f'"{field}":'.encode() + rendered + body[at + len(marker) :]
    return _json_response(body)


def error_body(request: HttpRequest, error: ApiError) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "type": error.error_type,
        "code": error.code,
        "message": error.message,
        "status": error.status,
        "retryable": error.retryable,
    }
    if error.details is not None:
        payload["details"] = error.details
    return {"ok": False, "data": None, "error": payload, "meta": meta(request)}


def error_response(request: HttpRequest, error: ApiError) -> HttpResponse:
    response = HttpResponse(
        json.dumps(error_body(request, error)), status=error.status, content_type="application/json"
    )
    for name, value in error.headers.items():
        response[name] = value
    response["X-Request-Id"] = request_id(request)
    return response

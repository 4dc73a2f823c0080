"""Every response under /api is the envelope, whatever failed and whatever DEBUG says."""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, HttpResponseBase
from django.middleware.gzip import GZipMiddleware
from whitenoise.middleware import WhiteNoiseMiddleware

from config.errors import ApiError, error_response, request_id

logger = logging.getLogger("cairn.api")

_CLIENT_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{8,128}$")
_GENERIC_ERRORS = {
    400: ("INVALID_REQUEST", "The request could not be understood."),
    403: ("FORBIDDEN", "This request is not allowed."),
    404: ("NOT_FOUND", "No API endpoint at this path. See /api/sdk/v1/docs for the list of endpoints."),
    405: ("METHOD_NOT_ALLOWED", "This endpoint does not accept this HTTP method."),
    413: ("PAYLOAD_TOO_LARGE", "The request body is too large."),
}


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


class ApiEnvelopeMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not _is_api(request):
            return self.get_response(request)
        incoming = request.headers.get("X-Request-Id", "")
        if _CLIENT_REQUEST_ID.match(incoming):
            request.cairn_request_id = incoming  # type: ignore[attr-defined]
        request_id(request)

        if request.method == "OPTIONS":
            return self._preflight(request)
        too_large = self._body_too_large(request)
        if too_large is not None:
            return too_large

        started = time.perf_counter()
        response = self.get_response(request)
        if response.status_code >= 400 and not getattr(response, "cairn_envelope", False):
            response = self._wrap_foreign_error(request, response)
        response["X-Request-Id"] = request_id(request)
        # Time spent in the app, for clients and benchmarks that want server-side latency without the network.
        response["Server-Timing"] = f"app;dur={(time.perf_counter() - started) * 1000:.2f}"
        response.setdefault("Access-Control-Allow-Origin", "*")
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not _is_api(request):
            return None
        logger.exception("unhandled error on %s (request %s)", request.path, request_id(request))
        return mark(
            error_response(request, ApiError(500, "INTERNAL_ERROR", "Something went wrong on our side."))
        )

    def _preflight(self, request: HttpRequest) -> HttpResponse:
        response = HttpResponse(status=204)
        response["Access-Control-Allow-Origin"] = "*"
        response["Access-Control-Allow-Methods"] = "GET, POST, PATCH, DELETE, OPTIONS"
        response["Access-Control-Allow-Headers"] = (
            "Content-Type, Authorization, Idempotency-Key, X-Request-Id"
        )
        response["X-Request-Id"] = request_id(request)
        return response

    def _body_too_large(self, request: HttpRequest) -> HttpResponse | None:
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        limit = settings.API_MAX_BODY_BYTES
        if request.path.endswith("/workspace/import"):  # streamed line by line, never held in memory whole
            limit = settings.EXPORT_IMPORT_MAX_UPLOAD_BYTES
        if length <= limit:
            return None
        return mark(error_response(request, payload_too_large(limit)))

    def _wrap_foreign_error(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        status = response.status_code
        code, message = _GENERIC_ERRORS.get(status, ("INTERNAL_ERROR", "Something went wrong on our side."))
        if status == 413:
            return mark(error_response(request, payload_too_large(settings.API_MAX_BODY_BYTES)))
        details = None
        if status == 405 and response.has_header("Allow"):
            details = {"allowed": [m.strip() for m in response["Allow"].split(",")]}
        wrapped = error_response(
            request, ApiError(status if status < 600 else 500, code, message, details=details)
        )
        if response.has_header("Allow"):
            wrapped["Allow"] = response["Allow"]
        return mark(wrapped)


def payload_too_large(limit: int) -> ApiError:
    return ApiError(
        413,
        "PAYLOAD_TOO_LARGE",
        f"The request body is larger than {limit} bytes. Send less data per request.",
        details={"maxBytes": limit},
    )


def mark(response: HttpResponse) -> HttpResponse:
    response.cairn_envelope = True  # type: ignore[attr-defined]
    return response


_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def _holds_nul(request: HttpRequest) -> bool:
    if "%00" in request.META.get("QUERY_STRING", "") or any(
        "\x00" in key or any("\x00" in value for value in values) for key, values in request.GET.lists()
    ):
        return True
    if request.method == "POST" and request.content_type in _FORM_TYPES:
        return any(
            "\x00" in key or any(isinstance(value, str) and "\x00" in value for value in values)
            for key, values in request.POST.lists()
        )
    return False


class NulRefusalMiddleware:
    """400 for a page request (anything outside /api) whose query string or form holds a NUL character.

    No field accepts one (PostgreSQL cannot store it, and a query with it fails): refused here, no view has
    to remember it. /api answers such input itself, in the envelope, through the schemas' text rules."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not _is_api(request) and _holds_nul(request):
            return HttpResponseBadRequest(
                "The request holds a NUL character (%00), which no field accepts. Remove it and try again.",
                content_type="text/plain; charset=utf-8",
            )
        return self.get_response(request)


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    """WhiteNoise without its warning about a STATIC_ROOT that collectstatic never made: with
    WHITENOISE_USE_FINDERS (the default) the files come from the app and vendor folders, and a fresh checkout
    has no staticfiles/, so `make run` would print a UserWarning about nothing wrong. A missing root is still
    reported when the finders are off: then it is the only place files come from."""

    def add_files(self, root: str, prefix: str | None = None) -> None:
        if self.use_finders and not os.path.isdir(root):
            return
        super().add_files(root, prefix=prefix)


class CompressionMiddleware(GZipMiddleware):
    """gzip for HTML pages and JSON answers (the explorer's graph/data at 2,000 nodes is ~1 MB of JSON, a
    tenth of that compressed), when the client accepts it.

    BREACH: a compressed response that reflects attacker-chosen text next to a secret leaks the secret through
    its length. Django's GZipMiddleware pads every compressed body with random bytes ("Heal the Breach"), and
    Django masks the CSRF token with a fresh salt on every response, so the token never repeats between the
    requests an attacker would compare. What is left is a page showing a secret that is not masked: a new API
    key is shown once, on a page marked Cache-Control: no-store. Such responses are never compressed, and
    neither are streams (an export download is NDJSON that the client reads as it comes) or other types
    (static files are WhiteNoise's, already compressed when worth it)."""

    COMPRESSED_TYPES = ("text/html", "application/json")

    def process_response(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        content_type = response.get("Content-Type", "").split(";", 1)[0].strip()
        if (
            content_type not in self.COMPRESSED_TYPES
            or response.streaming
            or "no-store" in response.get("Cache-Control", "")
        ):
            return response
        return super().process_response(request, response)

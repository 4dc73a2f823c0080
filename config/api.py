"""The SDK API (/api/sdk/v1): one NinjaAPI, one router per app, every answer in the envelope."""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError, connections
from django.http import Http404, HttpRequest, HttpResponse, UnreadablePostError
from ninja import NinjaAPI, Router, Schema
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.openapi.schema import OpenAPISchema
from pydantic import Field

from config.errors import API_VERSION, ApiError, error_response, success_envelope
from config.middleware import mark, payload_too_large
from config.schemas import Envelope
from config.validation import api_error_from_validation
from tenancy.policy import PUBLIC, declared_role, requires
from tenancy.rls import is_statement_timeout, statement_timeout_error

logger = logging.getLogger("cairn.api")

DESCRIPTION = """
Cairn's SDK API. Every response is an envelope `{ok, data, error, meta}`; `meta.requestId` is also sent as
the `X-Request-Id` header. Authenticate with `Authorization: Bearer mem_<64 hex>`. Every call takes a `scope`
`{tenantId?, userId?, projectId?}`: the workspace comes from your key plus `tenantId` or repo routing, and
`userId` / `projectId` filter inside it. Limits: 120 requests per 60 s per key, bodies up to 1 MB.
"""


class CairnAPI(NinjaAPI):
    def create_response(
        self,
        request: HttpRequest,
        data: Any,
        *,
        status: int | None = None,
        temporal_response: HttpResponse | None = None,
    ) -> HttpResponse:
        response = super().create_response(request, data, status=status, temporal_response=temporal_response)
        return mark(response)

    def get_openapi_schema(
        self, *, path_prefix: str | None = None, path_params: dict[str, Any] | None = None
    ) -> OpenAPISchema:
        """The document, each operation with the role its handler declares (`x-cairn-role`): a client reads
        what a key needs from the contract, and tests/test_openapi.py compares it with the code."""
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        roles = {
            self.get_openapi_operation_id(operation): declared_role(operation.view_func)
            for _, router in self._routers
            for path_view in router.path_operations.values()
            for operation in path_view.operations
        }
        for methods in schema["paths"].values():
            for spec in methods.values():
                role = roles.get(spec.get("operationId", ""))
                if role is not None:
                    spec["x-cairn-role"] = role
        return schema


api = CairnAPI(
    title="Cairn SDK API",
    version=API_VERSION,
    description=DESCRIPTION,
    urls_namespace="sdk_v1",
    docs_url="/docs",
    openapi_url="/openapi.json",
)


@api.exception_handler(ApiError)
def _api_error(request: HttpRequest, exc: ApiError) -> HttpResponse:
    return mark(error_response(request, exc))


@api.exception_handler(ValidationError)
def _validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    return mark(error_response(request, api_error_from_validation(exc.errors)))


@api.exception_handler(AuthenticationError)
def _auth_error(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return mark(
        error_response(request, ApiError(401, "MISSING_API_KEY", "Send 'Authorization: Bearer mem_…'."))
    )


@api.exception_handler(Http404)
def _not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return mark(error_response(request, ApiError(404, "NOT_FOUND", "Not found.")))


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    code = "INVALID_REQUEST" if exc.status_code < 500 else "INTERNAL_ERROR"
    message = str(exc.message)
    if message == "Cannot parse request body":
        message = (
            "The request body is not valid JSON: send a JSON object with Content-Type: application/json."
        )
    return mark(error_response(request, ApiError(exc.status_code, code, message)))


@api.exception_handler(Exception)
def _unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
    if isinstance(exc, RequestDataTooBig):
        return mark(error_response(request, payload_too_large(request_limit())))
    if isinstance(exc, UnreadablePostError):
        return mark(error_response(request, body_not_received()))
    if is_statement_timeout(exc):
        return mark(error_response(request, statement_timeout_error()))
    if isinstance(exc, OperationalError | InterfaceError):
        return mark(error_response(request, database_unavailable(exc)))
    logger.exception("unhandled error on %s", request.path)
    return mark(error_response(request, ApiError(500, "INTERNAL_ERROR", "Something went wrong on our side.")))


def database_unavailable(exc: Exception) -> ApiError:
    """A lost or refused database connection (a restart, a failover): the client should retry, and may.

    Nothing was committed by this request unless its transaction had finished, and a retry with the same
    Idempotency-Key cannot store a memory twice. Django reconnects on the next request (CONN_HEALTH_CHECKS).
    """
    logger.warning("database unavailable: %s", type(exc).__name__)
    for alias in ("app", "default"):
        connections[alias].close_if_unusable_or_obsolete()
    return ApiError(
        503,
        "DATABASE_UNAVAILABLE",
        "The database is unavailable for a moment. Retry after the Retry-After delay; send the same "
        "Idempotency-Key so a write is never stored twice.",
        retryable=True,
        headers={"Retry-After": "1"},
    )


def body_not_received() -> ApiError:
    """The body did not arrive: the connection dropped, or the client sent it slower than the web server
    allows (WEB_CLIENT_TIMEOUT_SECONDS, config/gunicorn_conf.py), which closes the connection after this
    answer."""
    return ApiError(
        408,
        "REQUEST_BODY_TIMEOUT",
        "The request body did not arrive in time, or the connection dropped while it was sent. Send the "
        "whole body at once, then retry.",
        retryable=True,
        error_type="validation_error",
    )


def request_limit() -> int:
    from django.conf import settings

    return settings.API_MAX_BODY_BYTES


class HealthOut(Schema):
    status: str = Field(description="Always 'ok' when the process answers.")
    service: str = Field(description="Service name.")
    schemaVersion: str = Field(description="Version of the API contract (also meta.version).")


health_router = Router(tags=["health"])


@health_router.get(
    "/health", response=Envelope[HealthOut], auth=None, summary="Liveness of the SDK API (no auth)"
)
@requires(PUBLIC)
def health(request: HttpRequest) -> dict[str, Any]:
    return success_envelope(request, {"status": "ok", "service": "cairn-sdk", "schemaVersion": API_VERSION})


def _register_routers() -> None:
    from graphsvc.api import router as graphsvc_router
    from memories.api import router as memories_router
    from pipeline.api import router as pipeline_router
    from retrieval.api import router as retrieval_router
    from rollout.api import router as rollout_router
    from tenancy.api import router as tenancy_router
    from transfer.api import router as transfer_router

    api.add_router("/", health_router)
    api.add_router("/", memories_router)
    api.add_router("/", retrieval_router)
    api.add_router("/", rollout_router)
    api.add_router("/", graphsvc_router)
    api.add_router("/", transfer_router)
    api.add_router("/", pipeline_router)
    api.add_router("/", tenancy_router)


_register_routers()

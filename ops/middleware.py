"""One structured log line and one latency observation per request.

The log carries identifiers only — request id, workspace id, API key prefix, route template, status, duration
— never bodies, memory content, keys or tokens; the route is the URL pattern, so ids in paths never reach
labels.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from ops.metrics import REQUEST_SECONDS

logger = logging.getLogger("cairn.request")


def route_of(request: HttpRequest) -> str:
    match = getattr(request, "resolver_match", None)
    if match is None or not match.route:
        return "unmatched"  # 404s: the raw path would give every scanner its own label value
    return "/" + match.route.lstrip("^").rstrip("$")


class RequestLogMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        duration = time.perf_counter() - started
        route = route_of(request)
        if route == "/metrics":
            return response  # scrapes would otherwise dominate the histogram they read
        REQUEST_SECONDS.labels(
            route=route, method=request.method or "", status=str(response.status_code)
        ).observe(duration)
        auth = getattr(request, "auth", None)
        api_key = getattr(auth, "api_key", None)
        logger.info(
            "%s %s %s",
            request.method,
            route,
            response.status_code,
            extra={
                "request_id": getattr(request, "cairn_request_id", None) or response.get("X-Request-Id"),
                "workspace_id": getattr(request, "cairn_workspace_id", None),
                "key_prefix": getattr(api_key, "prefix", None),
                "route": route,
                "method": request.method,
                "status": response.status_code,
                "duration_ms": round(duration * 1000, 2),
            },
        )
        return response

"""Content-Security-Policy for every HTML page, the API docs page included: scripts and styles only from
our own origin (vendored htmx, Cytoscape and Swagger UI), so an injected <script> or inline handler never
runs even if escaping were missed."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.get("Content-Type", "").startswith("text/html"):
            response.setdefault("Content-Security-Policy", settings.DASHBOARD_CONTENT_SECURITY_POLICY)
        return response

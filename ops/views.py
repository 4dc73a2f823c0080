"""Operational endpoints outside the SDK auth: /healthz, /readyz, /metrics (token from METRICS_TOKEN)."""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET

from ops import metrics, selectors


@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    # Liveness only: a database outage must not make an orchestrator restart healthy web processes.
    return JsonResponse({"status": "ok"})


@require_GET
def readyz(request: HttpRequest) -> HttpResponse:
    checks = selectors.readiness()
    ready = all(check.ok for check in checks)
    body = {
        "status": "ready" if ready else "not_ready",
        "checks": {check.name: {"ok": check.ok, "detail": check.detail} for check in checks},
    }
    return JsonResponse(body, status=200 if ready else 503)


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    token = settings.METRICS_TOKEN
    if not token:
        return JsonResponse({"error": "Metrics are off: set METRICS_TOKEN to enable /metrics."}, status=404)
    header = request.headers.get("Authorization", "")
    sent = header[7:].strip() if header.lower().startswith("bearer ") else ""
    if not hmac.compare_digest(sent.encode(), token.encode()):
        response = JsonResponse({"error": "Send 'Authorization: Bearer <METRICS_TOKEN>'."}, status=401)
        response["WWW-Authenticate"] = "Bearer"
        return response
    return HttpResponse(metrics.metrics_render(), content_type="text/plain; version=0.0.4; charset=utf-8")

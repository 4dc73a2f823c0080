"""The API docs page loads Swagger UI from our own origin, under the same Content-Security-Policy as the
dashboard: no CDN, no inline script, every asset it names is served by us."""

from __future__ import annotations

import re

from django.contrib.staticfiles import finders
from django.test import Client


def test_it_serves_the_docs_from_our_own_origin_under_the_csp(settings):
    response = Client().get("/api/sdk/v1/docs")
    assert response.status_code == 200
    assert response["Content-Security-Policy"] == settings.DASHBOARD_CONTENT_SECURITY_POLICY
    html = response.content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert assets and all(a.startswith("/static/") or a.startswith("data:") for a in assets), assets
    for asset in assets:
        if asset.startswith("/static/"):
            assert finders.find(asset.removeprefix("/static/")), f"{asset} is not a file we serve"
    # Only the JSON settings block is inline, which no browser executes.
    assert re.findall(r"<script(?![^>]*\bsrc=)([^>]*)>", html) == [
        ' type="application/json" id="swagger-settings"'
    ]
    assert "cdn" not in html.lower()

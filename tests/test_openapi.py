"""The OpenAPI document is served, lists every endpoint, and describes every request field."""

from __future__ import annotations

from django.test import Client

EXPECTED_PATHS = {
    "/api/sdk/v1/health",
    "/api/sdk/v1/memories/add",
    "/api/sdk/v1/memories/search",
    "/api/sdk/v1/memories/list",
    "/api/sdk/v1/memories/edit",
    "/api/sdk/v1/memories/forget",
    "/api/sdk/v1/memories/bulk-forget",
    "/api/sdk/v1/memories/vacuum",
}


def openapi() -> dict:
    response = Client().get("/api/sdk/v1/openapi.json")
    assert response.status_code == 200
    return response.json()


def test_it_lists_every_endpoint():
    assert set(openapi()["paths"]) >= EXPECTED_PATHS


def test_it_describes_every_field():
    schema = openapi()
    undescribed = []
    for name, component in schema["components"]["schemas"].items():
        for field, spec in component.get("properties", {}).items():
            if not spec.get("description"):
                undescribed.append(f"{name}.{field}")
    assert not undescribed, undescribed


def test_it_documents_bearer_auth():
    schema = openapi()
    schemes = schema["components"]["securitySchemes"]
    assert any(s.get("scheme") == "bearer" for s in schemes.values())
    assert schema["paths"]["/api/sdk/v1/memories/add"]["post"]["security"]


def test_it_serves_the_docs_page():
    response = Client().get("/api/sdk/v1/docs")
    assert response.status_code == 200
    assert b"openapi.json" in response.content

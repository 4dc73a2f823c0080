"""The OpenAPI document is served, lists every operation the routers declare in code (path, method and the
role its handler declares, as `x-cairn-role`), the roles page says the same, and every request field is
described."""

from __future__ import annotations

import re
from pathlib import Path

from django.test import Client

from config.api import api
from tenancy import policy

PREFIX = "/api/sdk/v1"
ROLES_PAGE = Path(__file__).resolve().parent.parent / "docs" / "roles-and-keys.md"


def openapi() -> dict:
    response = Client().get("/api/sdk/v1/openapi.json")
    assert response.status_code == 200
    return response.json()


def served() -> set[tuple[str, str, str | None]]:
    return {
        (method.upper(), path.removeprefix(PREFIX), spec.get("x-cairn-role"))
        for path, methods in openapi()["paths"].items()
        for method, spec in methods.items()
    }


def declared_in_code() -> set[tuple[str, str, str | None]]:
    """Every operation of every router mounted on the API, with the role its handler declares."""
    found = set()
    for prefix, router in api._routers:
        for path, path_view in router.path_operations.items():
            for operation in path_view.operations:
                for method in operation.methods:
                    full = "/" + "/".join(part.strip("/") for part in (prefix, path) if part.strip("/"))
                    found.add((method, full, policy.declared_role(operation.view_func)))
    return found


def documented() -> set[tuple[str, str, str]]:
    """The roles page's table of SDK routes: `METHOD /path` and the first role word of its row."""
    section = ROLES_PAGE.read_text().split("### SDK API", 1)[1].split("###", 1)[0]
    rows = re.findall(r"^\| `(GET|POST|PATCH|PUT|DELETE) (/[^`]*)` \| (\w+)", section, flags=re.MULTILINE)
    return {(method, path, role) for method, path, role in rows}


def test_it_serves_exactly_the_operations_the_code_declares_with_their_roles():
    document, code = served(), declared_in_code()
    assert len(code) >= 40 and all(role is not None for _, _, role in code)
    assert document == code, {"only served": document - code, "only in code": code - document}


def test_it_documents_every_operation_with_its_role():
    assert documented() == served(), {
        "only on the roles page": documented() - served(),
        "only served": served() - documented(),
    }


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

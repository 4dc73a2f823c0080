"""Every way in declares the role it needs: each operation of the served OpenAPI document, each MCP tool, each
dashboard view and each management command of the project. A new one without a declaration fails here."""

from __future__ import annotations

import asyncio
import re
from importlib import import_module
from pathlib import Path

from django.apps import apps
from django.core.management import get_commands, load_command_class
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from config.api import api
from mcp_server.server import TOOL_BODIES, McpSettings, build_server
from tenancy import policy

PROJECT_APPS = {"config", "ops", "tenancy", "memories", "graphsvc", "rollout", "retrieval", "pipeline",
                "conversations", "transfer", "mcp_server", "dashboard"}  # fmt: skip


def served_operations() -> set[tuple[str, str]]:
    document = Client().get("/api/sdk/v1/openapi.json").json()
    prefix = "/api/sdk/v1"
    return {
        (method.upper(), path.removeprefix(prefix))
        for path, methods in document["paths"].items()
        for method in methods
    }


def router_operations() -> dict[tuple[str, str], object]:
    found = {}
    # Each router's operations with their view functions: what the OpenAPI document is built from.
    for _, router in api._routers:
        for path, path_view in router.path_operations.items():
            for operation in path_view.operations:
                for method in operation.methods:
                    found[(method, "/" + path.lstrip("/"))] = operation.view_func
    return found


def test_it_finds_a_declared_role_on_every_sdk_operation():
    operations = router_operations()
    assert served_operations() <= set(operations), "an operation is served that the routers do not list"
    undeclared = sorted(
        f"{m} {p}" for (m, p), view in operations.items() if policy.declared_role(view) is None
    )
    assert not undeclared, f"SDK routes without a declared role: {undeclared}"
    assert {policy.declared_role(view) for view in operations.values()} <= set(policy.DECLARATIONS)


def test_it_finds_a_declared_role_on_every_mcp_tool():
    server = build_server(McpSettings(api_key=None))
    listed = {tool.name for tool in asyncio.run(server.list_tools())}
    assert listed == set(TOOL_BODIES), "every MCP tool runs a body listed in TOOL_BODIES"
    undeclared = sorted(name for name, body in TOOL_BODIES.items() if policy.declared_role(body) is None)
    assert not undeclared, f"MCP tools without a declared role: {undeclared}"


def _dashboard_patterns() -> list[URLPattern]:
    patterns: list[URLPattern] = []

    def walk(entries: list[URLPattern | URLResolver]) -> None:
        for entry in entries:
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns)
            else:
                patterns.append(entry)

    walk(get_resolver().url_patterns)
    return [
        p
        for p in patterns
        if getattr(p.callback, "__module__", "").split(".")[0] in {"dashboard", "django"}
        and not str(p.pattern).startswith(("api/", "healthz", "readyz", "metrics", "static"))
    ]


def test_it_finds_a_declared_role_on_every_dashboard_view():
    patterns = _dashboard_patterns()
    assert len(patterns) >= 20
    undeclared = sorted(str(p.pattern) for p in patterns if policy.declared_role(p.callback) is None)
    assert not undeclared, f"dashboard views without a declared role: {undeclared}"


def test_it_finds_the_operator_role_on_every_management_command():
    ours = {name: app for name, app in get_commands().items() if app.split(".")[0] in PROJECT_APPS}
    assert {"apikey_create", "member_set", "cairn_demo", "workspace_import", "mcp"} <= set(ours)
    undeclared = []
    for name, app in ours.items():
        command = load_command_class(app, name)
        if policy.declared_role(type(command)) != policy.OPERATOR:
            undeclared.append(name)
    assert not undeclared, f"commands that do not declare the operator role: {sorted(undeclared)}"


def test_it_refuses_an_unknown_role():
    for make in (policy.requires, policy.declare):
        try:
            make("superuser")
        except ValueError:
            continue
        raise AssertionError(f"{make.__name__} accepted an unknown role")


def test_it_knows_every_project_app():
    installed = {config.name.split(".")[0] for config in apps.get_app_configs()}
    assert PROJECT_APPS - {"config"} <= installed
    assert import_module("config.api").api is api


def _documented_roles(section: str) -> dict[str, str]:
    text = (Path(__file__).resolve().parents[1] / "docs" / "roles-and-keys.md").read_text()
    body = text.split(f"### {section}", 1)[1].split("###", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` \| ([a-z]+)", body, re.M)
    return dict(rows)


def test_it_documents_every_route_and_tool_with_the_role_it_declares():
    documented = _documented_roles("SDK API (`/api/sdk/v1`)")
    declared = {
        f"{method} {path}": policy.declared_role(view) for (method, path), view in router_operations().items()
    }
    assert documented == declared
    tools = _documented_roles("MCP tools")
    assert tools == {name: policy.declared_role(body) for name, body in TOOL_BODIES.items()}

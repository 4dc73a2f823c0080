"""Imports run one way: the apps form layers, and a module imports only from its own layer or an earlier one.

The layers, lowest first (the order of INSTALLED_APPS):

    0 config   1 ops   2 tenancy   3 memories   4 graphsvc   5 rollout   6 retrieval
    7 pipeline, conversations   8 transfer
    9 the surface

The surface is where requests, commands and tools come in:

- every module named ``api``, ``views``, ``urls`` or ``admin`` in an app other than config (SDK routers,
  pages, URL tables);
- every management command (``<app>.management.commands.*``, helpers shared by the commands included);
- the whole of ``mcp_server`` and ``dashboard``: they are nothing but ways in (``dashboard.access`` too);
- the entry points in ``config``: ``config.api`` (the NinjaAPI that mounts every app's router),
  ``config.urls``, ``config.wsgi``, ``config.asgi`` and ``config.gunicorn_conf``.

``apps.py`` files are not surface: an AppConfig's ``ready()`` runs in every process, so it belongs to its
app's layer like the app's other modules. Migrations belong to their app as well.

Every import counts wherever it is written: at module level, inside functions and methods, under
``if TYPE_CHECKING``, and ``import_module("a.b")`` with a literal name. Dotted strings that Django or
django-q2 resolve at run time (INSTALLED_APPS, MIDDLEWARE, task names in broker messages) are not imports and
are not checked. ``from pkg import name`` counts as an import of ``pkg.name`` when that is a module, else of
``pkg``.

The test fails on
(a) a module below the surface that imports a module of a later layer, or any surface module;
(b) a surface module that imports another app's surface module (routes and commands share services, not each
    other), except ``config.api`` and ``config.urls``, whose job is to mount every app's routers and URLs;
(c) an import cycle between files: a strongly connected component (Tarjan) of more than one module in the
    graph of all imports, module-level and function-level alike.

A true exception goes into ALLOWED with its reason; a violation is otherwise fixed in the code, not here.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = {
    "config": 0,
    "ops": 1,
    "tenancy": 2,
    "memories": 3,
    "graphsvc": 4,
    "rollout": 5,
    "retrieval": 6,
    "pipeline": 7,
    "conversations": 7,
    "transfer": 8,
    "mcp_server": 9,
    "dashboard": 9,
}
SURFACE = 9
SURFACE_NAMES = {"api", "views", "urls", "admin"}
SURFACE_APPS = {"mcp_server", "dashboard"}
CONFIG_SURFACE = {"config.api", "config.urls", "config.wsgi", "config.asgi", "config.gunicorn_conf"}
ASSEMBLERS = {"config.api", "config.urls"}  # surface modules that mount the other apps' surfaces

# (importer, imported) -> why this one import may break the rules. Keep it short and explained.
ALLOWED: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int
    text: str

    def __str__(self) -> str:
        path = project_modules()[self.importer].relative_to(ROOT)
        return f"{path}:{self.line}: {self.text}  ({self.importer} -> {self.imported})"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def project_modules() -> dict[str, Path]:
    return {module_name(path): path for app in LAYERS for path in sorted((ROOT / app).rglob("*.py"))}


def app_of(module: str) -> str:
    return module.split(".", 1)[0]


def is_surface(module: str) -> bool:
    app = app_of(module)
    return (
        app in SURFACE_APPS
        or module in CONFIG_SURFACE
        or (app != "config" and module.rpartition(".")[2] in SURFACE_NAMES)
        or ".management.commands." in module
    )


def layer_of(module: str) -> int:
    return SURFACE if is_surface(module) else LAYERS[app_of(module)]


def _resolve(name: str, modules: Iterable[str]) -> str | None:
    """The project module `name` lies in: itself, or its nearest enclosing package."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _absolute(module: str, is_package: bool, level: int, target: str | None) -> str:
    if level == 0:
        return target or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    base = package[: len(package) - (level - 1)]
    return ".".join([*base, target] if target else base)


def _import_module_target(node: ast.Call) -> str | None:
    name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
    if name == "import_module" and node.args and isinstance(node.args[0], ast.Constant):
        value = node.args[0].value
        return value if isinstance(value, str) else None
    return None


def imports_in_source(module: str, source: str, modules: dict[str, Path]) -> Iterator[Import]:
    """Every import of a module in `modules` that `source` (the text of `module`) makes, at any depth."""
    is_package = module in modules and modules[module].name == "__init__.py"
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, is_package, node.level, node.module)
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names
            ]
        elif isinstance(node, ast.Call) and (target := _import_module_target(node)):
            targets = [target]
        for target in targets:
            resolved = _resolve(target, modules)
            if resolved is not None and resolved != module:
                yield Import(module, resolved, node.lineno, lines[node.lineno - 1].strip())


@cache
def all_imports() -> tuple[Import, ...]:
    modules = project_modules()
    found = (
        edge
        for module, path in modules.items()
        for edge in imports_in_source(module, path.read_text(), modules)
    )
    return tuple(dict.fromkeys(found))  # `from a import b, c` of one module counts once


def layer_violations() -> list[Import]:
    return [
        edge
        for edge in all_imports()
        if not is_surface(edge.importer)
        and (is_surface(edge.imported) or layer_of(edge.imported) > layer_of(edge.importer))
        and (edge.importer, edge.imported) not in ALLOWED
    ]


def surface_violations() -> list[Import]:
    return [
        edge
        for edge in all_imports()
        if is_surface(edge.importer)
        and is_surface(edge.imported)
        and app_of(edge.importer) != app_of(edge.imported)
        and edge.importer not in ASSEMBLERS
        and (edge.importer, edge.imported) not in ALLOWED
    ]


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (an import chain can be deeper than the recursion limit likes)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> Iterator[str]:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        return iter(sorted(graph.get(node, ())))

    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, visit(root))]
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    work.append((child, visit(child)))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while not component or component[-1] != node:
                    component.append(stack.pop())
                    on_stack.discard(component[-1])
                components.append(sorted(component))
    return components


def import_cycles() -> list[list[Import]]:
    graph: dict[str, set[str]] = {module: set() for module in project_modules()}
    for edge in all_imports():
        graph[edge.importer].add(edge.imported)
    cycles = []
    for component in strongly_connected(graph):
        if len(component) > 1:
            members = set(component)
            cycles.append([e for e in all_imports() if e.importer in members and e.imported in members])
    return cycles


def _report(title: str, found: Iterable[Import]) -> str:
    return title + "".join(f"\n  {edge}" for edge in found)


def test_every_project_app_has_a_layer_in_installed_apps_order():
    from django.conf import settings

    assert {app_of(module) for module in project_modules()} == set(LAYERS)
    installed = [app for app in settings.INSTALLED_APPS if app in LAYERS]
    # config is the project package (settings, URLs, the API), not an installed app.
    assert set(installed) == set(LAYERS) - {"config"}, "an app is missing from LAYERS or INSTALLED_APPS"
    assert installed == sorted(installed, key=LAYERS.__getitem__)


def test_no_module_imports_a_later_layer_or_the_surface():
    found = layer_violations()
    assert not found, _report(
        "A module below the surface imports a later layer or a surface module (move the code down, or let "
        "the caller pass it in):",
        found,
    )


def test_no_surface_module_imports_another_apps_surface():
    found = surface_violations()
    assert not found, _report(
        "A surface module imports another app's surface (share a service instead):", found
    )


def test_no_import_cycles_between_files():
    cycles = import_cycles()
    assert not cycles, "\n".join(
        _report(f"Import cycle {n} ({len({e.importer for e in cycle})} modules):", cycle)
        for n, cycle in enumerate(cycles, 1)
    )


def test_the_allow_list_names_imports_that_exist():
    present = {(edge.importer, edge.imported) for edge in all_imports()}
    assert not set(ALLOWED) - present, "remove allow-list entries the code no longer needs"


def test_the_checker_sees_every_kind_of_import_and_finds_cycles():
    source = (
        "import a.b\n"
        "from a import c, not_a_module\n"
        "from . import d\n"
        "def f():\n"
        "    from .e import thing\n"
        "    class K:\n"
        "        def g(self):\n"
        "            import_module('a.f.inner')\n"
        "if TYPE_CHECKING:\n"
        "    from a.g import T\n"
    )
    modules = {
        name: Path(name.replace(".", "/") + ".py") for name in ["a.x", "a.b", "a.c", "a.d", "a.e", "a.f"]
    }
    modules["a"] = Path("a/__init__.py")
    modules["a.g"] = Path("a/g/__init__.py")
    found = {(edge.imported, edge.line) for edge in imports_in_source("a.x", source, modules)}
    assert found == {("a.b", 1), ("a.c", 2), ("a", 2), ("a.d", 3), ("a.e", 5), ("a.f", 8), ("a.g", 10)}

    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert sorted(strongly_connected(graph)) == [["a", "b", "c"], ["d"], ["e"]]

    assert layer_of("memories.api") == SURFACE and layer_of("memories.services") == 3
    assert layer_of("dashboard.access") == SURFACE and layer_of("tenancy.access") == 2
    assert layer_of("config.api") == SURFACE and layer_of("config.settings") == 0
    assert layer_of("pipeline.management.commands.reembed") == SURFACE and layer_of("pipeline.apps") == 7


if __name__ == "__main__":
    print(_report("Layer violations:", layer_violations()))
    print(_report("Surface violations:", surface_violations()))
    for cycle in import_cycles():
        print(_report("Cycle:", cycle))

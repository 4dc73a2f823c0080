""".env.example and docs/configuration.md name every environment variable Cairn reads.

The variables are found in the source with the ast module, not by running it:

- in ``config/settings.py``: ``os.environ.get("NAME", …)``, ``os.environ["NAME"]``, ``os.environ.setdefault``,
  ``os.environ.pop``, ``os.getenv``, ``"NAME" in os.environ``, and calls of the settings' own helpers
  (``env_bool``, ``env_int``, ``env_float``, ``env_list`` and any other function of that file that reads the
  environment under a name it was given) with a literal first argument — nested calls included, as in
  ``env_int("A", env_int("B", 20))``;
- the same reads in the other modules the server, its commands and the Python SDK run (every project app,
  ``scripts/`` and ``sdk/python/cairn_sdk``): ``BIND``, ``CAIRN_VAR_DIR``, ``CAIRN_API_KEY`` and the like are
  not settings but belong in the same file.

A name read at module level of settings.py that is not a literal fails the test: nobody could list it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = ROOT / "config" / "settings.py"
ENV_EXAMPLE = ROOT / ".env.example"
CONFIGURATION = ROOT / "docs" / "configuration.md"
APPS = ["config", "ops", "tenancy", "memories", "graphsvc", "rollout", "retrieval", "pipeline", "transfer"]
OTHER_SOURCES = [*APPS, "mcp_server", "dashboard", "scripts", "sdk/python/cairn_sdk"]
# Set by Cairn for a process or a library, never configured by an operator.
NOT_CONFIGURATION = {
    "DJANGO_SETTINGS_MODULE": "which settings Django loads; manage.py, wsgi and asgi set it",
    "HF_HUB_OFFLINE": "set before the packaged model loads, so nothing is downloaded",
    "TRANSFORMERS_OFFLINE": "likewise",
    "HF_HUB_DISABLE_PROGRESS_BARS": "set before the model loads, so no progress bar fills the server's log",
    "CAIRN_CITUS_CLUSTER": "set by make test-citus for the suite: where the local cluster's nodes are",
}
ENVIRON_METHODS = {"get", "setdefault", "pop"}


def _is_environ(node: ast.AST) -> bool:
    """`os.environ` or a bare `environ`."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ"
    )


def _environ_key(node: ast.AST) -> ast.AST | None:
    """The expression naming the variable, when `node` reads the environment directly."""
    if isinstance(node, ast.Call) and node.args:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ENVIRON_METHODS and _is_environ(func.value):
            return node.args[0]
        if (isinstance(func, ast.Attribute) and func.attr == "getenv") or (
            isinstance(func, ast.Name) and func.id == "getenv"
        ):
            return node.args[0]
    if isinstance(node, ast.Subscript) and _is_environ(node.value):
        return node.slice
    if (
        isinstance(node, ast.Compare)
        and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops)
        and any(_is_environ(comparator) for comparator in node.comparators)
    ):
        return node.left
    return None


def _literal(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def env_helpers(tree: ast.Module) -> set[str]:
    """Functions defined in the module that read the environment under the name of one of their parameters."""
    helpers = set()
    for function in tree.body:
        if not isinstance(function, ast.FunctionDef):
            continue
        params = {arg.arg for arg in function.args.args + function.args.kwonlyargs}
        for node in ast.walk(function):
            key = _environ_key(node)
            if isinstance(key, ast.Name) and key.id in params:
                helpers.add(function.name)
    return helpers


def _inside_functions(tree: ast.Module) -> set[int]:
    return {
        id(node)
        for function in ast.walk(tree)
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        for node in ast.walk(function)
    }


def env_reads(source: str) -> tuple[dict[str, int], list[int]]:
    """Variable name -> first line it is read on, and the lines of module-level reads with a computed name."""
    tree = ast.parse(source)
    helpers = env_helpers(tree)
    in_functions = _inside_functions(tree)
    names: dict[str, int] = {}
    computed: list[int] = []
    for node in ast.walk(tree):
        key = _environ_key(node)
        if key is None and isinstance(node, ast.Call) and node.args:
            func = node.func
            if isinstance(func, ast.Name) and func.id in helpers:
                key = node.args[0]
        if key is None:
            continue
        name = _literal(key)
        if name is not None:
            names.setdefault(name, node.lineno)
        elif id(node) not in in_functions:
            computed.append(node.lineno)
    return names, computed


def settings_variables() -> dict[str, int]:
    return env_reads(SETTINGS.read_text())[0]


def _python_files() -> Iterator[Path]:
    for folder in OTHER_SOURCES:
        yield from sorted((ROOT / folder).rglob("*.py"))


def other_variables() -> dict[str, str]:
    """Variables read outside settings.py (name -> first file), less those Cairn sets for itself."""
    found: dict[str, str] = {}
    for path in _python_files():
        if path == SETTINGS or "migrations" in path.parts:
            continue
        for name in env_reads(path.read_text())[0]:
            found.setdefault(name, str(path.relative_to(ROOT)))
    return {name: where for name, where in found.items() if name not in NOT_CONFIGURATION}


def env_example_entries() -> list[str]:
    """Names assigned in .env.example, commented out (`# NAME=value`) or not."""
    pattern = re.compile(r"^\s*#?\s*([A-Z][A-Z0-9_]*)=", re.MULTILINE)
    return pattern.findall(ENV_EXAMPLE.read_text())


def test_settings_reads_are_found():
    names = settings_variables()
    # A few that exercise each way of reading: a helper, a nested helper, os.environ.get inside a function,
    # os.environ[...] and setdefault.
    for name in [
        "DEBUG",
        "DASHBOARD_MAX_ACTIVE_KEYS",
        "SECRET_KEY",
        "CAIRN_DATABASE_NAME",
        "WORKER_PROCESSES",
    ]:
        assert name in names, name
    assert len(names) > 100


def test_the_parser_sees_every_way_of_reading():
    source = (
        "import os\n"
        "from os import environ, getenv\n"
        "def env_str(name, default):\n"
        "    return os.environ.get(name, default)\n"
        "def _load(path):\n"
        "    for name in path:\n"
        "        os.environ.setdefault(name, '')\n"
        "A = env_str('A', env_str('B', ''))\n"
        "C = os.environ['C']\n"
        "D = 'D' in os.environ\n"
        "E = getenv('E')\n"
        "F = environ.pop('F', None)\n"
        "def g():\n"
        "    return os.environ.get('G', '').strip()\n"
        "H = [x for x in os.environ.get('H', '').split(',')]\n"
        "I = os.environ.get(PREFIX + 'I')\n"
    )
    names, computed = env_reads(source)
    assert set(names) == {"A", "B", "C", "D", "E", "F", "G", "H"}
    assert computed == [16]


def test_settings_reads_every_variable_by_a_literal_name():
    computed = env_reads(SETTINGS.read_text())[1]
    assert not computed, f"config/settings.py reads a variable whose name is computed, lines {computed}"


def test_env_example_lists_every_variable_settings_reads():
    listed = set(env_example_entries())
    missing = {name: line for name, line in settings_variables().items() if name not in listed}
    assert not missing, (
        "Missing from .env.example (add `# NAME=default` with a one-line meaning): "
        + ", ".join(f"{name} (config/settings.py:{line})" for name, line in sorted(missing.items()))
    )


def test_configuration_doc_explains_every_variable_settings_reads():
    text = CONFIGURATION.read_text()
    missing = [
        f"{name} (config/settings.py:{line})"
        for name, line in sorted(settings_variables().items())
        if not re.search(rf"(?<![A-Z0-9_]){name}(?![A-Z0-9_])", text)
    ]
    assert not missing, "Missing from docs/configuration.md: " + ", ".join(missing)


def test_env_example_and_the_doc_list_variables_read_elsewhere():
    listed = set(env_example_entries())
    text = CONFIGURATION.read_text()
    not_listed = [
        f"{name} ({where})" for name, where in sorted(other_variables().items()) if name not in listed
    ]
    not_documented = [
        f"{name} ({where})"
        for name, where in sorted(other_variables().items())
        if not re.search(rf"(?<![A-Z0-9_]){name}(?![A-Z0-9_])", text)
    ]
    assert not not_listed, "Missing from .env.example: " + ", ".join(not_listed)
    assert not not_documented, "Missing from docs/configuration.md: " + ", ".join(not_documented)


def test_env_example_lists_nothing_stale_and_nothing_twice():
    entries = env_example_entries()
    read = set(settings_variables()) | set(other_variables())
    stale = sorted(set(entries) - read)
    twice = sorted({name for name in entries if entries.count(name) > 1})
    assert not stale, f"Listed in .env.example but read nowhere: {stale}"
    assert not twice, f"Listed more than once in .env.example: {twice}"

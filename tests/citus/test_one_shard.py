"""On the Citus cluster (`make test-citus`): every statement a tenant's request or job runs is planned to
one shard.

Each hot path runs for real through the SDK API (or the job runner) while the runtime connection's statements
are captured with their parameters; every captured statement that touches a distributed table is then
EXPLAINed on the cluster, in the same workspace, and its plan must have at most one task (Citus's "Task
Count"). A statement that relies on the row-level-security policy alone, or joins a table without naming
workspace_id, fans out to every shard and fails here. Statements that are cross-workspace by nature are listed
in CROSS_WORKSPACE with why they may be.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connections

from tenancy.rls import workspace_context
from tests.conftest import Personas
from tests.graphsvc.graph_builder import GraphBuilder
from tests.memories.helpers import run_jobs
from tests.transfer.helpers import export_lines, import_report

pytestmark = pytest.mark.skipif(
    not os.environ.get("CAIRN_CITUS_CLUSTER"), reason="runs on the Citus cluster (make test-citus)"
)

# Statements that visit every shard on purpose, never on a tenant's request path:
CROSS_WORKSPACE = {
    # The worker's claim of due pipeline jobs: it looks for work in every workspace (django-q's broker and the
    # job queue tables stay on the coordinator; the claim of pipeline_jobs rows runs in the worker process).
    "pipeline job claim": re.compile(r"FROM pipeline_jobs\b.*\bFOR UPDATE SKIP LOCKED", re.S),
}


def _distributed_tables() -> list[str]:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT logicalrelid::text FROM pg_dist_partition WHERE partmethod = 'h'")
        return [row[0] for row in cursor.fetchall()]


def _task_counts(plan: Any) -> Iterator[int]:
    if isinstance(plan, dict):
        for key, value in plan.items():
            if key == "Task Count":
                yield int(value)
            else:
                yield from _task_counts(value)
    elif isinstance(plan, list):
        for item in plan:
            yield from _task_counts(item)


def _tasks(sql: str, workspace_id: int, params: Any = None) -> int:
    """The largest task count in the statement's plan on the cluster, planned inside the workspace."""
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute("SAVEPOINT explain_one")
        try:
            cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
            plan = cursor.fetchone()[0]
        finally:
            cursor.execute("ROLLBACK TO SAVEPOINT explain_one")
    plan = json.loads(plan) if isinstance(plan, str) else plan
    return max(_task_counts(plan), default=0)


def _statements(run: Callable[[], object]) -> list[tuple[str, Any]]:
    """(sql, parameters) of every statement the runtime connection runs in `run` (the first row's of an
    executemany)."""
    seen: list[tuple[str, Any]] = []

    def record(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if many:
            params = list(params)
            seen.append((sql, params[0] if params else None))
        else:
            seen.append((sql, params))
        return execute(sql, params, many, context)

    with connections["app"].execute_wrapper(record):
        run()
    return seen


def _checked(statements: list[tuple[str, Any]], tables: list[str]) -> list[tuple[str, Any]]:
    names = re.compile(r"\b(" + "|".join(map(re.escape, tables)) + r")\b")
    kept = []
    for sql, params in statements:
        head = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
        if head in {"SET", "SAVEPOINT", "RELEASE", "ROLLBACK", "BEGIN", "COMMIT"} or "; SET LOCAL" in sql:
            continue
        if not names.search(sql) or any(rule.search(sql) for rule in CROSS_WORKSPACE.values()):
            continue
        kept.append((sql, params))
    return kept


def _offenders(workspace_id: int, run: Callable[[], object]) -> tuple[int, list[str]]:
    statements = _checked(_statements(run), _distributed_tables())
    offenders = []
    for sql, params in statements:
        tasks = _tasks(sql, workspace_id, params)
        if tasks > 1:
            offenders.append(f"{tasks} tasks: {' '.join(sql.split())[:600]}")
    return len(statements), offenders


@pytest.fixture
def seeded(personas: Personas, alice_ws: int) -> dict[str, Any]:
    api = personas.alice_api
    first = api.add("Alex Doe maintains the payments gateway written in Go", tags=["payments"])
    api.add("The payments gateway deploys to Kubernetes every Tuesday", tags=["deploy"])
    api.add("Alex Doe prefers Postgres for the ledger service")
    run_jobs(alice_ws)
    # Entities and facts for the graph reads (extraction needs an LLM; the builder writes what it would).
    graph = GraphBuilder(alice_ws)
    graph.fact("Alex Doe", "maintains", "Payments Gateway", confidence=0.9)
    graph.fact("Payments Gateway", "uses", "Postgres DB", confidence=0.8)
    graph.fact("Postgres DB", "runs_on", "Linux Box")
    return {"memory": first}


def _edit(p: Personas, s: dict[str, Any]) -> object:
    body = {"id": s["memory"]["id"], "content": "Alex Doe maintains the payments gateway, now in Rust"}
    return p.alice_api.ok("memories/edit", body)


def _search(strategy: str | None) -> Callable[[Personas, dict[str, Any]], object]:
    body = {"query": "payments gateway", **({"strategy": strategy} if strategy else {})}
    return lambda p, s: p.alice_api.ok("memories/search", body)


def _route(path: str, body: dict[str, Any]) -> Callable[[Personas, dict[str, Any]], object]:
    return lambda p, s: p.alice_api.ok(path, body)


HOT_PATHS: list[tuple[str, Callable[[Personas, dict[str, Any]], object]]] = [
    (
        "memories/add",
        lambda p, s: p.alice_api.add("A fresh note about the billing service", tags=["billing"]),
    ),
    ("memories/edit", _edit),
    ("memories/forget", lambda p, s: p.alice_api.ok("memories/forget", {"id": s["memory"]["id"]})),
    ("search lexical", _search("lexical")),
    ("search semantic", _search("semantic")),
    ("search hybrid", _search(None)),
    ("context/get depth 1", _route("context/get", {"query": "who maintains payments"})),
    ("context/get depth 2", _route("context/get", {"query": "payments", "graphDepth": 2})),
    ("graph/traverse", _route("graph/traverse", {"startEntity": "alex doe", "maxHops": 2})),
    ("graph/facts", _route("graph/facts", {"query": "who maintains payments?"})),
    ("memories/list", _route("memories/list", {})),
    ("export", lambda p, s: export_lines(p.alice_api)),
    # A round trip: the export's own file imported back (its memories are found by id and skipped or updated).
    ("import", lambda p, s: import_report(p.alice_api, export_lines(p.alice_api))),
]


@pytest.mark.parametrize(("name", "path"), HOT_PATHS, ids=[name.replace(" ", "-") for name, _ in HOT_PATHS])
def test_it_plans_every_statement_of_a_hot_path_to_one_shard(
    name: str,
    path: Callable[[Personas, dict[str, Any]], object],
    personas: Personas,
    alice_ws: int,
    seeded: Any,
) -> None:
    checked, offenders = _offenders(alice_ws, lambda: path(personas, seeded))
    assert checked > 0, f"{name}: no statement touched a distributed table"
    assert offenders == [], f"{name}: statements on more than one shard:\n" + "\n".join(offenders)


def test_it_plans_the_pipeline_jobs_to_one_shard(personas: Personas, alice_ws: int) -> None:
    personas.alice_api.add("Alex Doe reviews every change to the payments gateway", tags=["review"])
    checked, offenders = _offenders(alice_ws, lambda: run_jobs(alice_ws))
    assert checked > 0
    assert offenders == [], "jobs: statements on more than one shard:\n" + "\n".join(offenders)


def test_it_catches_a_statement_that_relies_on_the_policy_alone(personas: Personas, alice_ws: int) -> None:
    """The check itself: without workspace_id the statement visits every shard and is reported."""
    assert _tasks("SELECT count(*) FROM memories", alice_ws) > 1
    assert _tasks(f"SELECT count(*) FROM memories WHERE workspace_id = {int(alice_ws)}", alice_ws) == 1

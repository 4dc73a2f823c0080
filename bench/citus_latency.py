"""context/get and memories/add on the local Citus cluster against the embedded single node, in the same run.

Each target runs in its own process (the database is chosen by the environment at start): a fresh workspace
gets --memories memories through memories/add (embedded by the pipeline's job runner, in process), then
--calls calls of context/get (hybrid, graphDepth 1) and of memories/add go through Django's test client, in
process, one at a time. Reported per target: p50/p95 wall time per call, and CPU per call of the app process
and of every PostgreSQL process of the target (on Citus: coordinator and workers together).

    .venv/bin/python bench/citus_latency.py [--memories 200] [--calls 200]

Needs `make citus` (the cluster's app database migrated: `make test-citus` does it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

QUERIES = ["who maintains the payments gateway", "deploy schedule", "ledger database", "billing incidents"]


def _postgres_cpu(datadirs: list[str]) -> float:
    import psutil

    total = 0.0
    for process in psutil.process_iter(["name", "cmdline"]):
        try:
            if process.info["name"] != "postgres":
                continue
            parent = process if any(d in " ".join(process.info["cmdline"] or []) for d in datadirs) else None
            if parent is None:
                parent_process = process.parent()
                cmd = " ".join(parent_process.cmdline()) if parent_process else ""
                if not any(d in cmd for d in datadirs):
                    continue
            times = process.cpu_times()
            total += times.user + times.system
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return total


def run_target(target: str, memories: int, calls: int) -> dict[str, Any]:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    # The calls come one key at a time, far past the per-key request limit a deployment keeps.
    os.environ.setdefault("RATE_LIMIT_REQUESTS", "1000000")
    import django

    django.setup()
    from django.test import Client

    from pipeline.services import jobs_run_pending
    from tenancy import services
    from tests.conftest import SdkClient, make_user

    stamp = f"{target}{int(time.time() * 1000) % 10**9}"
    user = make_user(f"bench-{stamp}")
    api = SdkClient(Client(), services.api_key_create(user=user, scope="admin").raw_key)
    workspace = services.personal_workspace_ensure(user=user).id
    words = ["payments", "gateway", "ledger", "deploy", "billing", "kubernetes", "postgres", "incident"]
    for i in range(memories):
        api.add(f"Note {i}: the {words[i % 8]} team changed the {words[(i * 3) % 8]} setup on day {i % 30}")
    jobs_run_pending(workspace_id=workspace)
    if target == "citus":
        from config import citus

        datadirs = [str(ROOT / "var" / "citus" / "nodes" / n.name) for n in citus.cluster_load().nodes]
    else:
        datadirs = [str(ROOT / "var" / "pgdata")]
    results: dict[str, Any] = {"target": target}
    for name, call in (
        ("context/get", lambda i: api.ok("context/get", {"query": QUERIES[i % 4], "graphDepth": 1})),
        ("memories/add", lambda i: api.add(f"Bench write {i} about the {words[i % 8]} service")),
    ):
        for i in range(5):  # warm caches and connections
            call(i)
        durations = []
        app_cpu, db_cpu = time.process_time(), _postgres_cpu(datadirs)
        for i in range(calls):
            started = time.perf_counter()
            call(i)
            durations.append(time.perf_counter() - started)
        app_cpu, db_cpu = time.process_time() - app_cpu, _postgres_cpu(datadirs) - db_cpu
        durations.sort()
        results[name] = {
            "p50_ms": round(statistics.median(durations) * 1000, 2),
            "p95_ms": round(durations[int(len(durations) * 0.95) - 1] * 1000, 2),
            "app_cpu_ms_per_call": round(app_cpu / calls * 1000, 2),
            "db_cpu_ms_per_call": round(db_cpu / calls * 1000, 2),
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--memories", type=int, default=200)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--target", choices=["single", "citus"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.target:
        print(json.dumps(run_target(args.target, args.memories, args.calls)))
        return
    env_cluster = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "citus_cluster.py"), "env"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    citus_env = dict(line.split("=", 1) for line in env_cluster.split())
    rows = []
    for target, extra in (("single", {}), ("citus", {**citus_env, "DEBUG": "1"})):
        env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DATABASE_APP_URL"}}
        env.update(extra)
        out = subprocess.run(
            [sys.executable, __file__, "--target", target, "--memories", str(args.memories),
             "--calls", str(args.calls)],
            env=env, capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        rows.append(json.loads(out.strip().splitlines()[-1]))
    print(f"{'target':8} {'route':13} {'p50 ms':>8} {'p95 ms':>8} {'app CPU ms':>11} {'DB CPU ms':>10}")
    for row in rows:
        for route in ("context/get", "memories/add"):
            r = row[route]
            print(
                f"{row['target']:8} {route:13} {r['p50_ms']:>8} {r['p95_ms']:>8} "
                f"{r['app_cpu_ms_per_call']:>11} {r['db_cpu_ms_per_call']:>10}"
            )


if __name__ == "__main__":
    main()

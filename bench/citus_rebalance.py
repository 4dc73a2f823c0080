"""Scale out while writing: add a worker to the local Citus cluster and rebalance its shards while clients
keep storing memories through the SDK API, then move the largest tenant to a shard of its own, still under
writes; at the end every acknowledged write must be there.

What runs (needs `make citus` with the app database migrated, e.g. after one `make test-citus`):
- the web process (gunicorn, config/gunicorn_conf.py, 2 workers) against the cluster's coordinator;
- --writers writer processes, each with its own workspace and API key, posting memories/add at --rate writes/s
  with an Idempotency-Key; a failed attempt (5xx or a dropped connection) is retried with the same key until
  it is acknowledged (a 2xx with the memory's id), and every acknowledged id is recorded;
- one of the workspaces (the "large tenant", written by writer 0) is first given --large-rows memories;
- `scripts/citus_cluster.py add-worker` (initdb, start, citus_add_node), then `citus_rebalance_start()` (shard
  transfer mode auto: logical replication; block_writes only if that is refused), polled through
  `citus_rebalance_status()` with progress and the writers' rate printed;
- `isolate_tenant_to_new_shard('memories', <large tenant>, 'CASCADE', 'block_writes')` (--isolate-mode auto
  tries the split by logical replication first, with a deadline), then proof that the tenant is alone on
  its shard (citus_shards, the shard's own rows on its worker) and that a context/get in that workspace runs
  every statement as one task on the new shards, and answers through the web process;
- the writers stop; every acknowledged id is counted on the cluster and read back through memories/list;
- unless --keep, the added worker is drained (`citus_drain_node`), removed and its node deleted, so the
  cluster is back to two workers.

    .venv/bin/python bench/citus_rebalance.py [--writers 4] [--rate 10] [--large-rows 20000] [--keep]

The result is printed as JSON and written to bench/results/citus_rebalance.json. The bench's users and
workspaces are deleted at the end, but the shard groups the isolation split stay (Citus does not merge shards
back): each run leaves the app database's tables with two more shard groups. `make citus-stop` and removing
var/citus/nodes starts the cluster afresh.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

API = "/api/sdk/v1"
CLUSTER = [sys.executable, str(ROOT / "scripts" / "citus_cluster.py")]
WORDS = ["payments", "gateway", "ledger", "deploy", "billing", "kubernetes", "postgres", "incident"]
# A failed write is retried with the same Idempotency-Key for this long before the writer gives it up (given
# up is not acknowledged: it is reported, never counted as lost).
RETRY_SECONDS = 120.0


# --- Writers (each its own process) ---


def writer_main(args: argparse.Namespace) -> None:
    """Post memories/add at a steady rate until the stop file appears; one JSON line per outcome."""
    with Path(args.out).open("a", buffering=1) as out:
        write_loop(args, out)


def write_loop(args: argparse.Namespace, out: Any) -> None:
    stop = Path(args.stop)
    headers = {"Authorization": f"Bearer {args.key}", "Content-Type": "application/json"}
    conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=60)
    interval = 1.0 / args.rate
    due = time.monotonic()
    n = 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while not stop.exists():
        n += 1
        body = json.dumps(
            {
                "content": f"Rebalance write {args.index}-{n}: the {WORDS[n % 8]} service changed its "
                f"{WORDS[(n * 3) % 8]} setup"
            }
        )
        request_headers = {**headers, "Idempotency-Key": str(uuid.uuid4())}
        first = time.time()
        attempts = 0
        while True:
            attempts += 1
            began = time.perf_counter()
            try:
                conn.request("POST", f"{API}/memories/add", body, request_headers)
                response = conn.getresponse()
                raw = response.read()
                status = response.status
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=60)
                status, raw = 0, repr(exc).encode()
            took = (time.perf_counter() - began) * 1000
            if status in (200, 201):
                data = json.loads(raw)["data"]
                record = {
                    "t": time.time(),
                    "ack": data["id"],
                    "ms": round(took, 1),
                    "attempts": attempts,
                    "wait_ms": round((time.time() - first) * 1000, 1),
                }
                out.write(json.dumps(record) + "\n")
                break
            code = ""
            with contextlib.suppress(ValueError, KeyError, TypeError):
                code = json.loads(raw)["error"]["code"]
            out.write(
                json.dumps(
                    {
                        "t": time.time(),
                        "error": status,
                        "code": code or raw[:160].decode(errors="replace"),
                        "ms": round(took, 1),
                    }
                )
                + "\n"
            )
            if 400 <= status < 500 and status not in (408, 429):
                break  # not retryable: a bug of this bench or the server; reported, never acknowledged
            if time.time() - first > RETRY_SECONDS:
                out.write(json.dumps({"t": time.time(), "gave_up": True}) + "\n")
                break
            time.sleep(min(2.0, 0.1 * attempts))
        due += interval
        time.sleep(max(0.0, due - time.monotonic()))
        due = max(due, time.monotonic() - interval)  # after a stall, no burst to catch up
    conn.close()


def outcomes(files: list[Path]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    acks: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    for index, path in enumerate(files):
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            with contextlib.suppress(ValueError):
                item = json.loads(line)
                item["writer"] = index
                (acks if "ack" in item else errors).append(item)
    return acks, errors


def window(
    acks: list[dict[str, Any]], errors: list[dict[str, Any]], start: float, end: float
) -> dict[str, Any]:
    inside = [a for a in acks if start <= a["t"] < end]
    failed = [e for e in errors if start <= e["t"] < end and "error" in e]
    latencies = sorted(a["wait_ms"] for a in inside)
    codes: dict[str, int] = {}
    for item in failed:
        label = f"{item['error']} {item['code']}"[:80]
        codes[label] = codes.get(label, 0) + 1
    return {
        "seconds": round(end - start, 1),
        "acknowledged": len(inside),
        "writes_per_s": round(len(inside) / max(end - start, 1e-9), 1),
        "p50_ms": latencies[len(latencies) // 2] if latencies else None,
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] if latencies else None,
        "max_ms": latencies[-1] if latencies else None,
        "retried_attempts": len(failed),
        "errors": codes,
    }


# --- The cluster ---


def cluster_env() -> dict[str, str]:
    out = subprocess.run([*CLUSTER, "env"], capture_output=True, text=True, check=True).stdout
    return dict(line.split("=", 1) for line in out.split())


def superuser(node: Any | None = None, *, dbname: str | None = None) -> Any:
    import psycopg

    from config import citus
    from config.embedded_db import DATABASE_NAME

    node = node or citus.cluster_load().coordinator
    return psycopg.connect(
        host=node.host, port=node.port, user=citus.SUPERUSER, dbname=dbname or DATABASE_NAME, autocommit=True
    )


def distributed_tables(conn: Any) -> list[str]:
    """The hash-distributed tables of the cluster, by name."""
    return [
        r[0]
        for r in conn.execute(
            "SELECT logicalrelid::text FROM pg_dist_partition WHERE partmethod = 'h'"
        ).fetchall()
    ]


def owner_bypasses_rls(conn: Any, on: bool) -> dict[str, bool]:
    """Shard moves and splits replicate into the new shards as the tables' owner, and PostgreSQL refuses to
    replicate into a table whose row-level security applies to that role (FORCE ROW LEVEL SECURITY makes it
    apply to the owner). For the length of the operation the owner role bypasses row-level security; the web
    process and the workers use the runtime role, which keeps it. ALTER ROLE on the coordinator reaches every
    node; the answer is what each node then says."""
    from config import citus
    from config.embedded_db import OWNER_ROLE

    conn.execute(f"ALTER ROLE {OWNER_ROLE} {'BYPASSRLS' if on else 'NOBYPASSRLS'}")
    seen = {}
    for node in citus.cluster_load().nodes:
        with superuser(node) as node_conn:
            row = node_conn.execute("SELECT rolbypassrls FROM pg_roles WHERE rolname = %s", [OWNER_ROLE])
            seen[node.name] = bool(row.fetchone()[0])
    return seen


def placements(conn: Any) -> dict[str, int]:
    rows = conn.execute(
        "SELECT nodename || ':' || nodeport, count(*) FROM citus_shards GROUP BY 1 ORDER BY 1"
    ).fetchall()
    return {row[0]: int(row[1]) for row in rows}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_healthy(process: subprocess.Popen[bytes], port: int, log: Path) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"gunicorn exited:\n{log.read_text()[-3000:]}")
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            conn.request("GET", f"{API}/health")
            if conn.getresponse().status == 200:
                return
        except (OSError, http.client.HTTPException):
            pass
        finally:
            conn.close()
        time.sleep(0.3)
    sys.exit(f"gunicorn not healthy after 90 s:\n{log.read_text()[-3000:]}")


def stop_group(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=40)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def http_post(port: int, key: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(
            "POST",
            f"{API}/{path}",
            json.dumps(body),
            {"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        )
        response = conn.getresponse()
        envelope = json.loads(response.read())
    finally:
        conn.close()
    if response.status != 200 or not envelope.get("ok"):
        raise RuntimeError(f"{path}: HTTP {response.status} {envelope.get('error')}")
    return dict(envelope["data"])


def listed_ids(port: int, key: str, wanted: set[str]) -> set[str]:
    """The acknowledged ids memories/list shows, newest first, paging until all are seen or the list ends."""
    seen: set[str] = set()
    cursor = None
    while True:
        data = http_post(port, key, "memories/list", {"limit": 100, **({"cursor": cursor} if cursor else {})})
        seen.update(m["id"] for m in data["memories"] if m["id"] in wanted)
        cursor = data.get("nextCursor")
        if not cursor or seen >= wanted:
            return seen


def seed_large_tenant(workspace_id: int, rows: int) -> float:
    """Old memories of the large tenant, written straight into the shards (the write path would take minutes
    at this size; the search postings come from the table's own trigger)."""
    started = time.monotonic()
    with superuser() as conn:
        for offset in range(0, rows, 5000):
            count = min(5000, rows - offset)
            conn.execute(
                "INSERT INTO memories (id, workspace_id, content, type, layer, scope, tags, paths, "
                "created_at, updated_at, injection_flags, importance) SELECT gen_random_uuid(), %s, "
                "'Archived note ' || g || ': the ' || (ARRAY['payments','ledger','deploy','billing'])"
                "[1 + g %% 4] || ' team met on "
                "day ' || g %% 30, 'note', 'long_term', 'global', '{}', '{}', now() - interval '30 days', "
                "now() - interval '30 days', '{}', 0.5 FROM generate_series(%s::int, %s::int) g",
                [workspace_id, offset + 1, offset + count],
            )
    return round(time.monotonic() - started, 1)


# --- Isolation proof ---


def relation_names(plan: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(plan, dict):
        for key, value in plan.items():
            if key == "Relation Name" and isinstance(value, str):
                found.add(value)
            else:
                found |= relation_names(value)
    elif isinstance(plan, list):
        for item in plan:
            found |= relation_names(item)
    return found


def task_counts(plan: Any) -> list[int]:
    if isinstance(plan, dict):
        return [
            count
            for key, value in plan.items()
            for count in ([int(value)] if key == "Task Count" else task_counts(value))
        ]
    if isinstance(plan, list):
        return [count for item in plan for count in task_counts(item)]
    return []


def context_get_plans(key: str, workspace_id: int) -> dict[str, Any]:
    """A context/get in the workspace, in this process (Django's test client), with every statement the
    runtime connection runs captured; each one touching a distributed table is EXPLAINed in the workspace."""
    from django.db import connections
    from django.test import Client

    from tenancy.rls import workspace_context

    statements: list[tuple[str, Any]] = []

    def record(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        statements.append((sql, list(params)[0] if many and params else params))
        return execute(sql, params, many, context)

    with connections["app"].execute_wrapper(record):
        response = Client().post(
            f"{API}/context/get",
            data=json.dumps({"query": "who runs the payments ledger", "graphDepth": 1}),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {key}",
        )
    assert response.status_code == 200, response.content
    with superuser() as conn:
        tables = distributed_tables(conn)
        isolated = {
            int(r[0])
            for r in conn.execute(
                "SELECT shardid FROM pg_dist_shard WHERE shardminvalue = shardmaxvalue"
            ).fetchall()
        }
    names = re.compile(r"\b(" + "|".join(map(re.escape, tables)) + r")\b")
    explained, max_tasks, shards = 0, 0, set()
    for sql, params in statements:
        head = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
        if head in {"SET", "SAVEPOINT", "RELEASE", "ROLLBACK"} or "SET LOCAL" in sql or not names.search(sql):
            continue
        with workspace_context(workspace_id), connections["app"].cursor() as cursor:
            cursor.execute("SAVEPOINT explain_one")
            cursor.execute("EXPLAIN (FORMAT JSON, VERBOSE) " + sql, params)
            plan = cursor.fetchone()[0]
            cursor.execute("ROLLBACK TO SAVEPOINT explain_one")
        plan = json.loads(plan) if isinstance(plan, str) else plan
        explained += 1
        max_tasks = max([max_tasks, *task_counts(plan)])
        for name in relation_names(plan):
            match = re.search(r"_(\d+)$", name)
            if match and name.rsplit("_", 1)[0] in tables:
                shards.add(int(match.group(1)))
    return {
        "statements_explained": explained,
        "max_tasks_per_statement": max_tasks,
        "shards_touched": sorted(shards),
        "all_on_isolated_shards": bool(shards) and shards <= isolated,
        "memories_returned": len(response.json()["data"].get("memories", [])),
    }


def isolation_facts(workspace_id: int, new_shard: int) -> dict[str, Any]:
    from config import citus

    with superuser() as conn:
        shard = conn.execute(
            "SELECT s.shardid, s.shardminvalue, s.shardmaxvalue, c.nodename, c.nodeport, c.shard_size "
            "FROM pg_dist_shard s JOIN citus_shards c USING (shardid) WHERE s.shardid = "
            "get_shard_id_for_distribution_column('memories', %s)",
            [workspace_id],
        ).fetchone()
        colocated = conn.execute(
            "SELECT count(*) FROM pg_dist_shard s JOIN pg_dist_partition p USING (logicalrelid) "
            "WHERE p.colocationid = (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = "
            "'memories'::regclass) AND s.shardminvalue = %s AND s.shardmaxvalue = %s",
            [shard[1], shard[2]],
        ).fetchone()
        explain = conn.execute(
            "EXPLAIN (FORMAT JSON, VERBOSE) SELECT count(*) FROM memories WHERE workspace_id = %s",
            [workspace_id],
        ).fetchone()[0]
    node = next(n for n in citus.cluster_load().nodes if n.port == int(shard[4]))
    # The shard's own rows, read on the worker that holds it: one workspace, nobody else's.
    with superuser(node) as conn:
        inside = conn.execute(
            f"SELECT count(DISTINCT workspace_id), count(*) FROM memories_{int(shard[0])}"
        ).fetchone()
    return {
        "shard": int(shard[0]),
        "returned_by_isolate": new_shard,
        "hash_range": [shard[1], shard[2]],
        "single_hash_value": shard[1] == shard[2],
        "node": f"{shard[3]}:{shard[4]}",
        "shard_bytes": int(shard[5]),
        "colocated_tables_with_this_range": int(colocated[0]),
        "workspaces_in_shard": int(inside[0]),
        "memories_in_shard": int(inside[1]),
        "count_plan_tasks": max(task_counts(explain), default=0),
        "count_plan_relations": sorted(relation_names(explain)),
    }


def cleanup(workspaces: list[int], user_ids: list[int]) -> None:
    """The bench's tenants go again, the large one's rows with them: their rows in every distributed table
    (in passes, as the composite foreign keys allow), then the users, whose workspaces Django deletes."""
    import psycopg
    from django.contrib.auth import get_user_model
    from django.db import connections, transaction

    with superuser() as conn:
        tables = distributed_tables(conn)
        for _ in range(len(tables)):
            left = []
            for table in tables:
                try:
                    conn.execute(f"DELETE FROM {table} WHERE workspace_id = ANY(%s)", [workspaces])
                except psycopg.errors.ForeignKeyViolation:
                    left.append(table)
            if not left:
                break
            tables = left
        conn.execute("DELETE FROM workspaces WHERE id = ANY(%s)", [workspaces])
    # Their memberships, keys and the users themselves: coordinator tables, one transaction.
    with transaction.atomic(using="default"), connections["default"].cursor() as cursor:
        cursor.execute("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'")
        get_user_model().objects.filter(pk__in=user_ids).delete()
    connections.close_all()


# --- The run ---


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--rate", type=float, default=10.0, help="writes per second per writer")
    parser.add_argument("--large-rows", type=int, default=20000)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds the rebalance may take")
    # Citus 14.0.1 splits without blocking writes by logical replication too, but on this schema the split's
    # subscription never starts applying ("publisher did not send replica identity column expected by the
    # logical replication target relation", docs/operations.md): block_writes is the default.
    parser.add_argument("--isolate-mode", choices=["block_writes", "auto"], default="block_writes")
    parser.add_argument("--isolate-timeout", type=float, default=120.0, help="seconds for an auto split")
    parser.add_argument("--keep", action="store_true", help="leave the added worker in the cluster")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "citus_rebalance.json"))
    # One writer process (started by the run itself).
    parser.add_argument("--writer", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--key", help=argparse.SUPPRESS)
    parser.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--stop", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.writer:
        writer_main(args)
        return

    # The web process and this one see the cluster as a deployment would (DEBUG only for the settings a
    # deployment must give: hosts, the HTTPS redirect).
    env = {
        **{k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DATABASE_APP_URL"}},
        **cluster_env(),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "SECRET_KEY": os.environ.get("SECRET_KEY") or secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "127.0.0.1,localhost,testserver",
        "SECURE_SSL_REDIRECT": "0",
        "DEBUG": "1",
        "RATE_LIMIT_REQUESTS": "1000000",
        "LOG_LEVEL": "WARNING",
        "PROMETHEUS_MULTIPROC_DIR": str(ROOT / "var" / "prometheus-rebalance"),
    }
    os.environ.update(env)
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connections

    from config import citus
    from tenancy import services

    with superuser() as conn:
        distributed = conn.execute(
            "SELECT count(*) FROM pg_dist_partition WHERE partmethod = 'h'"
        ).fetchone()[0]
        if not distributed:
            sys.exit("the cluster's app database is not migrated: run `make test-citus` (or migrate) first")
        report: dict[str, Any] = {
            "workers_before": len(citus.cluster_load().workers),
            "placements_before": placements(conn),
        }

    stamp = f"rb{int(time.time()) % 10**7}"
    users, keys, workspaces = [], [], []
    for i in range(args.writers):
        user = get_user_model().objects.create_user(f"{stamp}-{i}", email=f"{stamp}-{i}@example.com")
        users.append(user)
        keys.append(services.api_key_create(user=user, scope="admin").raw_key)
        workspaces.append(services.personal_workspace_ensure(user=user).id)
    large = workspaces[0]
    report["large_tenant"] = {
        "workspace": large,
        "seeded_rows": args.large_rows,
        "seed_seconds": seed_large_tenant(large, args.large_rows),
    }
    # Nothing of this process stays open (let alone in a transaction) during the moves.
    connections.close_all()

    run_dir = ROOT / "var" / "citus-rebalance"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    shutil.rmtree(env["PROMETHEUS_MULTIPROC_DIR"], ignore_errors=True)
    Path(env["PROMETHEUS_MULTIPROC_DIR"]).mkdir(parents=True)
    port = free_port()
    web_log = run_dir / "gunicorn.log"
    web = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("gunicorn")),
            "config.wsgi",
            "--config",
            "config/gunicorn_conf.py",
            "--workers",
            "2",
            "--bind",
            f"127.0.0.1:{port}",
        ],
        cwd=ROOT,
        env=env,
        stdout=web_log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    stop_file = run_dir / "stop"
    files = [run_dir / f"writer{i}.jsonl" for i in range(args.writers)]
    writers: list[subprocess.Popen[bytes]] = []
    marks: dict[str, float] = {}
    try:
        wait_healthy(web, port, web_log)
        for i in range(args.writers):
            writers.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        __file__,
                        "--writer",
                        "--port",
                        str(port),
                        "--key",
                        keys[i],
                        "--index",
                        str(i),
                        "--rate",
                        str(args.rate),
                        "--out",
                        str(files[i]),
                        "--stop",
                        str(stop_file),
                    ],
                    cwd=ROOT,
                    env=env,
                    start_new_session=True,
                )
            )
        marks["writes_start"] = time.time()
        time.sleep(15)

        marks["add_worker_start"] = time.time()
        added = subprocess.run([*CLUSTER, "add-worker"], capture_output=True, text=True, check=True)
        report["added_worker"] = added.stdout.strip()
        marks["rebalance_start"] = time.time()
        with superuser() as conn:
            report["owner_bypassrls_during_moves"] = owner_bypasses_rls(conn, True)
            mode = "auto"
            try:
                job = conn.execute("SELECT citus_rebalance_start()").fetchone()[0]
            except Exception as exc:  # noqa: BLE001 - logical replication refused: say so, move with writes blocked
                report["auto_refused"] = str(exc).splitlines()[0]
                mode = "block_writes"
                job = conn.execute(
                    "SELECT citus_rebalance_start(shard_transfer_mode => 'block_writes')"
                ).fetchone()[0]
            report["rebalance"] = {"job": job, "shard_transfer_mode": mode}
            state = "scheduled"
            while True:
                time.sleep(3)
                row = conn.execute(
                    "SELECT state, details FROM citus_rebalance_status() WHERE job_id = %s", [job]
                ).fetchone()
                state, details = row[0], row[1] or {}
                acks, _ = outcomes(files)
                recent = sum(1 for a in acks if a["t"] >= time.time() - 10) / 10
                moving = [
                    f"{t.get('command', '').split('(')[-1].split(',')[0]}: {t.get('phase')}"
                    for t in details.get("tasks", [])
                    if t.get("state") == "running"
                ]
                print(
                    f"{time.time() - marks['rebalance_start']:6.0f} s  {state:9} "
                    f"{json.dumps(details.get('task_state_counts', {}))} {'; '.join(moving)}  "
                    f"writes/s (10 s) {recent:.1f}",
                    flush=True,
                )
                if state in {"finished", "failed", "cancelled", "failing", "cancelling"}:
                    break
                if time.time() - marks["rebalance_start"] > args.timeout:
                    conn.execute("SELECT citus_rebalance_stop()")
                    state = "timed out (stopped)"
                    break
            marks["rebalance_end"] = time.time()
            report["rebalance"].update(
                {
                    "state": state,
                    "seconds": round(marks["rebalance_end"] - marks["rebalance_start"], 1),
                    "add_worker_seconds": round(marks["rebalance_start"] - marks["add_worker_start"], 1),
                    "tasks": details.get("task_state_counts"),
                    # Moves cancelled (a distributed deadlock with a write, mostly) and run again by Citus.
                    "task_retries": int(
                        conn.execute(
                            "SELECT coalesce(sum(retry_count), 0) FROM pg_dist_background_task "
                            "WHERE job_id = %s",
                            [job],
                        ).fetchone()[0]
                    ),
                    "failed_tasks": [t for t in details.get("tasks", []) if t.get("state") != "done"][:3],
                }
            )
            report["placements_after_rebalance"] = placements(conn)
        time.sleep(10)

        marks["isolate_start"] = time.time()
        with superuser() as conn:
            isolate_mode = args.isolate_mode
            if isolate_mode == "auto":
                # A split by logical replication that cannot finish retries forever; it gets a deadline, and
                # the split with writes blocked is the fallback.
                conn.execute(f"SET statement_timeout = {int(args.isolate_timeout * 1000)}")
                try:
                    new_shard = conn.execute(
                        "SELECT isolate_tenant_to_new_shard('memories', %s, 'CASCADE')", [large]
                    ).fetchone()[0]
                except Exception as exc:  # noqa: BLE001 - reported, then the fallback
                    report["isolate_auto_refused"] = str(exc).splitlines()[0]
                    isolate_mode = "block_writes"
                conn.execute("SET statement_timeout = 0")
            if isolate_mode == "block_writes":
                new_shard = conn.execute(
                    "SELECT isolate_tenant_to_new_shard('memories', %s, 'CASCADE', 'block_writes')", [large]
                ).fetchone()[0]
            marks["isolate_end"] = time.time()
            report["owner_bypassrls_after"] = owner_bypasses_rls(conn, False)
        print(
            f"isolated workspace {large} on shard {new_shard} in "
            f"{marks['isolate_end'] - marks['isolate_start']:.1f} s",
            flush=True,
        )
        report["isolation"] = {
            "seconds": round(marks["isolate_end"] - marks["isolate_start"], 1),
            "shard_transfer_mode": isolate_mode,
            **isolation_facts(large, int(new_shard)),
            "context_get": context_get_plans(keys[0], large),
        }
        connections.close_all()
        served = http_post(port, keys[0], "context/get", {"query": "payments ledger", "graphDepth": 1})
        report["isolation"]["context_get_over_http_memories"] = len(served.get("memories", []))
        time.sleep(10)
    finally:
        with superuser() as conn:  # whatever happened, the owner is back under row-level security
            owner_bypasses_rls(conn, False)
        stop_file.touch()
        for process in writers:
            try:
                process.wait(timeout=RETRY_SECONDS + 30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
        marks["writes_end"] = time.time()

    try:
        acks, errors = outcomes(files)
        ids = [a["ack"] for a in acks]
        with superuser() as conn:
            found = conn.execute(
                "SELECT count(*) FROM memories WHERE workspace_id = ANY(%s) AND id = ANY(%s::uuid[])",
                [workspaces, ids],
            ).fetchone()[0]
        through_api = 0
        for i in range(args.writers):
            wanted = {a["ack"] for a in acks if a["writer"] == i}
            through_api += len(listed_ids(port, keys[i], wanted))
        report["writes"] = {
            "writers": args.writers,
            "rate_per_writer": args.rate,
            "acknowledged": len(ids),
            "distinct_ids": len(set(ids)),
            "found_on_cluster": int(found),
            "found_through_memories_list": through_api,
            "acknowledged_lost": len(set(ids)) - int(found),
            "given_up": sum(1 for e in errors if e.get("gave_up")),
            "acknowledged_after_retry": sum(1 for a in acks if a["attempts"] > 1),
            "before": window(acks, errors, marks["writes_start"], marks["add_worker_start"]),
            "add_worker": window(acks, errors, marks["add_worker_start"], marks["rebalance_start"]),
            "rebalance": window(acks, errors, marks["rebalance_start"], marks["rebalance_end"]),
            "isolate": window(acks, errors, marks["isolate_start"], marks["isolate_end"]),
            "whole_run": window(acks, errors, marks["writes_start"], marks["writes_end"]),
        }
    finally:
        stop_group(web)

    if not args.keep:
        node = citus.cluster_load().workers[-1]
        started = time.monotonic()
        with superuser() as conn:
            owner_bypasses_rls(conn, True)
            try:
                conn.execute("SELECT citus_drain_node(%s, %s)", [node.host, node.port])
            finally:
                owner_bypasses_rls(conn, False)
            conn.execute("SELECT citus_remove_node(%s, %s)", [node.host, node.port])
        subprocess.run([*CLUSTER, "remove-node", node.name], check=True)
        report["drain_and_remove_seconds"] = round(time.monotonic() - started, 1)
        with superuser() as conn:
            report["placements_after_drain"] = placements(conn)
    cleanup(workspaces, [u.pk for u in users])

    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(json.dumps(report, indent=2, default=str))
    if report["writes"]["acknowledged_lost"]:
        sys.exit("acknowledged writes were lost")


if __name__ == "__main__":
    main()

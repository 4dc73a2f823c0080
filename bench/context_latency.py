"""context/get latency with graph expansion: 100k memories and about 1M edges in one workspace.

Seeds the bench workspace of api_latency.py (cairn_bench) with a graph — a memory node, self and tag links for
every memory, and 5 similar_to neighbours per memory in both directions (≈ 1M edges) — and one synthetic
384-d vector per memory (clustered, so nearest neighbours mean something; the HNSW index for the workspace is
built like the product builds it). Queries are embedded by the real local model inside the server.
Then, with the workspace's rollout in canary, 8 concurrent clients call context/get (strategy hybrid,
graphDepth 1 and 2) against gunicorn with 2 workers; reports server-side p50 / p95 (Server-Timing) and QPS.

    .venv/bin/python bench/context_latency.py [--memories 100000] [--seconds 30] [--clients 8]
        [--ordering off]

--ordering off sends halfLifeDays 0 and mmrLambda 1 with every call (temporal decay and MMR, on by default
through the workspace's settings, off): alternate it with a default run to see what those defaults cost.
--strategies runs each depth with each strategy (default: hybrid). Each run also reports the statements and
transactions one call costs (roundTrips), counted in-process on the same workspace before the server starts.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import api_latency  # noqa: E402 - the bench database, gunicorn runner, HTTP client and statistics
import cpu_usage  # noqa: E402 - where the run's CPU went

os.environ["CAIRN_DATABASE_NAME"] = api_latency.BENCH_DATABASE
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# The in-process round-trip count goes through the key's rate limit like any call.
os.environ.setdefault("RATE_LIMIT_REQUESTS", "1000000")

NEIGHBOURS = 5
# The server this bench runs: 2 sync workers (bench/README.md, context_latency: 3, 4 and gthread did worse).
GUNICORN_WORKERS = 2
GUNICORN_THREADS = 1
CLUSTERS = 400


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=30.0, help="measurement time per configuration")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "context_latency.json")
    parser.add_argument("--workers", type=int, default=GUNICORN_WORKERS, help="gunicorn worker processes")
    parser.add_argument(
        "--threads", type=int, default=GUNICORN_THREADS, help="threads per worker (gthread); 1 = sync workers"
    )
    parser.add_argument("--depths", type=int, nargs="+", default=[1, 2])
    parser.add_argument(
        "--strategies", nargs="+", default=["hybrid"], choices=("lexical", "semantic", "hybrid")
    )
    parser.add_argument(
        "--round-trip-calls", type=int, default=16, help="calls per configuration for the round-trip count"
    )
    parser.add_argument(
        "--ordering", choices=("on", "off"), default="on", help="temporal decay and MMR (default: on)"
    )
    return parser.parse_args()


# Fields added to every context/get body (--ordering off).
EXTRA_BODY: dict[str, Any] = {}


def superuser_connection() -> Any:
    import psycopg

    from config import embedded_db

    server = embedded_db.ensure_embedded_postgres()
    return psycopg.connect(
        host=server.socket_dir,
        port=server.port,
        user=embedded_db.SUPERUSER,
        dbname=api_latency.BENCH_DATABASE,
        autocommit=True,
    )


def seed_graph(workspace_id: int, memories: int) -> dict[str, Any]:
    """Idempotent: re-seeds only when the edge count does not match the memories."""
    from django.conf import settings

    model = settings.EMBEDDING_MODEL
    started = time.perf_counter()
    with superuser_connection() as conn:
        edges = conn.execute(
            "SELECT count(*) FROM graph_edges WHERE workspace_id = %s", [workspace_id]
        ).fetchone()[0]
        vectors = conn.execute(
            "SELECT count(*) FROM memory_embeddings WHERE workspace_id = %s AND model = %s",
            [workspace_id, model],
        ).fetchone()[0]
        if edges >= memories * NEIGHBOURS * 2 * 0.95 and vectors < memories:
            # Seeded under an earlier default model: the vectors are synthetic, so only their label must
            # follow (search compares a query only with vectors of the model it was embedded by).
            relabelled = conn.execute(
                "UPDATE memory_embeddings SET model = %s WHERE workspace_id = %s AND model <> %s",
                [model, workspace_id, model],
            ).rowcount
            conn.execute("VACUUM ANALYZE memory_embeddings")
            vectors += relabelled
        if edges >= memories * NEIGHBOURS * 2 * 0.95 and vectors >= memories:
            return {"seeded": False, "edges": edges, "vectors": vectors, "seconds": 0.0}
        print("seeding graph and vectors (a few minutes)…", file=sys.stderr)
        for table in (
            "graph_edges",
            "memory_node_links",
            "graph_nodes",
            "memory_embeddings",
            "pipeline_jobs",
        ):
            conn.execute(f"DELETE FROM {table} WHERE workspace_id = %s", [workspace_id])
        conn.execute("SET maintenance_work_mem = '512MB'")
        conn.execute(
            """
            INSERT INTO graph_nodes (workspace_id, node_type, node_key, label, metadata, created_at,
                updated_at)
            SELECT %(ws)s, 'memory', id::text, left(content, 120), '{}'::jsonb, now(), now()
            FROM memories WHERE workspace_id = %(ws)s AND deleted_at IS NULL
            UNION ALL
            SELECT DISTINCT %(ws)s, 'topic', lower(tag), lower(tag), '{}'::jsonb, now(), now()
            FROM memories, unnest(tags) AS tag WHERE workspace_id = %(ws)s AND deleted_at IS NULL
            """,
            {"ws": workspace_id},
        )
        conn.execute(
            """
            INSERT INTO memory_node_links (workspace_id, memory_id, node_id, role, created_at)
            SELECT %(ws)s, m.id, n.id, 'self', now() FROM memories m
            JOIN graph_nodes n
                ON n.workspace_id = %(ws)s AND n.node_type = 'memory' AND n.node_key = m.id::text
            WHERE m.workspace_id = %(ws)s
            UNION ALL
            SELECT %(ws)s, m.id, n.id, 'tag', now() FROM memories m, unnest(m.tags) AS tag
            JOIN graph_nodes n
                ON n.workspace_id = %(ws)s AND n.node_type = 'topic' AND n.node_key = lower(tag)
            WHERE m.workspace_id = %(ws)s
            ON CONFLICT DO NOTHING
            """,
            {"ws": workspace_id},
        )
        # 5 pseudo-random neighbours per memory node, both directions: about 10 edges per memory.
        conn.execute(
            """
            WITH numbered AS (
                SELECT id, row_number() OVER (ORDER BY id) - 1 AS i, count(*) OVER () AS n
                FROM graph_nodes WHERE workspace_id = %(ws)s AND node_type = 'memory'
            ), pairs AS (
                SELECT a.id AS a, b.id AS b, 0.85 + random() * 0.14 AS w
                FROM numbered a CROSS JOIN generate_series(1, %(k)s) AS k
                JOIN numbered b ON b.i = (a.i * 7919 + k * 104729) %% a.n
                WHERE a.id <> b.id
            )
            INSERT INTO graph_edges (workspace_id, edge_key, from_node_id, to_node_id, edge_type, edge_class,
                weight, confidence, origin, created_at, updated_at, last_observed_at, retrieval_count)
            SELECT %(ws)s, 'r:similar_to:' || x || ':' || y, x, y, 'similar_to', 'semantic', w, 1.0,
                'similarity', now(), now(), now(), 0
            FROM (SELECT a AS x, b AS y, w FROM pairs UNION ALL SELECT b, a, w FROM pairs) d
            ON CONFLICT DO NOTHING
            """,
            {"ws": workspace_id, "k": NEIGHBOURS},
        )
        # Clustered synthetic vectors: centre + noise, so a query near a centre has real neighbours.
        conn.execute(
            """
            WITH centres AS (
                SELECT c, array_agg(random() - 0.5) AS v FROM generate_series(0, %(clusters)s - 1) c,
                     generate_series(1, 384) GROUP BY c
            )
            INSERT INTO memory_embeddings (workspace_id, memory_id, model, dimension, embedding,
                content_sha256, user_id, scope, project_id, expires_at, created_at, updated_at)
            SELECT %(ws)s, m.id, %(model)s, 384,
                   (SELECT array_agg(x + (random() - 0.5) * 0.3) FROM unnest(ce.v) AS x)::vector,
                   '', m.user_id, m.scope, m.project_id, m.expires_at, now(), now()
            FROM memories m JOIN centres ce ON ce.c = abs(hashtext(m.id::text)) %% %(clusters)s
            WHERE m.workspace_id = %(ws)s AND m.deleted_at IS NULL
            """,
            {"ws": workspace_id, "clusters": CLUSTERS, "model": model},
        )
        conn.execute("VACUUM ANALYZE graph_edges")
        conn.execute("VACUUM ANALYZE memory_node_links")
        conn.execute("VACUUM ANALYZE graph_nodes")
        conn.execute("VACUUM ANALYZE memory_embeddings")
        edges = conn.execute(
            "SELECT count(*) FROM graph_edges WHERE workspace_id = %s", [workspace_id]
        ).fetchone()[0]
    from retrieval import vectors

    index_started = time.perf_counter()
    vectors.hnsw_index_ensure(workspace_id=workspace_id, dimension=384)
    return {
        "seeded": True,
        "edges": edges,
        "vectors": memories,
        "seconds": round(time.perf_counter() - started, 1),
        "indexSeconds": round(time.perf_counter() - index_started, 1),
    }


def set_canary(workspace_id: int) -> None:
    from rollout.models import RolloutConfig
    from tenancy.rls import workspace_context

    with workspace_context(workspace_id):
        RolloutConfig.objects.update_or_create(workspace_id=workspace_id, defaults={"mode": "canary"})
    # Metrics of earlier runs (an interrupted one, a run on another seed) would feed the quality gate and may
    # block the canary; every run starts from an empty window.
    with superuser_connection() as conn:
        conn.execute("DELETE FROM retrieval_metrics WHERE workspace_id = %s", [workspace_id])


QUERIES = [
    "what did we decide about the connection pool",
    "latency spikes in the staging environment",
    "who owns the feature flag rollout",
    "how do we deploy the api",
    "postgres migration plan",
    "retry policy for webhooks",
    "caching strategy for the dashboard",
    "on-call handover notes",
]


def context_workload(depth: int, strategy: str = "hybrid") -> api_latency.Workload:
    def body(rng: random.Random, previous: dict[str, Any] | None) -> dict[str, Any]:
        return {
            "query": rng.choice(QUERIES),
            "strategy": strategy,
            "graphDepth": depth,
            "limit": 5,
            "graphLimit": 8,
            **EXTRA_BODY,
        }

    return api_latency.Workload("context/get", 200, body)


def in_process_workspace() -> tuple[Any, int]:
    """For the in-process profiles (context_profile.py, context_http_profile.py): set Django up on the seeded
    bench database, put its workspace in canary and load the embedding model now (rather than answering
    lexical while it loads). Returns the bench user and the workspace id."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from retrieval.embeddings import get_embedder
    from tenancy import services as tenancy_services

    user = get_user_model().objects.get(username="bench")
    workspace_id = tenancy_services.personal_workspace_ensure(user=user).id
    set_canary(workspace_id)
    embedder = get_embedder()
    if hasattr(embedder, "warm"):
        embedder.warm()
    return user, workspace_id


def database_pid() -> int:
    from config import embedded_db

    return int((embedded_db.var_dir() / "pgdata" / "postmaster.pid").read_text().split()[0])


def bench_backend_cpu(conn: Any = None) -> dict[int, float]:
    """CPU seconds of the PostgreSQL backends serving the bench database (the web workers' connections), by
    pid. The embedded server is shared with whatever else runs on the machine (other databases' tests), so the
    CPU of all its processes (`cpu.database`) counts their work too; the bench's own backends do not."""
    query = (
        "SELECT pid FROM pg_stat_activity WHERE datname = %s AND backend_type = 'client backend' "
        "AND pid <> pg_backend_pid()"
    )
    if conn is None:
        with superuser_connection() as own:
            pids = [row[0] for row in own.execute(query, [api_latency.BENCH_DATABASE]).fetchall()]
    else:
        pids = [row[0] for row in conn.execute(query, [api_latency.BENCH_DATABASE]).fetchall()]
    found: dict[int, float] = {}
    for pid in pids:
        try:
            raw = (Path("/proc") / str(pid) / "stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2 :].split()
        found[pid] = (int(fields[11]) + int(fields[12])) / cpu_usage.TICKS_PER_SECOND
    return found


class BackendSampler:
    """The bench backends' CPU, read every `interval` seconds while a run lasts, each pid's last reading kept.

    Reading only before and after lost every backend that ended in between: a web worker reconnects when its
    connection reaches CONN_MAX_AGE (60 s by default), and the backend it leaves takes its CPU along. A
    depth 2
    run, which started after the depth 1 run had aged the connections, read 0.5-4 ms of database CPU per call
    at ~100 QPS on two saturated cores, an impossible figure. Sampled, an ending backend loses at most its
    last interval; the bench also runs gunicorn with a CONN_MAX_AGE longer than any run."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self.last: dict[int, float] = {}
        self.own = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> BackendSampler:
        self.first = bench_backend_cpu()
        self.last = dict(self.first)
        self.thread.start()
        return self

    def _loop(self) -> None:
        with superuser_connection() as conn:
            self.own = conn.info.backend_pid  # the sampler's own backend is not the server's work
            while not self.stop.wait(self.interval):
                self.last.update(bench_backend_cpu(conn))

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self.last.update(bench_backend_cpu())
        self.last.pop(self.own, None)

    def seconds(self) -> float:
        """CPU seconds the bench backends spent during the run: those that lived through it their
        difference, new ones all they used (up to their last reading)."""
        return sum(seconds - self.first.get(pid, 0.0) for pid, seconds in self.last.items())


def run_for(
    port: int, key: str, workload: api_latency.Workload, clients: int, seconds: float, *, web_pid: int
) -> dict[str, Any]:
    samples: list[api_latency.Sample] = []
    lock = threading.Lock()
    stop = threading.Event()

    def loop(index: int) -> None:
        client = api_latency.Client(port, key)
        rng = random.Random(index)
        try:
            while not stop.is_set():
                sample, _ = client.call(workload, workload.body(rng, None))
                with lock:
                    samples.append(sample)
        finally:
            client.close()

    threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(clients)]
    load_before = os.getloadavg()[0]
    cpu_before = cpu_usage.snapshot(web_root=web_pid, database_root=database_pid())
    with BackendSampler() as backends:
        began = time.perf_counter()
        for thread in threads:
            thread.start()
        time.sleep(seconds)
        stop.set()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - began
        cpu_after = cpu_usage.snapshot(web_root=web_pid, database_root=database_pid())
    ok = [s for s in samples if s.ok]
    cores = os.cpu_count() or 1
    cpu = cpu_usage.split(cpu_before, cpu_after, requests=len(samples), cores=cores)
    if cpu and samples:
        bench_ms = 1000 * backends.seconds() / len(samples)
        server_ms = cpu["cpuMsPerRequest"]["web"] + bench_ms
        cpu["benchDatabaseCpuMsPerRequest"] = round(bench_ms, 2)
        cpu["benchServerCpuMsPerRequest"] = round(server_ms, 2)
        # The plausibility check: the cores the calls kept busy (QPS x CPU per call, server and load
        # generator) against the cores the machine was busy; the rest is other work on the machine.
        qps = len(samples) / wall
        cpu["check"] = {
            "coresBusyByCalls": round(qps * (server_ms + cpu["cpuMsPerRequest"]["client"]) / 1000, 2),
            "coresBusy": round(cores * cpu["machinePercent"]["busy"] / 100, 2),
        }
    return {
        "loadavg1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],  # before, after
        "requests": len(samples),
        "errors": len(samples) - len(ok),
        "firstError": next((s.error for s in samples if not s.ok), None),
        "qps": round(len(ok) / wall, 1),
        "serverMs": api_latency.summary([s.server_ms for s in ok if s.server_ms is not None]),
        "clientMs": api_latency.summary([s.client_ms for s in ok]),
        "cpu": cpu,
    }


def round_trips(workspace_id: int, api_key: str, *, depth: int, strategy: str, calls: int) -> dict[str, Any]:
    """Round trips to PostgreSQL per context/get through Django's whole HTTP stack in this process (the
    test client; the same code the server runs), after a few warm-up calls: every command sent, the BEGIN
    and COMMIT of each transaction included (Django logs those with the statements; psycopg sends each as a
    command of its own). `transactions` counts the transactions alone."""
    from django.db import connections
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from psycopg.pq import TransactionStatus

    from retrieval.embeddings import get_embedder

    embedder = get_embedder()
    if hasattr(embedder, "warm"):
        embedder.warm()  # hybrid and semantic answer lexically while the model loads
    client = Client(HTTP_AUTHORIZATION=f"Bearer {api_key}")
    workload = context_workload(depth, strategy)
    rng = random.Random(7)
    connection = connections["app"]
    ended = [0]

    def counting(original: Any) -> Any:
        def end(*args: Any, **kwargs: Any) -> Any:
            # A transaction psycopg opened (it sent BEGIN before the first statement) ends with a command.
            raw = connection.connection
            if raw is not None and raw.info.transaction_status != TransactionStatus.IDLE:
                ended[0] += 1
            return original(*args, **kwargs)

        return end

    statements: list[int] = []  # BEGIN and COMMIT included
    transactions: list[int] = []
    commit, rollback = connection._commit, connection._rollback
    connection._commit, connection._rollback = counting(commit), counting(rollback)  # type: ignore[method-assign]
    try:
        for index in range(calls + 4):
            before = ended[0]
            with CaptureQueriesContext(connection) as captured:
                response = client.post(
                    f"{api_latency.API}/context/get",
                    data=json.dumps(workload.body(rng, None)),
                    content_type="application/json",
                )
            assert response.status_code == 200, response.content[:300]
            if index >= 4:
                statements.append(len(captured.captured_queries))
                transactions.append(ended[0] - before)
    finally:
        connection._commit, connection._rollback = commit, rollback  # type: ignore[method-assign]
    connections.close_all()
    median_statements = sorted(statements)[len(statements) // 2]
    median_transactions = sorted(transactions)[len(transactions) // 2]
    return {
        "transactions": median_transactions,
        "roundTrips": median_statements,
    }


def warm_up(port: int, key: str, workers: int) -> None:
    """Until every worker has loaded the model and answers hybrid with graph expansion (each loads it in the
    background after it starts, answering lexical meanwhile). Clients run in parallel so every worker gets
    requests; done when the last 10 answers per worker were all hybrid (a worker still loading would show)."""
    deadline = time.time() + 240
    recent: list[bool] = []
    lock = threading.Lock()
    done = threading.Event()

    def loop(index: int) -> None:
        client = api_latency.Client(port, key)
        workload = context_workload(1)
        rng = random.Random(1000 + index)
        try:
            while not done.is_set() and time.time() < deadline:
                _, data = client.call(workload, workload.body(rng, None))
                hybrid = bool(
                    data
                    and data["trace"]["semanticStrategyApplied"] == "hybrid"
                    and data["trace"]["strategy"] == "hybrid_graph"
                )
                with lock:
                    recent.append(hybrid)
                    del recent[: -10 * workers]
                    if len(recent) == 10 * workers and all(recent):
                        done.set()
                if not hybrid:
                    time.sleep(0.5)
        finally:
            client.close()

    threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(2 * workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def main() -> None:
    args = parse_args()
    if args.ordering == "off":
        EXTRA_BODY.update(halfLifeDays=0, mmrLambda=1)
    seed = api_latency.prepare(args.memories)
    graph = seed_graph(seed.workspace_id, args.memories)
    set_canary(seed.workspace_id)
    trips: dict[str, Any] = {}
    for depth in args.depths:
        for strategy in args.strategies:
            trips[f"depth{depth}-{strategy}"] = round_trips(
                seed.workspace_id, seed.api_key, depth=depth, strategy=strategy, calls=args.round_trip_calls
            )
            print(
                f"round trips, depth {depth} {strategy}: {trips[f'depth{depth}-{strategy}']}", file=sys.stderr
            )
    from django.db import connections

    connections.close_all()
    # The web workers keep their database connections for the whole run (the default CONN_MAX_AGE of 60 s
    # would reconnect them mid-run; BackendSampler covers that too, within its interval).
    os.environ["DATABASE_CONN_MAX_AGE"] = "86400"
    port = api_latency.free_port()
    results: dict[str, Any] = {}
    options = ["--workers", str(args.workers)]
    if args.threads > 1:
        options += ["--worker-class", "gthread", "--threads", str(args.threads)]
    with api_latency.gunicorn(port, args.out.with_suffix(".gunicorn.log"), options) as server:
        warm_up(port, seed.api_key, args.workers)
        for depth in args.depths:
            for strategy in args.strategies:
                print(
                    f"context/get graphDepth={depth} {strategy}, {args.clients} clients, "
                    f"{args.seconds:.0f}s…",
                    file=sys.stderr,
                )
                name = f"depth{depth}" if args.strategies == ["hybrid"] else f"depth{depth}-{strategy}"
                results[name] = run_for(
                    port,
                    seed.api_key,
                    context_workload(depth, strategy),
                    args.clients,
                    args.seconds,
                    web_pid=server.pid,
                )
                results[name]["roundTrips"] = trips[f"depth{depth}-{strategy}"]
    report = {
        "memories": args.memories,
        "graph": graph,
        "clients": args.clients,
        "results": results,
        "server": {"workers": args.workers, "threads": args.threads},
        "ordering": args.ordering,
        "machine": {"nproc": os.cpu_count(), "loadavg": os.getloadavg()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

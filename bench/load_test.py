"""Mixed-workload load test: gunicorn (2 workers) + the worker cluster, N clients for a fixed time.

    .venv/bin/python bench/load_test.py [--seconds 600] [--clients 8] [--memories 2000]
                                        [--out bench/results/load_test.json]

Workload per request, drawn at random: 70 % context/get, 20 % memories/add, 10 % memories/search, all in one
workspace of the bench database (cairn_bench, shared with bench/api_latency.py; the developer's and the test
database are never opened). Reports per endpoint: count, errors, p50/p95/p99 client latency; overall
throughput and error rate; resident memory of gunicorn (master + workers) and qcluster (all processes) at the
start and end of the measured window, and the pipeline jobs left queued afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import api_latency as base  # noqa: E402  (sets CAIRN_DATABASE_NAME before Django loads)
import context_latency  # noqa: E402 - the embedded server's postmaster pid
import cpu_usage  # noqa: E402 - where the run's CPU went

MIX = [("context/get", 0.70), ("memories/add", 0.20), ("memories/search", 0.10)]
EXPECTED = {"context/get": 200, "memories/add": 201, "memories/search": 200}


# Set by --strategy: the reads' strategy, or None for the server's default (hybrid once vectors exist).
READ_STRATEGY: str | None = None


def body_for(endpoint: str, rng: random.Random) -> dict[str, Any]:
    if endpoint == "memories/add":
        return {**base.memory_fields(rng), "scope": {"userId": base.WRITER_USER_ID}}
    read: dict[str, Any] = {"query": base.search_query(rng), "limit": 10}
    if READ_STRATEGY:
        read["strategy"] = READ_STRATEGY
    return read


def rss_mb(root_pid: int) -> float:
    import psutil

    try:
        root = psutil.Process(root_pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            total += process.memory_info().rss
    return round(total / 1_048_576, 1)


def start(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    handle = log.open("wb")
    return subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
    )


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=40)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def client_loop(
    port: int, key: str, seed: int, until: float, out: list[tuple[str, bool, float, str]]
) -> None:
    rng = random.Random(seed)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    endpoints, weights = zip(*MIX, strict=True)
    while time.monotonic() < until:
        endpoint = rng.choices(endpoints, weights)[0]
        payload = json.dumps(body_for(endpoint, rng)).encode()
        began = time.perf_counter()
        try:
            conn.request("POST", f"{base.API}/{endpoint}", payload, headers)
            response = conn.getresponse()
            raw = response.read()
            ok, detail = response.status == EXPECTED[endpoint], f"HTTP {response.status} {raw[:200]!r}"
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            ok, detail = False, repr(exc)
        out.append((endpoint, ok, (time.perf_counter() - began) * 1000, "" if ok else detail))
    conn.close()


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=int, default=600)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--out", default="bench/results/load_test.json")
    parser.add_argument(
        "--strategy",
        choices=("lexical", "semantic", "hybrid"),
        help="strategy of the context/get and search requests (default: the server's)",
    )
    args = parser.parse_args(argv)
    global READ_STRATEGY
    READ_STRATEGY = args.strategy

    seed = base.prepare(args.memories)
    out_dir = (ROOT / args.out).parent
    out_dir.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "CAIRN_DATABASE_NAME": base.BENCH_DATABASE,
        "RATE_LIMIT_REQUESTS": "1000000",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "LOG_LEVEL": "WARNING",
        "PROMETHEUS_MULTIPROC_DIR": str(ROOT / "var" / "prometheus-load"),
    }
    port = base.free_port()
    gunicorn_bin = str(Path(sys.executable).with_name("gunicorn"))
    web = start(
        [
            gunicorn_bin,
            "config.wsgi",
            "--config",
            "config/gunicorn_conf.py",
            "--workers",
            "2",
            "--bind",
            f"127.0.0.1:{port}",
        ],
        env,
        out_dir / "load_test.gunicorn.log",
    )
    worker = start([sys.executable, "manage.py", "qcluster"], env, out_dir / "load_test.qcluster.log")
    try:
        base.wait_healthy(web, port, out_dir / "load_test.gunicorn.log")
        samples: list[tuple[str, bool, float, str]] = []
        warm_until = time.monotonic() + 10
        warm = [
            threading.Thread(target=client_loop, args=(port, seed.api_key, 1000 + i, warm_until, []))
            for i in range(2)
        ]
        for thread in warm:
            thread.start()
        for thread in warm:
            thread.join()
        memory_start = {"web_mb": rss_mb(web.pid), "worker_mb": rss_mb(worker.pid)}
        cpu_before = cpu_usage.snapshot(web_root=web.pid, database_root=context_latency.database_pid())
        worker_before = cpu_usage.tree_seconds(worker.pid)
        began = time.monotonic()
        until = began + args.seconds
        threads = [
            threading.Thread(target=client_loop, args=(port, seed.api_key, i, until, samples))
            for i in range(args.clients)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - began
        cpu_after = cpu_usage.snapshot(web_root=web.pid, database_root=context_latency.database_pid())
        worker_after = cpu_usage.tree_seconds(worker.pid)
        memory_end = {"web_mb": rss_mb(web.pid), "worker_mb": rss_mb(worker.pid)}
    finally:
        stop(web)
        stop(worker)

    per_endpoint = {}
    with context_latency.superuser_connection() as conn:
        left = conn.execute(
            "SELECT kind, count(*) FROM pipeline_jobs WHERE status IN ('queued', 'processing') "
            "GROUP BY kind ORDER BY kind"
        ).fetchall()
    jobs_left = {kind: count for kind, count in left}
    for endpoint, _ in MIX:
        latencies = [ms for e, ok, ms, _ in samples if e == endpoint and ok]
        errors = [d for e, ok, _, d in samples if e == endpoint and not ok]
        per_endpoint[endpoint] = {
            "requests": len(latencies) + len(errors),
            "errors": len(errors),
            "p50_ms": percentile(latencies, 0.50),
            "p95_ms": percentile(latencies, 0.95),
            "p99_ms": percentile(latencies, 0.99),
            "first_error": errors[0] if errors else None,
        }
    total = len(samples)
    failed = sum(1 for s in samples if not s[1])
    cpu = cpu_usage.split(cpu_before, cpu_after, requests=total, cores=os.cpu_count() or 1)
    if cpu is not None:
        # The worker cluster (embedding, update detection, graph jobs of the adds) runs on the same cores;
        # its PostgreSQL time is already in `database`, which counts every backend of the embedded server.
        worker_ms = cpu_usage.spent_seconds(worker_before, worker_after) * 1000 / total
        cpu["cpuMsPerRequest"]["worker"] = round(worker_ms, 2)
        everything = cpu["serverCpuMsPerRequest"] + worker_ms
        cpu["serverAndWorkerCpuMsPerRequest"] = round(everything, 2)
        cpu["serverAndWorkerCpuBoundQps"] = round((os.cpu_count() or 1) * 1000 / everything, 1)
    result = {
        "seconds": round(elapsed, 1),
        "clients": args.clients,
        "seed_memories": args.memories,
        "strategy": args.strategy or "server default",
        "requests": total,
        "throughput_rps": round(total / elapsed, 1) if elapsed else None,
        "error_rate": round(failed / total, 5) if total else None,
        "endpoints": per_endpoint,
        "cpu": cpu,
        "jobs_left_unfinished": jobs_left,
        "memory_start": memory_start,
        "memory_end": memory_end,
        "machine": base.machine_info(),
    }
    (ROOT / args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())

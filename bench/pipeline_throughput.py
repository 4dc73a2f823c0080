"""Pipeline throughput: memories written → embedded with the local model → similar_to edges done, per second.

Runs a real `manage.py qcluster` (2 worker processes by default) against the bench database (cairn_bench, see
api_latency.py), writes N memories through the real write flow (memory + mapping + jobs in one transaction),
and measures the time from the first write until the last similarity job has succeeded.

    .venv/bin/python bench/pipeline_throughput.py [--memories 2000] [--workers 2] [--warmup 0]
        [--out bench/results/pipeline.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import resource
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import api_latency  # noqa: E402 - shares the bench database helpers and the sentence generator

os.environ["CAIRN_DATABASE_NAME"] = api_latency.BENCH_DATABASE
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2, help="qcluster worker processes")
    parser.add_argument("--batch", type=int, default=50, help="memories per write transaction")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument(
        "--warmup",
        type=int,
        default=0,
        help="memories run through the pipeline in a separate workspace before the clock starts (0: "
        "the clock starts 3 s after the cluster, while the workers may still load the model)",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "pipeline_throughput.json")
    return parser.parse_args()


def start_cluster(workers: int, log_path: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "WORKER_PROCESSES": str(workers)}
    log = log_path.open("wb")
    return subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop_cluster(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


def fresh_workspace() -> int:
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(f"pipeline-{uuid.uuid4().hex[:8]}")
    return user.personal_workspace.id


def write_memories(workspace_id: int, count: int, batch: int) -> tuple[float, float]:
    """Write `count` memories through the real write flow; returns (first write time, last write time)."""
    from memories.selectors import MemoryScope
    from pipeline import services as pipeline
    from tenancy.rls import workspace_context

    rng = random.Random(7)
    started = time.time()
    for start in range(0, count, batch):
        with workspace_context(workspace_id):
            for _ in range(min(batch, count - start)):
                fields = api_latency.memory_fields(rng)
                pipeline.memory_add_flow(
                    workspace_id=workspace_id,
                    scope=MemoryScope(),
                    content=fields["content"],
                    type=fields.get("type", "note"),
                    tags=fields.get("tags"),
                    category=fields.get("category"),
                )
    return started, time.time()


def job_counts(workspace_id: int) -> dict[str, int]:
    from django.db import connections

    from tenancy.rls import workspace_context

    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT kind || ':' || status, count(*) FROM pipeline_jobs WHERE workspace_id = %s GROUP BY 1",
            [workspace_id],
        )
        return dict(cursor.fetchall())


def wait_until_done(workspace_id: int, count: int, deadline: float, label: str) -> None:
    while True:
        counts = job_counts(workspace_id)
        done = counts.get("similarity:succeeded", 0)
        dead = sum(v for k, v in counts.items() if k.endswith("dead_letter"))
        print(f"\r  {label}: similarity done {done}/{count}, dead {dead}", end="", file=sys.stderr)
        if done + dead >= count:
            print(file=sys.stderr)
            return
        if time.time() > deadline:
            raise SystemExit(f"\ntimed out; job counts: {counts}")
        time.sleep(0.2)


def broker_backlog() -> int:
    """Ready messages in the broker before the run: a backlog (e.g. add_profile.py's adds into the
    bench workspace, with no cluster running) is worked off first and delays the warm-up, never the
    measured part."""
    from django.db import connections

    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT count(*) FROM django_q_ormq WHERE lock <= now()")
        return cursor.fetchone()[0]


def tasks_processed(log_path: Path) -> int:
    """django-q2 tasks the cluster finished so far (its monitor logs one line per task)."""
    return sum(1 for line in log_path.open(errors="replace") if "Processed 'pipeline.tasks." in line)


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) used so far by a process and its live descendants."""
    import psutil

    total = 0.0
    root = psutil.Process(pid)
    for process in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess):
            times = process.cpu_times()
            total += times.user + times.system
    return total


def postgres_pid() -> int:
    """The embedded server's postmaster: all PostgreSQL CPU of this run is its process tree (ours alone)."""
    from config import embedded_db

    return int((embedded_db.var_dir() / "pgdata" / "postmaster.pid").read_text().split()[0])


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def raw_embedding_rate(texts: list[str]) -> float:
    from retrieval.embeddings import get_embedder

    embedder = get_embedder()  # EMBEDDING_MODEL, as the workers use
    embedder.embed(texts[:64])  # warm up
    started = time.perf_counter()
    embedder.embed(texts)
    return len(texts) / (time.perf_counter() - started)


def main() -> None:
    args = parse_args()
    api_latency.ensure_bench_database()
    api_latency.setup_django_and_migrate()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    log_path = args.out.with_suffix(".qcluster.log")
    backlog = broker_backlog()
    cluster = start_cluster(args.workers, log_path)
    try:
        time.sleep(3)  # let the cluster start its workers
        if args.warmup:
            warm_ws = fresh_workspace()
            write_memories(warm_ws, args.warmup, args.batch)
            wait_until_done(warm_ws, args.warmup, time.time() + args.timeout, "warm-up")
        tasks_before = tasks_processed(log_path)
        load_before = os.getloadavg()
        pg_pid = postgres_pid()
        cpu_before = (tree_cpu(cluster.pid), tree_cpu(pg_pid), own_cpu())
        workspace_id = fresh_workspace()
        first, last_write = write_memories(workspace_id, args.memories, args.batch)
        print(
            f"wrote {args.memories} memories in {last_write - first:.1f}s; waiting for the pipeline…",
            file=sys.stderr,
        )
        wait_until_done(workspace_id, args.memories, first + args.timeout, "measured")
        finished = time.time()
        load_after = os.getloadavg()
        cpu_after = (tree_cpu(cluster.pid), tree_cpu(pg_pid), own_cpu())
        time.sleep(1)  # the monitor logs a task after the worker has finished it
        tasks = tasks_processed(log_path) - tasks_before
    finally:
        stop_cluster(cluster)

    rng = random.Random(11)
    texts = [api_latency.memory_fields(rng)["content"] for _ in range(512)]
    result = {
        "memories": args.memories,
        "workers": args.workers,
        "write_seconds": round(last_write - first, 2),
        "end_to_end_seconds": round(finished - first, 2),
        "memories_per_second": round(args.memories / (finished - first), 1),
        "job_counts": job_counts(workspace_id),
        "warmup_memories": args.warmup,
        "broker_backlog_at_start": backlog,
        "broker_tasks": tasks,
        "broker_tasks_per_memory": round(tasks / args.memories, 3),
        # CPU per memory does not depend on what else the shared machine runs, unlike memories per second. The
        # writer's share includes this script's polling (a cheap query every 0.2 s).
        "cpu_ms_per_memory": {
            name: round(1000 * (after - before) / args.memories, 2)
            for name, before, after in zip(
                ("cluster", "postgres", "writer"), cpu_before, cpu_after, strict=True
            )
        },
        "cpu_ceiling_memories_per_second_on_2_cores": round(
            2
            * args.memories
            / sum(after - before for before, after in zip(cpu_before, cpu_after, strict=True)),
            1,
        ),
        "load_average_before": [round(v, 2) for v in load_before],
        "load_average_after": [round(v, 2) for v in load_after],
        "raw_local_embedding_per_second": round(raw_embedding_rate(texts), 1),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

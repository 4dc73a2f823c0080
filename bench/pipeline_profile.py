"""Where a worker's CPU goes per memory: embedding, SQL, django-q2's broker round trip, the rest of the job
code.

In one process, against the bench database (cairn_bench, see api_latency.py): writes N memories through the
real write flow into a fresh workspace, then plays the worker's part for every broker message — django-q2's
ORM broker `dequeue`, the signed payload, `pipeline.tasks.pipeline_job_run`, `acknowledge` — and splits the
process CPU time between the local model's `embed`, time waiting on SQL (client side of every statement, so
PostgreSQL's own CPU shows up here too) and everything else. No qcluster: its process supervision adds a
fixed cost per message on top, which `pipeline_throughput.py` includes.

    .venv/bin/python bench/pipeline_profile.py [--memories 512] [--model local/all-MiniLM-L6-v2-int8-onnx]
                                               [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import api_latency  # noqa: E402

os.environ["CAIRN_DATABASE_NAME"] = api_latency.BENCH_DATABASE
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Clock:
    """Wall and CPU seconds spent inside a wrapped call, summed (calls do not nest here)."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0
        self.calls = 0

    def wrap(self, function):  # noqa: ANN001, ANN201
        def timed(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            wall, used = time.perf_counter(), cpu()
            try:
                return function(*args, **kwargs)
            finally:
                self.wall += time.perf_counter() - wall
                self.cpu += cpu() - used
                self.calls += 1

        return timed


def backend_cpu(pids: list[int]) -> float:
    """CPU seconds used so far by these PostgreSQL backends (same machine: /proc): our SQL's server side."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    return total


def backend_pids() -> list[int]:
    from django.db import connections

    pids = []
    for alias in ("app", "default"):
        with connections[alias].cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            pids.append(cursor.fetchone()[0])
    return pids


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--memories", type=int, default=512)
    parser.add_argument(
        "--model", default=None, help="embedding model (default EMBEDDING_MODEL or the product's)"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "pipeline_profile.json")
    args = parser.parse_args()
    if args.model:
        os.environ["EMBEDDING_MODEL"] = args.model
    api_latency.ensure_bench_database()
    api_latency.setup_django_and_migrate()

    import pipeline_throughput
    from django.db import connections
    from django_q.brokers import get_broker
    from django_q.signing import SignedPackage

    from pipeline import tasks
    from retrieval import embeddings

    embedder = embeddings.get_embedder()
    rng = random.Random(5)
    embedder.embed(
        [api_latency.memory_fields(rng)["content"] for _ in range(64)]
    )  # load + warm up, not timed

    workspace_id = pipeline_throughput.fresh_workspace()
    broker = get_broker()
    while broker.dequeue():  # leftovers of earlier runs would be counted as this run's work
        pass
    pids = backend_pids()
    wall, used, server = time.perf_counter(), cpu(), backend_cpu(pids)
    pipeline_throughput.write_memories(workspace_id, args.memories, 50)
    write = {
        "wallSeconds": time.perf_counter() - wall,
        "cpuSeconds": cpu() - used,
        "serverCpuSeconds": backend_cpu(pids) - server,
    }

    embed_clock, sql_clock, broker_clock = Clock(), Clock(), Clock()
    embedder.embed = embed_clock.wrap(embedder.embed)

    def sql(execute, sql_text, params, many, context):  # noqa: ANN001, ANN202
        wall = time.perf_counter()
        try:
            return execute(sql_text, params, many, context)
        finally:
            sql_clock.wall += time.perf_counter() - wall
            sql_clock.calls += 1

    messages = ran = 0
    wall, used, server = time.perf_counter(), cpu(), backend_cpu(pids)
    with connections["app"].execute_wrapper(sql), connections["default"].execute_wrapper(sql):
        while True:
            tasks_ = broker_clock.wrap(broker.dequeue)()
            if not tasks_:
                break
            for ack_id, payload in tasks_:
                task = SignedPackage.loads(payload)
                ran += getattr(tasks, task["func"].rsplit(".", 1)[1])(*task["args"])
                broker_clock.wrap(broker.acknowledge)(ack_id)
                messages += 1
    total_wall, total_cpu, server_cpu = time.perf_counter() - wall, cpu() - used, backend_cpu(pids) - server
    n = args.memories
    result = {
        "memories": n,
        "model": embedder.model,
        "backend": getattr(embedder, "backend", None),
        "messages": messages,
        "write": {
            "msPerMemoryWall": round(write["wallSeconds"] / n * 1000, 2),
            "msPerMemoryCpu": round(write["cpuSeconds"] / n * 1000, 2),
            "serverCpuMsPerMemory": round(write["serverCpuSeconds"] / n * 1000, 2),
        },
        "jobs": {
            "msPerMemoryWall": round(total_wall / n * 1000, 2),
            "msPerMemoryCpu": round(total_cpu / n * 1000, 2),
            "embedCpuMsPerMemory": round(embed_clock.cpu / n * 1000, 2),
            "embedCalls": embed_clock.calls,
            "sqlWaitMsPerMemory": round(sql_clock.wall / n * 1000, 2),
            "sqlStatementsPerMemory": round(sql_clock.calls / n, 2),
            "brokerWallMsPerMemory": round(broker_clock.wall / n * 1000, 2),
            "otherCpuMsPerMemory": round((total_cpu - embed_clock.cpu) / n * 1000, 2),
            "serverCpuMsPerMemory": round(server_cpu / n * 1000, 2),
        },
        # Both cores busy with nothing else, no qcluster overhead: the most memories/s this work allows.
        "ceilingMemoriesPerSecondOn2Cores": round(
            2 / ((write["cpuSeconds"] + write["serverCpuSeconds"] + total_cpu + server_cpu) / n), 1
        ),
        "loadAverage": os.getloadavg(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

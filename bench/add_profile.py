"""Where one `memories/add` spends its time, in-process: statements, CPU ms per add, and a cProfile summary.

Django's test client against the bench database (cairn_bench, see api_latency.py) with the bench user's key,
so no network and no gunicorn: what is left is Django, django-ninja, pydantic, our code and the round trips.

    .venv/bin/python bench/add_profile.py [--adds 300] [--top 25]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--adds", type=int, default=300)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    os.environ.setdefault("RATE_LIMIT_REQUESTS", "1000000")
    api_latency.ensure_bench_database()
    api_latency.setup_django_and_migrate()

    from django.db import connections
    from django.test import Client

    _, _, key = api_latency.bench_user_and_key()
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    rng = random.Random(3)

    def add() -> None:
        response = client.post(
            "/api/sdk/v1/memories/add", api_latency.add_body(rng, None), content_type="application/json"
        )
        assert response.status_code == 201, response.content[:300]

    for _ in range(30):  # warm up: imports, connections, caches
        add()
    statements: list[str] = []

    def log(execute, sql, params, many, context):  # noqa: ANN001, ANN202
        statements.append(sql)
        return execute(sql, params, many, context)

    with connections["app"].execute_wrapper(log), connections["default"].execute_wrapper(log):
        add()
    sql_wait = [0.0]

    def timed(execute, sql, params, many, context):  # noqa: ANN001, ANN202
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            sql_wait[0] += time.perf_counter() - started

    wall, used = time.perf_counter(), cpu()
    with connections["app"].execute_wrapper(timed), connections["default"].execute_wrapper(timed):
        for _ in range(args.adds):
            add()
    wall, used = time.perf_counter() - wall, cpu() - used
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(args.adds):
        add()
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(args.top)
    print(out.getvalue())
    # Plain Django-aware round trips: BEGIN/COMMIT/SAVEPOINT go through the wrapper as well.
    print("statements per add:", len(statements))
    for sql in statements:
        print("  ", " ".join(sql.split())[:150])
    result = {
        "adds": args.adds,
        "statementsPerAdd": len(statements),
        "wallMsPerAdd": round(wall / args.adds * 1000, 2),
        "cpuMsPerAdd": round(used / args.adds * 1000, 2),
        "sqlWaitMsPerAdd": round(sql_wait[0] / args.adds * 1000, 2),
        "loadAverage": os.getloadavg(),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

"""One context/get in-process on the seeded 100k bench workspace: wall ms, CPU ms, SQL round trips and SQL ms.

Reuses cairn_bench as seeded by context_latency.py (run that first). No server, no HTTP: the numbers say what
one call costs in this process, which the machine's load inflates far less than a loaded HTTP benchmark.

    .venv/bin/python bench/context_profile.py [--calls 40] [--depth 1 2] [--show-queries]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import context_latency  # noqa: E402 - queries and the bench database name

os.environ["CAIRN_DATABASE_NAME"] = "cairn_bench"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--depth", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--show-queries", action="store_true", help="print the SQL of the last call")
    parser.add_argument(
        "--per-statement",
        action="store_true",
        help="print each statement's median ms over the calls (by position in the call)",
    )
    args = parser.parse_args()

    _, workspace_id = context_latency.in_process_workspace()
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    from memories.selectors import MemoryScope
    from retrieval import context
    from tenancy.rls import workspace_context

    report: dict[str, object] = {"loadavg": os.getloadavg()}
    for depth in args.depth:
        walls: list[float] = []
        cpus: list[float] = []
        sql_ms: list[float] = []
        counts: list[int] = []
        by_position: dict[int, list[float]] = {}
        labels: dict[int, str] = {}
        for index in range(args.calls + 5):  # the first 5 warm the caches and the model
            query = context_latency.QUERIES[index % len(context_latency.QUERIES)]
            request = context.ContextRequest(
                query=query, strategy="hybrid", graph_depth=depth, limit=5, graph_limit=8
            )
            with CaptureQueriesContext(connections["app"]) as captured:
                wall, cpu = time.perf_counter(), time.process_time()
                with workspace_context(workspace_id):
                    data = context.context_get(
                        workspace_id=workspace_id, scope=MemoryScope(), request=request
                    )
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            if index < 5:
                continue
            assert data["trace"]["strategy"] == "hybrid_graph", data["trace"]
            walls.append(wall * 1000)
            cpus.append(cpu * 1000)
            counts.append(len(captured.captured_queries))
            sql_ms.append(sum(float(q["time"]) for q in captured.captured_queries) * 1000)
            for position, q in enumerate(captured.captured_queries):
                by_position.setdefault(position, []).append(float(q["time"]) * 1000)
                labels[position] = " ".join(q["sql"].split())[:110]
        report[f"depth{depth}"] = {
            "wallMsMedian": round(statistics.median(walls), 1),
            "wallMsP90": round(sorted(walls)[int(len(walls) * 0.9) - 1], 1),
            "cpuMsMedian": round(statistics.median(cpus), 1),
            "sqlMsMedian": round(statistics.median(sql_ms), 1),
            "queriesPerCall": max(counts),
        }
        if args.per_statement:
            for position, times in sorted(by_position.items()):
                print(
                    f"{statistics.median(times):7.2f} ms  (n={len(times):3d})  {labels[position]}",
                    file=sys.stderr,
                )
        if args.show_queries:
            for q in captured.captured_queries:
                print(f"{float(q['time']) * 1000:7.1f} ms  {q['sql'][:160]}", file=sys.stderr)
    report["loadavgAfter"] = os.getloadavg()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

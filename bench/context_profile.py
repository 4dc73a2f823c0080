"""One context/get in-process on the seeded 100k bench workspace: wall ms, CPU ms, SQL round trips and SQL ms.

Reuses cairn_bench as seeded by context_latency.py (run that first). No server, no HTTP: the numbers say what
one call costs in this process, which the machine's load inflates far less than a loaded HTTP benchmark.

    .venv/bin/python bench/context_profile.py [--calls 40] [--depth 1 2] [--show-queries] [--ordering off]
        [--rerank]

--ordering off sends halfLifeDays 0 and mmrLambda 1 (decay and MMR off) instead of the workspace's
settings (on by default): the cost of those defaults, alternated with a run without it. --rerank configures
the optional reranker against a local Cohere-style server (tests/helpers/fake_openai.py, word-overlap scores)
and reports the reranker's own time per call apart (the trace's reranker.durationMs): litellm and one
loopback HTTP round trip, without a model's time or a provider's network.
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
    parser.add_argument("--ordering", choices=("on", "off"), default="on", help="decay and MMR (default on)")
    parser.add_argument("--rerank", action="store_true", help="with the reranker (a local fake server)")
    parser.add_argument(
        "--per-statement",
        action="store_true",
        help="print each statement's median ms over the calls (by position in the call)",
    )
    args = parser.parse_args()
    provider = None
    if args.rerank:
        sys.path.insert(0, str(ROOT / "tests" / "helpers"))
        from fake_openai import FakeProvider

        provider = FakeProvider()
        os.environ["RERANK_MODEL"] = "cohere/rerank-english-v3.0"
        os.environ["RERANK_API_BASE"] = provider.start().removesuffix("/v1")
        os.environ["RERANK_API_KEY"] = "bench"

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
        rerank_ms: list[float] = []
        off = args.ordering == "off"
        for index in range(args.calls + 5):  # the first 5 warm the caches and the model
            query = context_latency.QUERIES[index % len(context_latency.QUERIES)]
            request = context.ContextRequest(
                query=query,
                strategy="hybrid",
                graph_depth=depth,
                limit=5,
                graph_limit=8,
                half_life_days=0.0 if off else None,
                mmr_lambda=1.0 if off else None,
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
            if args.rerank:
                assert data["trace"]["reranker"]["ran"], data["trace"]["reranker"]
                rerank_ms.append(data["trace"]["reranker"]["durationMs"])
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
            "ordering": args.ordering,
        }
        if rerank_ms:
            report[f"depth{depth}"]["rerankMsMedian"] = round(statistics.median(rerank_ms), 1)  # type: ignore[index]
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
    if provider is not None:
        provider.stop()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

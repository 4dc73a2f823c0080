"""context/get through Django's full HTTP stack, in-process (test client: middleware, auth, rate limit, ninja
validation and rendering), on the seeded 100k bench workspace: CPU ms per call, and optionally a cProfile.

Reuses cairn_bench as seeded by context_latency.py (run that first).

    .venv/bin/python bench/context_http_profile.py [--calls 60] [--depth 1] [--profile 25]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import context_latency  # noqa: E402 - queries and the bench database name

os.environ["CAIRN_DATABASE_NAME"] = "cairn_bench"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("RATE_LIMIT_REQUESTS", "1000000")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--depth", type=int, nargs="+", default=[1])
    parser.add_argument("--profile", type=int, default=0, help="print the top N functions by own time")
    args = parser.parse_args()

    user, workspace_id = context_latency.in_process_workspace()
    from django.test import Client
    from django.utils import timezone

    from tenancy import services as tenancy_services
    from tenancy.models import ApiKey

    # Earlier runs' keys are revoked first: a user may hold only so many active keys.
    for stale in ApiKey.objects.filter(user=user, name="http-profile", revoked_at__isnull=True):
        tenancy_services.api_key_revoke(api_key=stale)
    key = tenancy_services.api_key_create(
        user=user,
        expires_at=timezone.now() + timedelta(hours=1),
        name="http-profile",
        created_via="bench",
        scope="admin",
    ).raw_key
    client = Client()
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    report: dict[str, object] = {"loadavg": os.getloadavg()}
    profiler = (
        cProfile.Profile(time.process_time) if args.profile else None
    )  # CPU, not wall: waits are not work
    for depth in args.depth:
        cpus: list[float] = []
        walls: list[float] = []
        sizes: list[int] = []
        for index in range(args.calls + 5):
            body = {
                "query": context_latency.QUERIES[index % len(context_latency.QUERIES)],
                "strategy": "hybrid",
                "graphDepth": depth,
                "limit": 5,
                "graphLimit": 8,
            }
            measured = index >= 5
            if profiler and measured:
                profiler.enable()
            wall, cpu = time.perf_counter(), time.process_time()
            response = client.post(
                "/api/sdk/v1/context/get", data=json.dumps(body), content_type="application/json", **headers
            )
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            if profiler and measured:
                profiler.disable()
            assert response.status_code == 200, response.content[:500]
            if not measured:
                continue
            assert response.json()["data"]["trace"]["strategy"] == "hybrid_graph"
            cpus.append(cpu * 1000)
            walls.append(wall * 1000)
            sizes.append(len(response.content))
        report[f"depth{depth}"] = {
            "cpuMsMedian": round(statistics.median(cpus), 2),
            "wallMsMedian": round(statistics.median(walls), 2),
            "bytesMedian": statistics.median(sizes),
        }
    report["loadavgAfter"] = os.getloadavg()
    print(json.dumps(report, indent=2))
    if profiler:
        pstats.Stats(profiler).sort_stats(os.environ.get("PROFILE_SORT", "tottime")).print_stats(
            os.environ.get("PROFILE_FILTER", ""), args.profile
        )


if __name__ == "__main__":
    main()

"""What OpenTelemetry tracing costs a context/get: off (the default), and on with every span exported.

In-process on the seeded 100k bench workspace (run context_latency.py once first), through Django's whole HTTP
stack (the test client), alternating rounds of `--calls` calls with tracing off and on; reports the median CPU
ms per call of each, the spans one call makes, and what the helpers cost when tracing is off (each traced
stage pays one call and one test of a flag: timed here over a million calls).

    .venv/bin/python bench/tracing_overhead.py [--calls 40] [--rounds 3] [--depth 1]

"On" exports to an exporter that drops the spans (no network): the SDK's own cost, span creation and the
batch processor's work, without a collector's. The statement spans are included.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import timeit
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import context_latency  # noqa: E402 - the seeded workspace and its queries

os.environ["CAIRN_DATABASE_NAME"] = "cairn_bench"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("RATE_LIMIT_REQUESTS", "1000000")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--depth", type=int, default=1)
    args = parser.parse_args()

    user, _ = context_latency.in_process_workspace()
    from django.test import Client
    from django.utils import timezone
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    from config import tracing
    from tenancy import services as tenancy_services

    class Dropping(SpanExporter):
        def __init__(self) -> None:
            self.spans = 0

        def export(self, spans: Any) -> SpanExportResult:
            self.spans += len(spans)
            return SpanExportResult.SUCCESS

    key = tenancy_services.api_key_create(
        user=user,
        expires_at=timezone.now() + timedelta(hours=1),
        name="tracing-overhead",
        created_via="bench",
        scope="admin",
    ).raw_key
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"}

    def calls(client: Client, count: int) -> list[float]:
        cpus = []
        for index in range(count):
            body = {
                "query": context_latency.QUERIES[index % len(context_latency.QUERIES)],
                "strategy": "hybrid",
                "graphDepth": args.depth,
                "limit": 5,
                "graphLimit": 8,
            }
            cpu = time.process_time()
            response = client.post(
                "/api/sdk/v1/context/get", data=json.dumps(body), content_type="application/json", **headers
            )
            cpus.append((time.process_time() - cpu) * 1000)
            assert response.status_code == 200, response.content[:300]
        return cpus

    off: list[float] = []
    on: list[float] = []
    spans_per_call = 0.0
    for _ in range(args.rounds):
        client = Client()
        calls(client, 5)  # warm
        off += calls(client, args.calls)
        exporter = Dropping()
        tracing.tracing_configure(service_name="bench", exporter=exporter)
        try:
            client = Client()  # a new handler: its middleware has the instrumentation's
            calls(client, 5)
            exporter.spans = 0
            on += calls(client, args.calls)
            spans_per_call = exporter.spans / args.calls
        finally:
            tracing.tracing_shutdown()

    number = 1_000_000
    span_off_ns = (
        timeit.timeit("with span('x'): pass", globals={"span": tracing.span}, number=number) / number * 1e9
    )
    report = {
        "loadavg": os.getloadavg(),
        "depth": args.depth,
        "cpuMsPerCallOff": round(statistics.median(off), 2),
        "cpuMsPerCallOn": round(statistics.median(on), 2),
        "spansPerCall": round(spans_per_call, 1),
        "offHelperNsPerSpan": round(span_off_ns, 1),
        "offMsPerCall": round(span_off_ns * 16 / 1e6, 4),  # the 16 stage spans a traced context/get opens
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

"""LLM extraction overhead without model time: relate and extract jobs against a local fake OpenAI-compatible
server that answers at once, so what is measured is Cairn's own work per job (prompt building, litellm, JSON
validation, entity resolution with embeddings and advisory locks, fact dedup/invalidation, edge writes, usage
rows).

Writes N memories through the real write flow, embeds them (not timed), then runs every relate and extract job
with the real job code in this process and reports jobs/s, p50/p95 per kind and LLM calls per memory.

    .venv/bin/python bench/extraction_overhead.py [--memories 300]
                                                  [--out bench/results/extraction_overhead.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import api_latency  # noqa: E402 - shares the bench database helpers and the sentence generator

os.environ["CAIRN_DATABASE_NAME"] = "cairn_bench_extraction"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

PEOPLE = ["Alice Martin", "Bob Stone", "Chen Wei", "Dana Ruiz", "Emeka Obi", "Fatima Khan"]
TOOLS = ["PostgreSQL", "Kubernetes", "Redis", "Terraform", "Grafana", "Kafka", "Django", "React"]
PROJECTS = ["billing service", "search api", "mobile app", "data platform", "auth gateway"]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--memories", type=int, default=300)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "extraction_overhead.json")
    return parser.parse_args()


def answer_for(body: dict[str, Any]) -> str:
    """Plausible answers, varied by the prompt so resolution sees new names, re-mentions and changed facts."""
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    rng = random.Random(user)
    if "relate to each other" in system:
        relationship = rng.choice(["agrees", "contradicts", "refines", "unrelated", "unrelated"])
        return json.dumps(
            {
                "relationship": relationship,
                "confidence": 0.85,
                "explanation": "bench",
                "evidence": user[-60:-20],
            }
        )
    if "typed relationships" in system:
        return json.dumps(
            {
                "edges": [
                    {
                        "type": "depends_on",
                        "target_memory_index": 1,
                        "condition_key": None,
                        "direction": "from_new",
                        "confidence": 0.8,
                        "evidence": "bench",
                    }
                ]
            }
        )
    if "same real-world thing" in system:
        return json.dumps({"same_entity": rng.random() < 0.5})
    person, tool, project = rng.choice(PEOPLE), rng.choice(TOOLS), rng.choice(PROJECTS)
    return json.dumps(
        {
            "entities": [
                {"name": person, "type": "person", "summary": "engineer"},
                {"name": tool, "type": "tool", "summary": f"{tool} in production"},
                {"name": project, "type": "project", "summary": None},
            ],
            "facts": [
                {
                    "source": person,
                    "target": project,
                    "relation": "works_on",
                    "fact": f"{person} works on the {project}.",
                    "edge_class": "semantic",
                    "confidence": 0.9,
                    "temporal_hint": None,
                    "valid_from": None,
                    "replaces_previous": False,
                },
                {
                    "source": project,
                    "target": tool,
                    "relation": "uses",
                    "fact": f"The {project} uses {tool} ({rng.randint(1, 3)}).",
                    "edge_class": "semantic",
                    "confidence": 0.8,
                    "temporal_hint": None,
                    "valid_from": None,
                    "replaces_previous": False,
                },
            ],
        }
    )


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def main() -> None:
    args = parse_args()
    api_latency.ensure_bench_database("cairn_bench_extraction")
    api_latency.setup_django_and_migrate()
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from memories.models import PipelineJob
    from memories.selectors import MemoryScope
    from pipeline import jobs
    from pipeline import services as pipeline
    from tenancy.rls import workspace_context
    from tests.helpers.fake_openai import FakeProvider

    provider = FakeProvider(chat_answer=answer_for)
    url = provider.start()
    settings.GRAPH_LLM_MODEL = "openai/bench-model"
    settings.GRAPH_LLM_API_BASE = url
    settings.GRAPH_LLM_API_KEY = "bench"
    settings.GRAPH_LLM_AMBIGUOUS_SIMILARITY_MIN = 0.3  # synthetic sentences are rarely in the 0.70–0.90 band

    user = get_user_model().objects.create_user(f"extraction-{uuid.uuid4().hex[:8]}")
    workspace_id = user.personal_workspace.id
    rng = random.Random(5)
    with workspace_context(workspace_id):
        for _ in range(args.memories):
            fields = api_latency.memory_fields(rng)
            pipeline.memory_add_flow(
                workspace_id=workspace_id,
                scope=MemoryScope(),
                content=fields["content"],
                type=fields.get("type", "note"),
                tags=fields.get("tags"),
                category=fields.get("category"),
            )
    # Embedding and similarity (not timed); they queue the relate and extract jobs.
    with workspace_context(workspace_id):
        embed_ids = list(PipelineJob.objects.filter(kind=jobs.Kind.EMBED).values_list("id", flat=True))
    for job_id in embed_ids:
        pipeline.job_run(workspace_id=workspace_id, job_id=job_id)

    timings: dict[str, list[float]] = {"relate": [], "extract": []}
    started = time.perf_counter()
    for kind in ("relate", "extract"):
        with workspace_context(workspace_id):
            job_ids = list(
                PipelineJob.objects.filter(kind=kind, status="queued")
                .order_by("id")
                .values_list("id", flat=True)
            )
        for done, job_id in enumerate(job_ids, 1):
            t0 = time.perf_counter()
            pipeline.job_run(workspace_id=workspace_id, job_id=job_id)
            timings[kind].append((time.perf_counter() - t0) * 1000)
            if done % 50 == 0:
                print(f"  {kind}: {done}/{len(job_ids)}", file=sys.stderr)
    elapsed = time.perf_counter() - started
    provider.stop()

    from django.db import connections

    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT purpose, count(*) FROM llm_usage WHERE workspace_id = %s GROUP BY 1", [workspace_id]
        )
        calls = dict(cursor.fetchall())
        cursor.execute(
            "SELECT kind || ':' || status, count(*) FROM pipeline_jobs WHERE workspace_id = %s GROUP BY 1",
            [workspace_id],
        )
        statuses = dict(cursor.fetchall())
        cursor.execute(
            "SELECT count(*) FROM graph_nodes WHERE workspace_id = %s AND node_type IN "
            "('person','tool','project')",
            [workspace_id],
        )
        entity_count = cursor.fetchone()[0]
    total_jobs = sum(len(v) for v in timings.values())
    result = {
        "memories": args.memories,
        "jobs": total_jobs,
        "jobs_per_second": round(total_jobs / elapsed, 1),
        "per_kind_ms": {
            kind: {
                "p50": round(statistics.median(v), 2),
                "p95": round(percentile(v, 0.95), 2),
                "jobs_per_second": round(len(v) / (sum(v) / 1000), 1),
            }
            for kind, v in timings.items()
            if v
        },
        "llm_calls_per_memory": round(sum(calls.values()) / args.memories, 2),
        "llm_calls_by_purpose": calls,
        "job_statuses": statuses,
        "entities": entity_count,
        "load_average": os.getloadavg(),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

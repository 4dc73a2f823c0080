"""A coding agent's check of what is current: the 300 agent memories (rules, decisions, notes, update pairs)
written through the SDK API in file order, a few hours apart, the pipeline run as the worker would (update
detection included, no LLM), then questions asked with the default strategy.

    .venv/bin/python bench/agent_quality.py [--data ../shared/data/agent-memories/agent-memories-300.jsonl]
        [--questions bench/data/agent_questions.jsonl] [--out bench/results/agent_quality.json] [--context]

Reports, over the questions (bench/data/agent_questions.jsonl: update pairs, paraphrases, scoped and
multi-memory questions, written for this bench):
- newer-above-older: for update questions, the newer memory ranks above the older (or the older is gone)
  within the top 10;
- recall@5 (share of a question's expected memories in the top 5) and MRR@10 (first expected memory);
- scope leaks: results the question's scope may not see (another project's or another user's).
--context also asks context/get (limit 5) and reports, over its rules and memories, the share of expected
memories in the answer (inAnswer), and for updates whether the newer side is in it and the stale side not.

Runs on its own database (cairn_agent_quality) on the embedded PostgreSQL; every run writes a fresh tenant
workspace (agent-quality-<time>), so runs never see each other's memories.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

DATABASE = "cairn_agent_quality"
TENANT = f"agent-quality-{int(time.time())}"


def _setup() -> None:
    import locomo

    locomo.DATABASE = DATABASE
    locomo.ensure_database()
    os.environ["CAIRN_DATABASE_NAME"] = DATABASE
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("RATE_LIMIT_REQUESTS", "1000000")
    locomo.setup_django_and_migrate()


def _ingest(api: Any, workspace_id: int, rows: list[dict[str, Any]]) -> dict[str, str]:
    """Write the memories in file order, each an hour after the one before (ending now), embedding and
    detecting as the worker would after each write. Returns content → id."""
    from django.utils import timezone

    from memories.models import Memory
    from pipeline import services as pipeline
    from tenancy.rls import workspace_context

    ids: dict[str, str] = {}
    start = timezone.now() - timedelta(hours=len(rows))
    for index, row in enumerate(rows):
        body = {**row, "scope": {**(row.get("scope") or {}), "tenantId": TENANT}}
        status, envelope = api.post("memories/add", body)
        if status != 201:
            raise SystemExit(f"memories/add failed: {status} {envelope}")
        memory_id = envelope["data"]["id"]
        ids[row["content"]] = memory_id
        with workspace_context(workspace_id):
            Memory.objects.filter(pk=memory_id).update(created_at=start + timedelta(hours=index))
        pipeline.jobs_run_pending(workspace_id=workspace_id)
    return ids


def _leaks(memories: list[dict[str, Any]], scope: dict[str, str]) -> int:
    leaks = 0
    for memory in memories:
        project, user = memory.get("projectId"), memory.get("userId")
        if (
            project is not None
            and project != scope.get("projectId")
            or user is not None
            and user != scope.get("userId")
        ):
            leaks += 1
    return leaks


def _scores(ranked: list[str], question: dict[str, Any]) -> dict[str, Any]:
    def position(text: str) -> int | None:
        return next((rank for rank, content in enumerate(ranked, 1) if text in content), None)

    expected = [position(text) for text in question["expected"]]
    found5 = sum(1 for rank in expected if rank is not None and rank <= 5)
    first = min((rank for rank in expected if rank is not None and rank <= 10), default=None)
    result: dict[str, Any] = {
        "recall@5": found5 / len(expected),
        "mrr@10": 1.0 / first if first else 0.0,
        "ranks": expected,
    }
    if question["kind"] == "update":
        new, old = expected[0], position(question["stale"][0])
        result["staleRank"] = old
        result["newerAbove"] = new is not None and new <= 10 and (old is None or new < old)
    return result


def _mean(rows: list[dict[str, Any]], key: str) -> float:
    values = [float(row[key]) for row in rows if key in row]
    return round(sum(values) / len(values), 3) if values else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=ROOT.parent / "shared" / "data" / "agent-memories" / "agent-memories-300.jsonl",
    )
    parser.add_argument("--questions", type=Path, default=ROOT / "bench" / "data" / "agent_questions.jsonl")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "agent_quality.json")
    parser.add_argument("--context", action="store_true", help="also ask context/get")
    args = parser.parse_args()
    _setup()

    import locomo

    from tenancy.services import tenant_workspace_resolve

    user, key = locomo.bench_user_and_key()
    api = locomo.SdkApi(key)
    workspace_id = tenant_workspace_resolve(user=user, tenant_id=TENANT).id
    rows = [json.loads(line) for line in args.data.read_text().splitlines() if line.strip()]
    questions = [json.loads(line) for line in args.questions.read_text().splitlines() if line.strip()]
    _ingest(api, workspace_id, rows)

    results: dict[str, list[dict[str, Any]]] = {"search": [], "context": []}
    for question in questions:
        scope = {**question["scope"], "tenantId": TENANT}
        status, envelope = api.post(
            "memories/search", {"query": question["question"], "limit": 10, "scope": scope}
        )
        memories = envelope["data"]["memories"] if status == 200 else []
        row = _scores([m["content"] for m in memories], question)
        row.update(
            question=question["question"], kind=question["kind"], leaks=_leaks(memories, question["scope"])
        )
        results["search"].append(row)
        if args.context:
            status, envelope = api.post(
                "context/get", {"query": question["question"], "limit": 5, "scope": scope}
            )
            data = envelope["data"] if status == 200 else {"memories": [], "conflicts": []}
            # The answer is what the agent reads: the rules (always on) and the memories, in no rank order
            # across the two, so context/get is scored on what is in it.
            got = data.get("rules", []) + data["memories"]
            contents = [m["content"] for m in got]
            found = [any(text in content for content in contents) for text in question["expected"]]
            crow: dict[str, Any] = {
                "question": question["question"],
                "kind": question["kind"],
                "leaks": _leaks(got, question["scope"]),
                "inAnswer": sum(found) / len(found),
                "conflicts": len(data.get("conflicts") or []),
            }
            if question["kind"] == "update":
                stale = any(question["stale"][0] in content for content in contents)
                crow["staleRank"] = 1 if stale else None
                crow["newerAbove"] = found[0] and not stale
            results["context"].append(crow)

    report: dict[str, Any] = {"questions": len(questions)}
    for surface, rows_ in results.items():
        if not rows_:
            continue
        updates = [row for row in rows_ if row["kind"] == "update"]
        report[surface] = {
            # search: the newer ranks above the older (or the older is gone); context: the newer is in the
            # answer and the older is not.
            "newerAboveOlder": round(
                sum(1 for row in updates if row["newerAbove"]) / max(1, len(updates)), 3
            ),
            "updateQuestions": len(updates),
            "staleInAnswer": sum(1 for row in updates if row["staleRank"] is not None),
            "scopeLeaks": sum(row["leaks"] for row in rows_),
        }
        metrics = ("recall@5", "mrr@10") if surface == "search" else ("inAnswer",)
        for metric in metrics:
            report[surface][metric] = _mean(rows_, metric)
        report[surface]["byKind"] = {
            kind: {**{metric: _mean(group, metric) for metric in metrics}, "n": len(group)}
            for kind in ("update", "paraphrase", "scoped", "multi")
            if (group := [row for row in rows_ if row["kind"] == kind])
        }
    print(json.dumps(report, indent=2))
    for row in results["search"]:
        if row.get("newerAbove") is False or row["mrr@10"] < 1:
            print(f"  [{row['kind']}] {row['question']}: ranks {row['ranks']} stale {row.get('staleRank')}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"report": report, "rows": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""A small conversation quality set of our own, not LoCoMo: the coding-agent conversations of the
agent-memories set (agent-memories-300.jsonl, given with --data: a user and the assistant deciding something,
turn by turn) among the other memories of that file, and questions we wrote whose answer is a turn of one of
them, often the reply, which shares few words with the question. Each question is asked with hybrid
memories/search (limit 10) in two workspaces that differ only in how the conversations were written:

  metadata   every line through memories/add as the file has it (the conversation only in metadata keys)
  sessions   the conversations through sessions/start + sessions/turns (speaker, role), the rest as above

    .venv/bin/python bench/agent_sessions_quality.py --data PATH [--out bench/results/agent-sessions.json]

In both, a conversation's turns are written without the file's per-turn userId (a session has one owner), so
the two workspaces hold the same memories visible to the same scope. Runs on bench/locomo.py's database
(cairn_locomo), in workspaces of its own (tenantId agent-sessions-metadata / agent-sessions-sessions).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import locomo  # noqa: E402 - sets the database and settings module before Django loads

# (question, project, substrings of the turns that answer it): written for this bench.
QUESTIONS: list[tuple[str, str, tuple[str, ...]]] = [
    ("How can we make order search fast on the web app?", "github.com/demo/web", ("pg_trgm GIN index",)),
    (
        "Is search slow for customers with many orders, and why?",
        "github.com/demo/web",
        ("ILIKE on order notes",),
    ),
    (
        "Why are opaque tokens better than JWTs for the mobile app?",
        "github.com/demo/api",
        ("revoke sessions",),
    ),
    (
        "Should we keep JWTs for the mobile app?",
        "github.com/demo/api",
        ("revoke sessions", "move mobile to opaque tokens"),
    ),
    ("What did we do about CI being too slow?", "github.com/demo/api", ("Split pytest into 4 shards",)),
    ("What does Datadog give us that Sentry does not?", "github.com/demo/api", ("Datadog covers metrics",)),
    (
        "How do we release the new checkout gradually?",
        "github.com/demo/web",
        ("LaunchDarkly keyed by account",),
    ),
    ("Do we need Datadog if we have Sentry?", "github.com/demo/api", ("Datadog covers metrics",)),
]
TENANTS = {"metadata": "agent-sessions-metadata", "sessions": "agent-sessions-sessions"}
KS = (1, 3, 10)


def load(path: Path) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    """(conversations by sessionId, in file order; every other line). A conversation is a sessionId whose
    lines name their speakers; the file's daily notes share a sessionId without speakers and stay plain
    memories."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    conversations: dict[str, list[dict[str, Any]]] = {}
    plain = []
    for row in rows:
        metadata = row.get("metadata") or {}
        if metadata.get("sessionId") and metadata.get("speaker"):
            conversations.setdefault(metadata["sessionId"], []).append(row)
        else:
            plain.append(row)
    return conversations, plain


def unowned(row: dict[str, Any]) -> dict[str, Any]:
    scope = {k: v for k, v in (row.get("scope") or {}).items() if k != "userId"}
    return {**row, "scope": scope}


def write(
    api: Any, tenant: str, mode: str, conversations: dict[str, list[dict[str, Any]]], plain: list
) -> None:
    def add(row: dict[str, Any]) -> None:
        body = {**row, "scope": {**(row.get("scope") or {}), "tenantId": tenant}}
        status, envelope = api.post("memories/add", body)
        if status not in (200, 201):
            raise RuntimeError(f"memories/add: {locomo.envelope_error(status, envelope)}")

    for row in plain:
        add(row)
    for session_key, rows in conversations.items():
        rows = [unowned(row) for row in rows]
        if mode == "metadata":
            for row in rows:
                add(row)
            continue
        scope = {**rows[0]["scope"], "tenantId": tenant}
        status, envelope = api.post("sessions/start", {"title": session_key, "scope": scope})
        if status != 201:
            raise RuntimeError(f"sessions/start: {locomo.envelope_error(status, envelope)}")
        turns = [
            {
                "content": row["content"],
                "speaker": row["metadata"]["speaker"],
                "role": "assistant" if row["metadata"]["speaker"] == "assistant" else "user",
                "metadata": {k: v for k, v in row["metadata"].items() if k not in ("sessionId", "speaker")}
                or None,
            }
            for row in rows
        ]
        body = {"sessionId": envelope["data"]["sessionId"], "turns": turns, "scope": scope}
        status, envelope = api.post("sessions/turns", body)
        if status != 201:
            raise RuntimeError(f"sessions/turns: {locomo.envelope_error(status, envelope)}")


def ask(api: Any, tenant: str) -> list[dict[str, Any]]:
    rows = []
    for question, project, answers in QUESTIONS:
        body = {
            "query": question,
            "limit": 10,
            "strategy": "hybrid",
            "scope": {"tenantId": tenant, "projectId": project},
        }
        status, envelope = api.post("memories/search", body)
        if status != 200:
            raise RuntimeError(f"memories/search: {locomo.envelope_error(status, envelope)}")
        contents = [m["content"] for m in envelope["data"]["memories"]]
        rank = next((i + 1 for i, c in enumerate(contents) if any(a in c for a in answers)), None)
        rows.append({"question": question, "rank": rank, "top3": contents[:3]})
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    out = {f"hit@{k}": round(sum(1 for r in rows if r["rank"] and r["rank"] <= k) / len(rows), 3) for k in KS}
    out["mrr@10"] = round(sum(1 / r["rank"] for r in rows if r["rank"]) / len(rows), 3)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="agent-memories-300.jsonl")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "agent-sessions.json")
    args = parser.parse_args()
    conversations, plain = load(args.data)
    locomo.ensure_database()
    locomo.setup_django_and_migrate()
    user, key = locomo.bench_user_and_key()
    locomo.warm_embedder()
    api = locomo.SdkApi(key)
    from tenancy.services import tenant_workspace_resolve

    report: dict[str, Any] = {"benchmark": "agent_sessions_quality", "questions": len(QUESTIONS), "modes": {}}
    for mode, tenant in TENANTS.items():
        workspace_id = tenant_workspace_resolve(user=user, tenant_id=tenant).id
        if locomo.live_memory_count(workspace_id):
            locomo.wipe_workspace(workspace_id)
        write(api, tenant, mode, conversations, plain)
        locomo.run_pipeline(workspace_id, mode, len(plain) + sum(len(r) for r in conversations.values()))
        locomo.progress_done()
        rows = ask(api, tenant)
        report["modes"][mode] = {"summary": summary(rows), "questions": rows}
        print(mode, report["modes"][mode]["summary"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

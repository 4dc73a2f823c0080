"""Retrieval quality on LoCoMo: evidence recall@k and hit@k per question category, per search strategy.

    .venv/bin/python bench/locomo.py [--data PATH] [--out bench/results/locomo.json]
        [--strategies lexical,semantic,hybrid,hybrid_graph,...] [--conversations N] [--graph-depth 1|2]
        [--graph-baseline 20] [--graph-limit 20] [--reingest]

What it does, in order (bench/README.md explains the numbers):
  1. creates the database cairn_locomo on the embedded PostgreSQL if missing and migrates it (the developer's,
     test and bench databases are never opened);
  2. one SDK-tenant workspace per conversation (tenantId locomo-<sample_id> under the user `locomo`); each
     dialog turn becomes one memory, written with the real write flow (pipeline.services.memory_add_flow),
     dated at its session's time and carrying {"dia_id": …} in metadata; then the real embed + similarity
     jobs run in-process (jobs_run_pending, the product's default model or --model). A workspace that already
     holds all its turns is reused (and re-embedded if its vectors are of another model);
  3. asks every question through the SDK API (django.test.Client, a real key): memories/search with limit 20
     for lexical / semantic / hybrid, and context/get (hybrid, graph expansion, the workspace's rollout in
     canary) for hybrid_graph — skipped with a note while context/get or graph/rollout is not there;
  4. optionally computes bench-only variants of the ranking (not product behaviour, see VARIANTS);
  5. prints tables and writes everything as JSON to --out.
The data is read from --data at run time (default: the LoCoMo dev split, kept outside the repository) and is
never copied into the repository.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import platform
import re
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DATABASE = "cairn_locomo"
USERNAME = "locomo"
TENANT_PREFIX = "locomo-"
# The product's default local model unless --model names another (set before Django reads its settings).
MODEL = os.environ.get("EMBEDDING_MODEL", "").strip() or "local/all-MiniLM-L6-v2-int8-onnx"
API = "/api/sdk/v1"
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
SEARCH_LIMIT = 20  # the largest k; memories/search allows 50
WRITE_CHUNK = 50  # memories per write transaction while ingesting

# Both database aliases honour CAIRN_DATABASE_NAME; set before Django loads its settings. The harness makes
# thousands of requests with one key, so the per-key budget must not interfere.
os.environ["CAIRN_DATABASE_NAME"] = DATABASE
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ["RATE_LIMIT_REQUESTS"] = "1000000000"
warnings.filterwarnings("ignore", message="No directory at")  # static files: irrelevant to the API

KS = (1, 5, 10, 20)
# Memory-hygiene options: fields added to every memories/search and context/get body
# (--importance-weight), and admission control on while ingesting (--admission, into workspaces of their
# own: tenantId locomo-adm-<id>).
EXTRA_BODY: dict[str, Any] = {}
ADMISSION = False
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
HEADLINE = (1, 2, 3, 4)
API_STRATEGIES = ("lexical", "semantic", "hybrid", "hybrid_graph")
# Bench-only rankings: what the product would return if it changed as described (never product behaviour).
VARIANTS = {
    "lexical_or": "full-text search with the question's words OR'ed (to_tsquery 'w1 | w2 | …', stop words "
    "dropped by the english config), ranked by ts_rank_cd like the product",
    "hybrid_or": "reciprocal-rank fusion (k=60) of lexical_or and the product's semantic ranking, 80 "
    "candidates each (the product's hybrid with lexical_or instead of websearch_to_tsquery's AND)",
    "hybrid_and_or": "reciprocal-rank fusion of the product's lexical (BM25; an AND of the words in its "
    "first version), lexical_or and semantic rankings",
    "hybrid+adjacent": "the product's hybrid top 10, then the turns right before and after each of them "
    "(what temporal preceded_by / followed_by edges would let graph expansion add), then hybrid again "
    "up to 20",
}
DEFAULT_STRATEGIES = (*API_STRATEGIES, *VARIANTS)
FUSION_DEPTH = max(SEARCH_LIMIT * 4, 40)  # candidates per ranking, as retrieval.search uses for hybrid
ADJACENT_SEEDS = 10


# --- The data set -------------------------------------------------------------------------------------------

SESSION_KEY = re.compile(r"session_(\d+)")
EVIDENCE_ID = re.compile(r"D:?(\d+):(\d+)")
WORD = re.compile(r"[A-Za-z0-9]+")


@dataclass(frozen=True)
class Turn:
    dia_id: str
    session: int
    index: int  # position in its session, from 0
    content: str
    time: datetime
    speaker: str = ""


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: frozenset[str]
    answer: str  # `answer`, or `adversarial_answer` for category 5 (kept for the per-question details only)


@dataclass
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[Question]
    skipped_questions: int = 0  # no evidence left after normalisation
    dropped_evidence: int = 0  # evidence ids that are malformed beyond repair or match no turn

    @property
    def tenant_id(self) -> str:
        return (TENANT_PREFIX + "adm-" if ADMISSION else TENANT_PREFIX) + self.sample_id


def session_time(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' → 2023-05-08 13:56 UTC."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def turn_content(turn: dict[str, Any]) -> str:
    content = f'{turn["speaker"]} said, "{turn["text"]}"'
    if turn.get("blip_caption"):
        content += f" and shared {turn['blip_caption']}"
    return content


def conversation_turns(conversation: dict[str, Any]) -> list[Turn]:
    """Every turn in session order. A turn's time is its session's time plus its index in seconds, so turns of
    one session keep their order wherever the product breaks ties by time."""
    sessions = sorted(
        (int(match.group(1)), key)
        for key in conversation
        if (match := SESSION_KEY.fullmatch(key)) and conversation[key]
    )
    turns: list[Turn] = []
    for number, key in sessions:
        start = session_time(conversation[f"{key}_date_time"])
        for index, turn in enumerate(conversation[key]):
            turns.append(
                Turn(
                    turn["dia_id"],
                    number,
                    index,
                    turn_content(turn),
                    start + timedelta(seconds=index),
                    turn.get("speaker") or "",
                )
            )
    return turns


def normalise_evidence(raw_ids: Iterable[str], known: set[str]) -> tuple[frozenset[str], int]:
    """(valid ids, how many were dropped): joined ids split, D:11:26 → D11:26, D30:05 → D30:5, unknown
    ids dropped."""
    kept: set[str] = set()
    dropped = 0
    for raw in raw_ids:
        for token in re.split(r"[;,\s]+", raw.strip()):
            if not token:
                continue
            match = EVIDENCE_ID.fullmatch(token)
            dia_id = f"D{int(match.group(1))}:{int(match.group(2))}" if match else None
            if dia_id in known:
                kept.add(dia_id)
            else:
                dropped += 1
    return frozenset(kept), dropped


def load_conversations(path: Path, limit: int | None) -> list[Conversation]:
    samples = json.loads(path.read_text())
    conversations = []
    for sample in samples[:limit]:
        turns = conversation_turns(sample["conversation"])
        known = {turn.dia_id for turn in turns}
        conversation = Conversation(sample["sample_id"], turns, [])
        for qa in sample["qa"]:
            evidence, dropped = normalise_evidence(qa.get("evidence") or [], known)
            conversation.dropped_evidence += dropped
            if not evidence:
                conversation.skipped_questions += 1
                continue
            answer = qa.get("adversarial_answer") if int(qa["category"]) == 5 else qa.get("answer")
            conversation.questions.append(
                Question(
                    qa["question"], int(qa["category"]), evidence, str(answer if answer is not None else "")
                )
            )
        conversations.append(conversation)
    return conversations


# --- Database and tenant workspaces -------------------------------------------------------------------------


def ensure_database() -> None:
    """Create the harness's own database on the embedded server (the helper is shared with api_latency.py)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import api_latency

    # Importing api_latency points CAIRN_DATABASE_NAME at its own database; this process works on DATABASE.
    os.environ["CAIRN_DATABASE_NAME"] = DATABASE
    api_latency.ensure_bench_database(DATABASE)


def setup_django_and_migrate() -> None:
    import django
    from django.core.management import call_command

    django.setup()
    # One log line per request would bury the progress and the table (thousands of questions per strategy).
    logging.getLogger("cairn.request").setLevel(logging.WARNING)
    call_command("migrate", interactive=False, verbosity=0)


def bench_user_and_key() -> tuple[Any, str]:
    """The `locomo` user and a fresh API key valid for a day. Earlier keys are left to expire rather
    than revoked, so two runs at once (say, a quick --conversations 1 check during a full run) do not cut
    each other off."""
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from tenancy import services

    user_model = get_user_model()
    user = user_model.objects.filter(username=USERNAME).first()
    if user is None:
        user = user_model.objects.create_user(USERNAME, email="locomo@example.com", password=None)
    services.personal_workspace_ensure(user=user)
    key = services.api_key_create(
        user=user,
        expires_at=timezone.now() + timedelta(days=1),
        name="locomo",
        created_via="bench",
        scope="admin",
    )
    return user, key.raw_key


def tenant_workspace_id(user: Any, conversation: Conversation) -> int:
    """The SDK-tenant workspace the API resolves for scope {tenantId}, provisioned like on first use."""
    from tenancy.services import tenant_workspace_resolve

    return tenant_workspace_resolve(user=user, tenant_id=conversation.tenant_id).id


# --- Ingest -------------------------------------------------------------------------------------------------


def progress(message: str) -> None:
    """One line rewritten in place on a terminal; plain lines in a log."""
    if sys.stderr.isatty():
        print(f"\r\033[K{message}", end="", file=sys.stderr, flush=True)
    else:
        print(message, file=sys.stderr, flush=True)


def progress_done() -> None:
    if sys.stderr.isatty():
        print(file=sys.stderr)


def live_memory_count(workspace_id: int) -> int:
    from memories.models import Memory
    from tenancy.rls import workspace_context

    with workspace_context(workspace_id):
        return Memory.objects.filter(workspace_id=workspace_id, deleted_at__isnull=True).count()


def wipe_workspace(workspace_id: int) -> None:
    """Forget every memory and purge it for good, through the product's bulk-forget and vacuum flows."""
    from memories import services
    from memories.selectors import MemoryScope
    from pipeline import services as pipeline
    from tenancy.rls import workspace_context

    everything = services.BulkFilters(all=True)
    while True:
        with workspace_context(workspace_id):
            result = pipeline.memory_bulk_forget_flow(
                workspace_id=workspace_id, scope=MemoryScope(), filters=everything, dry_run=False
            )
        if not result.get("hasMore"):
            break
    while True:
        with workspace_context(workspace_id):
            purged = pipeline.memory_vacuum_flow(workspace_id=workspace_id, scope=MemoryScope())
        if not purged:
            break


def write_turns(workspace_id: int, turns: list[Turn]) -> None:
    """The real write flow (memory, graph mapping, embed job), then the memory's time set to the turn's."""
    from memories.models import Memory
    from memories.selectors import MemoryScope
    from pipeline import services as pipeline
    from tenancy.rls import workspace_context

    with workspace_context(workspace_id):
        for turn in turns:
            if ADMISSION:
                outcome = pipeline.memory_add_admitted_flow(
                    workspace_id=workspace_id,
                    scope=MemoryScope(),
                    content=turn.content,
                    metadata=turn_metadata(turn),
                )
                if not outcome.admitted:
                    continue
                memory = outcome.memory
            else:
                memory = pipeline.memory_add_flow(
                    workspace_id=workspace_id,
                    scope=MemoryScope(),
                    content=turn.content,
                    metadata=turn_metadata(turn),
                )
            Memory.objects.filter(pk=memory.id).update(created_at=turn.time, updated_at=turn.time)


def turn_metadata(turn: Turn) -> dict[str, str]:
    """The turn's dia_id, its session as metadata.sessionId (the product treats memories with one sessionId as
    one conversation: hybrid search looks at a match's neighbours in it), when it was said as
    metadata.sessionTime (decay and a question's time window read it) and who said it as metadata.speaker
    (hybrid lifts the memories of a speaker the question names), as a chat agent would record them."""
    metadata = {
        "dia_id": turn.dia_id,
        "sessionId": f"session_{turn.session}",
        "sessionTime": turn.time.isoformat(),
    }
    if turn.speaker:
        metadata["speaker"] = turn.speaker
    return metadata


def add_missing_speakers(workspace_id: int, turns: list[Turn]) -> int:
    """Workspaces ingested before turns carried metadata.speaker get it from the data by dia_id, so they can
    be reused without embedding everything again."""
    from django.db import connections

    from tenancy.rls import workspace_context

    known = [(turn.dia_id, turn.speaker) for turn in turns if turn.speaker]
    if not known:
        return 0
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute(
            """
            UPDATE memories m SET metadata = m.metadata || jsonb_build_object('speaker', t.speaker)
            FROM unnest(%s::text[], %s::text[]) AS t(dia_id, speaker)
            WHERE m.workspace_id = %s AND m.metadata ->> 'dia_id' = t.dia_id AND NOT m.metadata ? 'speaker'
            """,
            [[d for d, _ in known], [s for _, s in known], workspace_id],
        )
        return cursor.rowcount


def add_missing_session_times(workspace_id: int, turns: list[Turn]) -> int:
    """Workspaces ingested before turns carried metadata.sessionTime get it from the data by dia_id."""
    from django.db import connections

    from tenancy.rls import workspace_context

    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute(
            """
            UPDATE memories m SET metadata = m.metadata || jsonb_build_object('sessionTime', t.at)
            FROM unnest(%s::text[], %s::text[]) AS t(dia_id, at)
            WHERE m.workspace_id = %s AND m.metadata ->> 'dia_id' = t.dia_id
              AND NOT m.metadata ? 'sessionTime'
            """,
            [[turn.dia_id for turn in turns], [turn.time.isoformat() for turn in turns], workspace_id],
        )
        return cursor.rowcount


def add_missing_session_ids(workspace_id: int) -> int:
    """Workspaces ingested before turns carried a sessionId get it from their dia_id (D3:7 → session_3), so
    they can be reused without embedding everything again."""
    from django.db import connections

    from tenancy.rls import workspace_context

    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute(
            """
            UPDATE memories
            SET metadata = metadata || jsonb_build_object(
                'sessionId', 'session_' || substring(metadata ->> 'dia_id' FROM '^D(\\d+):'))
            WHERE workspace_id = %s AND metadata ? 'dia_id' AND NOT metadata ? 'sessionId'
              AND metadata ->> 'dia_id' ~ '^D\\d+:'
            """,
            [workspace_id],
        )
        return cursor.rowcount


def run_pipeline(workspace_id: int, label: str, total: int) -> int:
    """Run the workspace's queued jobs (embed, then similarity inline) in batches, showing progress."""
    from pipeline import services as pipeline
    from retrieval import vectors
    from tenancy.rls import workspace_context

    ran = 0
    while True:
        batch = pipeline.jobs_run_pending(
            workspace_id=workspace_id, include_delayed=True, max_jobs=pipeline.EMBED_BATCH_SIZE
        )
        ran += batch
        with workspace_context(workspace_id):
            embedded = vectors.workspace_vector_count(workspace_id=workspace_id, dimension=384)
        progress(f"ingest {label}: embedded {embedded}/{total}")
        if not batch:
            return ran


def pipeline_state(workspace_id: int) -> dict[str, int]:
    from django.db import connections

    from tenancy.rls import workspace_context

    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM memory_embeddings WHERE workspace_id = %s AND model = %s",
            [workspace_id, MODEL],
        )
        vectors = cursor.fetchone()[0]
        cursor.execute(
            "SELECT count(*) FROM graph_edges WHERE workspace_id = %s AND edge_type = 'similar_to'",
            [workspace_id],
        )
        similar = cursor.fetchone()[0]
        cursor.execute(
            "SELECT count(*) FROM pipeline_jobs WHERE workspace_id = %s AND status <> 'succeeded'",
            [workspace_id],
        )
        unfinished = cursor.fetchone()[0]
    return {"vectors": vectors, "similarToEdges": similar, "unfinishedJobs": unfinished}


def ingest(workspace_id: int, conversation: Conversation, reingest: bool) -> dict[str, Any]:
    started = time.perf_counter()
    label = conversation.sample_id
    total = len(conversation.turns)
    existing = live_memory_count(workspace_id)
    write = reingest or existing != total
    if write:
        if existing:
            progress(f"ingest {label}: removing {existing} memories of an earlier run")
            wipe_workspace(workspace_id)
        if ADMISSION:
            from memories import services
            from tenancy.rls import workspace_context

            with workspace_context(workspace_id):
                services.memory_settings_update(
                    workspace_id=workspace_id, changes={"admission_enabled": True}
                )
        for start in range(0, total, WRITE_CHUNK):
            write_turns(workspace_id, conversation.turns[start : start + WRITE_CHUNK])
            if ADMISSION:  # novelty compares with embedded memories: embed each chunk before the next
                run_pipeline(workspace_id, label, total)
            progress(f"ingest {label}: wrote {min(start + WRITE_CHUNK, total)}/{total} turns")
    else:
        add_missing_session_ids(workspace_id)
        add_missing_speakers(workspace_id, conversation.turns)
        add_missing_session_times(workspace_id, conversation.turns)
        if pipeline_state(workspace_id)["vectors"] != total:
            # Written under another model (--model changed): the product's own re-embedding path.
            from django.core.management import call_command

            progress(f"ingest {label}: embedding with {MODEL}")
            call_command("reembed", workspace=[workspace_id], model=MODEL, stdout=io.StringIO())
    jobs = run_pipeline(workspace_id, label, total)
    progress_done()
    state = pipeline_state(workspace_id)
    if state["vectors"] != total or state["unfinishedJobs"]:
        print(
            f"warning: {label} has {state['vectors']}/{total} vectors and "
            f"{state['unfinishedJobs']} unfinished jobs; semantic rankings will be partial",
            file=sys.stderr,
        )
    return {
        "sampleId": label,
        "tenantId": conversation.tenant_id,
        "workspaceId": workspace_id,
        "turns": total,
        "ingested": write,
        "jobsRun": jobs,
        "storedMemories": live_memory_count(workspace_id),  # < turns when admission control refused some
        **state,
        "seconds": round(time.perf_counter() - started, 1),
    }


# --- Asking: the SDK API ------------------------------------------------------------------------------------


class StrategyUnavailable(Exception):
    """The endpoint a strategy needs is not there (or not working) yet."""


@dataclass
class Ranking:
    dia_ids: list[str | None]  # in rank order; None for a memory without a dia_id (none expected)
    applied: str  # what the server says it did
    fallback: str | None = None
    graph_added: list[bool] = field(default_factory=list)  # hybrid_graph: which entries came from expansion


class SdkApi:
    """The SDK API in-process through django.test.Client, authenticated with a real key."""

    def __init__(self, key: str) -> None:
        from django.test import Client

        self.client = Client(raise_request_exception=False)
        self.authorization = f"Bearer {key}"

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        response = self.client.post(
            f"{API}/{path}",
            data=json.dumps(body),
            content_type="application/json",
            HTTP_AUTHORIZATION=self.authorization,
        )
        try:
            envelope = response.json()
        except ValueError:
            envelope = {}
        return response.status_code, envelope if isinstance(envelope, dict) else {}


def envelope_error(status: int, envelope: dict[str, Any]) -> str:
    error = envelope.get("error") or {}
    return f"HTTP {status} {error.get('code', '')}: {error.get('message', '')}".strip()


def dia_ids(memories: list[dict[str, Any]]) -> list[str | None]:
    return [(memory.get("metadata") or {}).get("dia_id") for memory in memories]


def search_ranking(api: SdkApi, tenant_id: str, strategy: str, query: str) -> Ranking:
    body = {
        "query": query,
        "limit": SEARCH_LIMIT,
        "strategy": strategy,
        "scope": {"tenantId": tenant_id},
        **EXTRA_BODY,
    }
    status, envelope = api.post("memories/search", body)
    if status != 200:
        raise RuntimeError(f"memories/search ({strategy}) failed: {envelope_error(status, envelope)}")
    data = envelope["data"]
    return Ranking(
        dia_ids(data["memories"]), data["trace"]["appliedStrategy"], data["trace"]["fallbackReason"]
    )


@dataclass(frozen=True)
class GraphOptions:
    depth: int
    baseline: int  # context/get limit
    limit: int  # context/get graphLimit


def context_ranking(api: SdkApi, tenant_id: str, query: str, options: GraphOptions) -> Ranking:
    body = {
        "query": query,
        "limit": options.baseline,
        "strategy": "hybrid",
        "graphDepth": options.depth,
        "graphLimit": options.limit,
        "includeRules": False,
        "mode": "long_term",
        "scope": {"tenantId": tenant_id},
        **EXTRA_BODY,
    }
    status, envelope = api.post("context/get", body)
    if status != 200:
        raise StrategyUnavailable(f"context/get failed: {envelope_error(status, envelope)}")
    data = envelope["data"]
    trace = data.get("trace") or {}
    memories = data["memories"]
    return Ranking(
        dia_ids(memories),
        trace.get("strategy", "?"),
        trace.get("fallbackReason"),
        [memory.get("graph") is not None for memory in memories],
    )


def enable_canary(api: SdkApi, tenant_id: str) -> str:
    """Put the workspace's graph rollout in canary through POST graph/rollout. Returns how; raises
    StrategyUnavailable when canary is refused (409 CANARY_ROLLOUT_BLOCKED while the quality gate blocks
    it)."""
    status, envelope = api.post("graph/rollout", {"mode": "canary", "scope": {"tenantId": tenant_id}})
    if status != 200:
        raise StrategyUnavailable(f"graph/rollout refused canary: {envelope_error(status, envelope)}")
    return "POST graph/rollout"


# --- Bench-only variants (computed here, inside the workspace's RLS context) --------------------------------

_LEXICAL_OR_SQL = """
SELECT m.* FROM memories m, to_tsquery('english', %(query)s) AS q(query)
WHERE m.workspace_id = %(workspace_id)s AND m.search_tsv @@ q.query AND m.deleted_at IS NULL
  AND (m.expires_at IS NULL OR m.expires_at > now()) AND m.user_id IS NULL AND m.scope = 'global'
ORDER BY ts_rank_cd(m.search_tsv, q.query) DESC, m.created_at DESC, m.id DESC
LIMIT %(limit)s
"""


def or_query(text: str) -> str:
    """'When did Caroline go?' → 'When | did | Caroline | go'; to_tsquery drops the stop words."""
    return " | ".join(WORD.findall(text))


def lexical_or(workspace_id: int, query: str, limit: int) -> list[Any]:
    from memories.models import Memory

    terms = or_query(query)
    if not terms:
        return []
    return list(
        Memory.objects.raw(_LEXICAL_OR_SQL, {"workspace_id": workspace_id, "query": terms, "limit": limit})
    )


def memory_dia_ids(memories: Iterable[Any]) -> list[str | None]:
    return [(memory.metadata or {}).get("dia_id") for memory in memories]


def fused(rankings: list[list[Any]]) -> list[str | None]:
    from retrieval.search import reciprocal_rank_fusion

    return memory_dia_ids(memory for memory, _ in reciprocal_rank_fusion(rankings)[:SEARCH_LIMIT])


def variant_rankings(workspace_id: int, query: str, wanted: set[str]) -> dict[str, list[str | None]]:
    """lexical_or, hybrid_or, hybrid_and_or, and the product's hybrid ranked in this process (a check that
    the API answer the harness scores is the service's ranking: same workspace, scope, limit and
    importance weight)."""
    from memories import selectors
    from memories.selectors import MemoryScope
    from retrieval import lexical, search
    from tenancy.rls import workspace_context

    scope = MemoryScope()
    with workspace_context(workspace_id):
        words_or = lexical_or(workspace_id, query, FUSION_DEPTH)
        words_and = lexical.memory_search_lexical(
            workspace_id=workspace_id, scope=scope, query=query, type=None, layer=None, limit=FUSION_DEPTH
        )
        semantic = search.memory_search(
            workspace_id=workspace_id, scope=scope, query=query, limit=FUSION_DEPTH, strategy="semantic"
        ).memories
        workspace = selectors.memory_settings_get(workspace_id=workspace_id)

        def chosen(name: str, default: float) -> float:
            value = EXTRA_BODY.get(name)
            return default if value is None else float(value)

        product = search.memory_search(
            workspace_id=workspace_id,
            scope=scope,
            query=query,
            limit=SEARCH_LIMIT,
            strategy="hybrid",
            importance_weight=chosen("importanceWeight", workspace.importance_weight),
            half_life_days=chosen("halfLifeDays", workspace.half_life_days),
            mmr_lambda=chosen("mmrLambda", workspace.mmr_lambda),
        ).memories
    rankings = {
        "lexical_or": memory_dia_ids(words_or[:SEARCH_LIMIT]),
        "hybrid_or": fused([words_or, semantic]),
        "hybrid_and_or": fused([words_and, words_or, semantic]),
        "_hybrid_check": memory_dia_ids(product),
    }
    return {name: ids for name, ids in rankings.items() if name in wanted or name == "_hybrid_check"}


def with_adjacent(ranked: list[str | None], neighbours: dict[str, list[str]]) -> list[str | None]:
    """Top ADJACENT_SEEDS of `ranked`, then each seed's previous and next turn (seed order), then the rest of
    `ranked`; SEARCH_LIMIT long, no repeats."""
    seeds = ranked[:ADJACENT_SEEDS]
    out: list[str | None] = list(seeds)
    seen = set(out)
    for dia_id in [n for seed in seeds if seed for n in neighbours.get(seed, [])] + ranked[ADJACENT_SEEDS:]:
        if len(out) >= SEARCH_LIMIT:
            break
        if dia_id not in seen:
            out.append(dia_id)
            seen.add(dia_id)
    return out


def turn_neighbours(turns: list[Turn]) -> dict[str, list[str]]:
    """Each turn's previous and next turn in the same session."""
    by_position = {(turn.session, turn.index): turn.dia_id for turn in turns}
    return {
        turn.dia_id: [
            by_position[key]
            for key in ((turn.session, turn.index - 1), (turn.session, turn.index + 1))
            if key in by_position
        ]
        for turn in turns
    }


# --- Scoring ------------------------------------------------------------------------------------------------


def question_scores(ranked: list[str | None], evidence: frozenset[str]) -> dict[str, float]:
    scores: dict[str, float] = {}
    for k in KS:
        found = len(evidence & set(ranked[:k]))
        scores[f"recall@{k}"] = found / len(evidence)
        scores[f"hit@{k}"] = 1.0 if found else 0.0
    return scores


def mean_scores(rows: list[dict[str, float]]) -> dict[str, Any]:
    if not rows:
        return {"n": 0}
    names = rows[0].keys()
    return {"n": len(rows), **{name: round(sum(row[name] for row in rows) / len(rows), 4) for name in names}}


@dataclass
class StrategyResult:
    name: str
    source: str  # "api" or "bench variant"
    rows: list[tuple[int, dict[str, float]]] = field(default_factory=list)  # (category, scores)
    applied: Counter[str] = field(default_factory=Counter)
    fallbacks: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    skipped: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    full_list_rows: list[dict[str, float]] = field(
        default_factory=list
    )  # hybrid_graph: the whole returned list

    def add(self, category: int, ranked: list[str | None], evidence: frozenset[str]) -> None:
        self.rows.append((category, question_scores(ranked, evidence)))

    def report(self) -> dict[str, Any]:
        if self.skipped:
            return {"status": "skipped", "note": self.skipped, "source": self.source}
        report = {
            "status": "ok",
            "source": self.source,
            "overall_1_4": mean_scores([s for c, s in self.rows if c in HEADLINE]),
            "overall_all": mean_scores([s for _, s in self.rows]),
            "categories": {
                name: mean_scores([s for c, s in self.rows if c == number])
                for number, name in CATEGORIES.items()
            },
        }
        if self.source == "api":
            report["seconds"] = round(self.seconds, 1)
            report["msPerQuestion"] = round(1000 * self.seconds / len(self.rows), 1) if self.rows else None
            report["applied"] = dict(self.applied)
            report["fallbackReasons"] = dict(self.fallbacks)
        if self.name in VARIANTS:
            report["description"] = VARIANTS[self.name]
        return {**report, **self.extra}


# --- Asking every question ----------------------------------------------------------------------------------


@dataclass
class Run:
    api: SdkApi
    strategies: list[str]
    graph: GraphOptions
    results: dict[str, StrategyResult]
    hybrid_check: Counter[str] = field(default_factory=Counter)
    variant_seconds: float = 0.0  # the SQL variants are computed together
    details: list[dict[str, Any]] = field(default_factory=list)  # one row per question, for error analysis


def timed(result: StrategyResult, work: Callable[[], Any]) -> Any:
    started = time.perf_counter()
    try:
        return work()
    finally:
        result.seconds += time.perf_counter() - started


def ask_api(run: Run, conversation: Conversation, question: Question) -> dict[str, list[str | None]]:
    """Every requested API strategy for one question; returns the rankings (variants build on hybrid)."""
    rankings: dict[str, list[str | None]] = {}
    for name in [s for s in run.strategies if s in API_STRATEGIES]:
        result = run.results[name]
        if result.skipped:
            continue
        if name == "hybrid_graph":
            try:
                ranking = timed(
                    result, lambda: context_ranking(run.api, conversation.tenant_id, question.text, run.graph)
                )
            except StrategyUnavailable as exc:
                result.skipped = str(exc)
                print(f"\nhybrid_graph skipped: {exc}", file=sys.stderr)
                continue
            graph_scores(result, ranking, question)
        else:
            ranking = timed(
                result, lambda n=name: search_ranking(run.api, conversation.tenant_id, n, question.text)
            )
        result.applied[ranking.applied] += 1
        result.fallbacks[ranking.fallback or "none"] += 1
        result.add(question.category, ranking.dia_ids, question.evidence)
        rankings[name] = ranking.dia_ids
    return rankings


def graph_scores(result: StrategyResult, ranking: Ranking, question: Question) -> None:
    """Beyond @k: the whole returned list (baseline + expansion) and what expansion alone found."""
    full = len(question.evidence & set(ranking.dia_ids)) / len(question.evidence)
    added = {d for d, graph in zip(ranking.dia_ids, ranking.graph_added, strict=True) if graph}
    baseline = {d for d, graph in zip(ranking.dia_ids, ranking.graph_added, strict=True) if not graph}
    result.full_list_rows.append(
        {
            "category": question.category,
            "length": len(ranking.dia_ids),
            "graphAdded": len(added),
            "recallFullList": full,
            "evidenceOnlyFromGraph": len((question.evidence & added) - baseline),
        }
    )


def ask_variants(
    run: Run,
    conversation: Conversation,
    question: Question,
    workspace_id: int,
    api_rankings: dict[str, list[str | None]],
    neighbours: dict[str, list[str]],
) -> dict[str, list[str | None]]:
    wanted = {s for s in run.strategies if s in VARIANTS}
    sql_variants = wanted & {"lexical_or", "hybrid_or", "hybrid_and_or"}
    rankings: dict[str, list[str | None]] = {}
    if sql_variants:
        started = time.perf_counter()
        rankings = variant_rankings(workspace_id, question.text, sql_variants)
        run.variant_seconds += time.perf_counter() - started
        if "hybrid" in api_rankings:
            run.hybrid_check[
                "same" if rankings["_hybrid_check"] == api_rankings["hybrid"] else "different"
            ] += 1
    if "hybrid+adjacent" in wanted and "hybrid" in api_rankings:
        rankings["hybrid+adjacent"] = with_adjacent(api_rankings["hybrid"], neighbours)
    rankings = {name: ranked for name, ranked in rankings.items() if name in wanted}
    for name, ranked in rankings.items():
        run.results[name].add(question.category, ranked, question.evidence)
    return rankings


def ask_conversation(run: Run, conversation: Conversation, workspace_id: int) -> None:
    neighbours = turn_neighbours(conversation.turns)
    total = len(conversation.questions)
    for number, question in enumerate(conversation.questions, start=1):
        api_rankings = ask_api(run, conversation, question)
        variants = ask_variants(run, conversation, question, workspace_id, api_rankings, neighbours)
        run.details.append(
            {
                "sampleId": conversation.sample_id,
                "category": CATEGORIES[question.category],
                "question": question.text,
                "answer": question.answer,
                "evidence": sorted(question.evidence),
                "rankings": {**api_rankings, **variants},
            }
        )
        if number % 10 == 0 or number == total:
            progress(f"questions {conversation.sample_id}: {number}/{total}")
    progress_done()


def forget_retrieval_history(workspace_id: int) -> None:
    """Delete the workspace's retrieval metrics left by earlier runs. The quality gate judges the last 24
    hours, so without this a re-run within a day inherited the previous run's verdict: a conversation whose
    sparse graph tripped EXPANSION_COVERAGE_TOO_LOW then refused canary (409) and the whole hybrid_graph
    strategy was skipped. Within a run the gate still acts as in the product, and the report counts its
    fallbacks."""
    from rollout.models import RetrievalMetric
    from tenancy.rls import workspace_context

    with workspace_context(workspace_id):
        RetrievalMetric.objects.filter(workspace_id=workspace_id).delete()


def prepare_graph(run: Run, conversation: Conversation, workspace_id: int) -> None:
    result = run.results.get("hybrid_graph")
    if result is None or result.skipped:
        return
    forget_retrieval_history(workspace_id)
    try:
        how = enable_canary(run.api, conversation.tenant_id)
    except StrategyUnavailable as exc:
        result.skipped = str(exc)
        print(f"hybrid_graph skipped: {exc}", file=sys.stderr)
        return
    result.extra.setdefault("canaryVia", how)


def same_length_hybrid_recall(details: list[dict[str, Any]]) -> float | None:
    """Categories 1-4: recall of hybrid's ranking cut at the length of each question's hybrid_graph list — the
    baseline's own answer to "what if the list were that long" (only when every list fits in hybrid's 20)."""
    rows = [
        row
        for row in details
        if row["category"] != CATEGORIES[5]
        and "hybrid" in row["rankings"]
        and "hybrid_graph" in row["rankings"]
    ]
    if not rows or any(len(r["rankings"]["hybrid_graph"]) > len(r["rankings"]["hybrid"]) for r in rows):
        return None
    found = [
        len(set(r["evidence"]) & set(r["rankings"]["hybrid"][: len(r["rankings"]["hybrid_graph"])]))
        / len(r["evidence"])
        for r in rows
    ]
    return round(sum(found) / len(found), 4)


def graph_summary(result: StrategyResult, options: GraphOptions, details: list[dict[str, Any]]) -> None:
    rows = result.full_list_rows
    if not rows or result.skipped:
        return
    headline = [row for row in rows if row["category"] in HEADLINE]

    def mean(name: str, subset: list[dict[str, float]]) -> float | None:
        return round(sum(row[name] for row in subset) / len(subset), 4) if subset else None

    result.extra["request"] = {
        "limit": options.baseline,
        "graphLimit": options.limit,
        "graphDepth": options.depth,
        "strategy": "hybrid",
        "mode": "long_term",
        "includeRules": False,
    }
    result.extra["fullList"] = {
        "meanLength": mean("length", rows),
        "meanGraphAdded": mean("graphAdded", rows),
        "questionsWithGraphAdditions": sum(1 for row in rows if row["graphAdded"]),
        "recall_1_4": mean("recallFullList", headline),
        "questionsWhereOnlyGraphFoundEvidence_1_4": sum(
            1 for row in headline if row["evidenceOnlyFromGraph"]
        ),
        "hybridRecallAtSameLength_1_4": same_length_hybrid_recall(details),
    }


# --- Report -------------------------------------------------------------------------------------------------


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def print_table(header: list[str], rows: list[list[str]]) -> None:
    table = [header, *rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for index, row in enumerate(table):
        print(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
        if index == 0:
            print("  ".join("-" * w for w in widths))


def print_report(report: dict[str, Any]) -> None:
    strategies = report["strategies"]
    done = {name: s for name, s in strategies.items() if s["status"] == "ok"}
    q = report["questions"]
    print(
        f"\nLoCoMo {Path(report['data']).name}: {len(report['ingest'])} conversations, "
        f"{q['asked']} questions asked ({q['skippedNoEvidence']} without evidence skipped), "
        f"{report['durationSeconds']:.0f} s, "
        f"load average {report['machine']['loadavgAtStart']} → {report['machine']['loadavgAtEnd']}\n"
    )
    print(f"categories 1-4 (n = {q['headline']})")
    metrics = [f"recall@{k}" for k in KS] + [f"hit@{k}" for k in KS]
    print_table(
        ["strategy", *[m.replace("recall", "R").replace("hit", "H") for m in metrics]],
        [[name, *[fmt(s["overall_1_4"].get(m)) for m in metrics]] for name, s in done.items()],
    )
    for k in (5, 10, 20):
        print(f"\nrecall@{k} per category")
        counts = [f"{name} ({q['perCategory'][name]})" for name in CATEGORIES.values()]
        print_table(
            ["strategy", *counts],
            [
                [name, *[fmt(s["categories"][c].get(f"recall@{k}")) for c in CATEGORIES.values()]]
                for name, s in done.items()
            ],
        )
    graph = strategies.get("hybrid_graph", {})
    if graph.get("fullList"):
        full = graph["fullList"]
        print(
            f"\nhybrid_graph whole list ({graph['request']}): mean length {full['meanLength']}, "
            f"mean graph-added {full['meanGraphAdded']}, "
            f"recall 1-4 over the whole list {fmt(full['recall_1_4'])}, "
            "questions where only expansion found evidence: "
            f"{full['questionsWhereOnlyGraphFoundEvidence_1_4']}"
        )
        if full["hybridRecallAtSameLength_1_4"] is not None:
            print(
                "hybrid's own ranking cut at the same lengths: "
                f"recall 1-4 {fmt(full['hybridRecallAtSameLength_1_4'])}"
            )
    for name, s in strategies.items():
        if s["status"] != "ok":
            print(f"\n{name}: skipped — {s['note']}")
    for note in report["notes"]:
        print(f"note: {note}")


def machine_info() -> dict[str, Any]:
    import django

    return {
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "django": django.get_version(),
        "loadavgAtStart": [round(x, 2) for x in os.getloadavg()],
    }


# --- Main ---------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data", type=Path, default=DEFAULT_DATA, help="LoCoMo JSON (default: the dev split)"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "locomo.json")
    parser.add_argument(
        "--strategies",
        default=",".join(DEFAULT_STRATEGIES),
        help=f"comma-separated, from {', '.join(DEFAULT_STRATEGIES)}",
    )
    parser.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    parser.add_argument("--graph-depth", type=int, choices=(1, 2), default=1)
    parser.add_argument(
        "--graph-baseline",
        type=int,
        default=SEARCH_LIMIT,
        help="hybrid_graph: context/get limit (baseline memories), 1-50 (default 20)",
    )
    parser.add_argument(
        "--graph-limit",
        type=int,
        default=SEARCH_LIMIT,
        help="hybrid_graph: context/get graphLimit, 1-50 (default 20)",
    )
    parser.add_argument("--reingest", action="store_true", help="rewrite every conversation's memories")
    parser.add_argument(
        "--importance-weight",
        type=float,
        default=None,
        help="importanceWeight sent with every search/context request (default: the workspace's)",
    )
    parser.add_argument(
        "--half-life-days",
        type=float,
        default=None,
        help="halfLifeDays sent with every search/context request (default: the workspace's; 0 = off)",
    )
    parser.add_argument(
        "--mmr-lambda",
        type=float,
        default=None,
        help="mmrLambda sent with every search/context request (default: the workspace's; 1 = off)",
    )
    parser.add_argument(
        "--model",
        default=None,
        help=f"embedding model (default EMBEDDING_MODEL or {MODEL}); memories ingested under "
        "another model are re-embedded",
    )
    parser.add_argument(
        "--admission",
        action="store_true",
        help="ingest with admission control on, into workspaces of their own (locomo-adm-*)",
    )
    args = parser.parse_args(argv)
    args.strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    unknown = sorted(set(args.strategies) - set(DEFAULT_STRATEGIES))
    if unknown or not args.strategies:
        parser.error(f"unknown strategies {unknown}; choose from {', '.join(DEFAULT_STRATEGIES)}")
    if "hybrid+adjacent" in args.strategies and "hybrid" not in args.strategies:
        parser.error("hybrid+adjacent is built on the hybrid ranking: add hybrid to --strategies")
    if args.conversations is not None and args.conversations < 1:
        parser.error("--conversations must be >= 1")
    if not (1 <= args.graph_baseline <= 50 and 1 <= args.graph_limit <= 50):
        parser.error("--graph-baseline and --graph-limit must be within 1-50")
    if not args.data.is_file():
        parser.error(f"no such file: {args.data}")
    return args


def question_counts(conversations: list[Conversation]) -> dict[str, Any]:
    questions = [q for c in conversations for q in c.questions]
    per_category = Counter(CATEGORIES[q.category] for q in questions)
    return {
        "asked": len(questions),
        "headline": sum(1 for q in questions if q.category in HEADLINE),
        "perCategory": {name: per_category.get(name, 0) for name in CATEGORIES.values()},
        "skippedNoEvidence": sum(c.skipped_questions for c in conversations),
        "droppedEvidenceIds": sum(c.dropped_evidence for c in conversations),
    }


def warm_embedder() -> None:
    """Search answers lexically while the model loads in the background; load it before asking."""
    from retrieval.embeddings import get_embedder

    embedder = get_embedder(MODEL)
    if hasattr(embedder, "warm"):
        embedder.warm()


def benchmark(args: argparse.Namespace) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    global ADMISSION
    started_at = datetime.now(UTC)
    ADMISSION = args.admission
    if args.importance_weight is not None:
        EXTRA_BODY["importanceWeight"] = args.importance_weight
    if args.half_life_days is not None:
        EXTRA_BODY["halfLifeDays"] = args.half_life_days
    if args.mmr_lambda is not None:
        EXTRA_BODY["mmrLambda"] = args.mmr_lambda
    conversations = load_conversations(args.data, args.conversations)
    machine = machine_info()
    ensure_database()
    setup_django_and_migrate()
    user, key = bench_user_and_key()
    warm_embedder()

    ingest_started = time.perf_counter()
    workspaces = {c.sample_id: tenant_workspace_id(user, c) for c in conversations}
    ingested = [ingest(workspaces[c.sample_id], c, args.reingest) for c in conversations]
    ingest_seconds = time.perf_counter() - ingest_started

    graph = GraphOptions(args.graph_depth, args.graph_baseline, args.graph_limit)
    run = Run(
        SdkApi(key),
        args.strategies,
        graph,
        {
            name: StrategyResult(name, "api" if name in API_STRATEGIES else "bench variant")
            for name in args.strategies
        },
    )
    ask_started = time.perf_counter()
    for conversation in conversations:
        prepare_graph(run, conversation, workspaces[conversation.sample_id])
        ask_conversation(run, conversation, workspaces[conversation.sample_id])
    ask_seconds = time.perf_counter() - ask_started
    if "hybrid_graph" in run.results:
        graph_summary(run.results["hybrid_graph"], graph, run.details)

    from django.conf import settings as django_settings

    machine["loadavgAtEnd"] = [round(x, 2) for x in os.getloadavg()]
    notes = []
    if run.hybrid_check:
        notes.append(
            f"the product's hybrid ranked in the bench process matched the API's top {SEARCH_LIMIT} for "
            f"{run.hybrid_check['same']} of "
            f"{sum(run.hybrid_check.values())} questions"
        )
    graph_result = run.results.get("hybrid_graph")
    if graph_result and not graph_result.skipped and set(graph_result.applied) - {"hybrid_graph"}:
        notes.append(
            f"context/get did not apply graph expansion on every call: {dict(graph_result.applied)}, "
            f"fallback reasons {dict(graph_result.fallbacks)}"
        )
    return {
        "benchmark": "locomo",
        "startedAt": started_at.isoformat(timespec="seconds"),
        "durationSeconds": round((datetime.now(UTC) - started_at).total_seconds(), 1),
        "data": str(args.data),
        "database": DATABASE,
        "model": MODEL,
        "machine": machine,
        "config": {
            "strategies": args.strategies,
            "conversations": len(conversations),
            "ks": list(KS),
            "searchLimit": SEARCH_LIMIT,
            "graphDepth": args.graph_depth,
            "graphBaseline": args.graph_baseline,
            "graphLimit": args.graph_limit,
            "reingest": args.reingest,
            "importanceWeight": args.importance_weight,
            "halfLifeDays": args.half_life_days,
            "mmrLambda": args.mmr_lambda,
            "admission": args.admission,
            # Server settings that change the ranking, as this process read them (env overrides).
            "server": {
                name: getattr(django_settings, name)
                for name in (
                    "SEARCH_HALF_LIFE_DAYS",
                    "SEARCH_DECAY_FLOOR",
                    "SEARCH_MMR_LAMBDA",
                    "SEARCH_TIME_WINDOW_BOOST",
                    "SEARCH_TIME_WINDOW_CANDIDATES",
                    "RERANK_MODEL",
                )
            },
        },
        "ingest": ingested,
        "ingestSeconds": round(ingest_seconds, 1),
        "askSeconds": round(ask_seconds, 1),
        "variantSeconds": round(run.variant_seconds, 1),
        "questions": question_counts(conversations),
        "strategies": {name: result.report() for name, result in run.results.items()},
        "notes": notes,
    }, run.details


def main(argv: list[str] | None = None) -> int:
    global MODEL
    args = parse_args(argv)
    MODEL = args.model or MODEL
    os.environ["EMBEDDING_MODEL"] = MODEL
    if os.environ.get("DATABASE_URL", "").strip():
        print("bench/locomo.py runs on the embedded PostgreSQL only; unset DATABASE_URL.", file=sys.stderr)
        return 2
    try:
        report, details = benchmark(args)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    print_report(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    details_path = args.out.with_suffix(".questions.jsonl")
    details_path.write_text("".join(json.dumps(row) + "\n" for row in details))
    print(f"\nwrote {args.out} and {details_path.name} (every question's ranking per strategy)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

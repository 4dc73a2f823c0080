"""The write path across apps, in one place: a memory write with its graph mapping and its jobs, and the jobs
themselves (embed → similarity edges).

Write flows run inside tenancy.rls.workspace_context: the memory, its deterministic mapping (in a savepoint,
so a graph failure never fails the write) and its job rows + broker messages commit together. Job runners take
ids, claim their rows, do slow work (the model) outside any transaction, and write results in a short one.
"""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connections, transaction
from django.utils import timezone
from pydantic import BaseModel, Field

from graphsvc import entities, llm, mapping, relationships, similarity
from graphsvc import services as graph_services
from memories import hygiene, selectors, services, supersession
from memories.models import Memory, PipelineJob
from memories.sanitizer import injection_flags
from memories.selectors import MemoryScope
from ops import metrics as ops_metrics
from pipeline import jobs
from retrieval import vectors
from retrieval.embeddings import EmbeddingUnavailable, get_embedder
from tenancy.rls import workspace_context

logger = logging.getLogger("cairn.pipeline")

GRAPH_MAPPING_SYNC_FAILED = "GRAPH_MAPPING_SYNC_FAILED"
GRAPH_RELATIONSHIP_SYNC_FAILED = "GRAPH_RELATIONSHIP_SYNC_FAILED"
EMBEDDING_FAILED = "EMBEDDING_FAILED"
UPDATE_DETECTION_FAILED = "UPDATE_DETECTION_FAILED"
EMBED_BATCH_SIZE = 64
MAPPING_BATCH_SIZE = 200


def snapshot(memory: Memory) -> mapping.MemorySnapshot:
    return mapping.MemorySnapshot(
        id=memory.id,
        workspace_id=memory.workspace_id,
        content=memory.content,
        type=memory.type,
        layer=memory.layer,
        scope=memory.scope,
        project_id=memory.project_id,
        user_id=memory.user_id,
        category=memory.category,
        tags=list(memory.tags or []),
        expires_at=memory.expires_at,
    )


def graph_step(*, workspace_id: int, memory_id: uuid.UUID | None, action: Callable[[], Any]) -> bool:
    """Run a graph write in a savepoint; on failure roll it back, record the error and let the write go on."""
    try:
        with transaction.atomic(using="app"):
            action()
        return True
    except Exception as exc:  # noqa: BLE001 - the memory write must not fail because of the graph
        logger.exception("graph mapping failed for memory %s", memory_id)
        pipeline_error_record(
            workspace_id=workspace_id,
            memory_id=memory_id,
            stage="mapping",
            code=GRAPH_MAPPING_SYNC_FAILED,
            message=f"{type(exc).__name__}: {exc}",
        )
        return False


def pipeline_error_record(
    *, workspace_id: int, memory_id: uuid.UUID | None, stage: str, code: str, message: str
) -> None:
    with connections["app"].cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO pipeline_errors (workspace_id, memory_id, stage, code, message, created_at)
            VALUES (%s, %s, %s, %s, %s, now())
            """,
            [workspace_id, memory_id, stage, code, message[:500]],
        )


# --- write flows (call inside workspace_context) ------------------------------------------------------------


def memory_add_flow(
    *,
    workspace_id: int,
    scope: MemoryScope,
    hygiene_settings: selectors.HygieneSettings | None = None,
    **fields: Any,
) -> Memory:
    """Store a memory with its mapping and jobs (no admission control: imports, benches).

    `hygiene_settings`: the workspace's, when the caller has read them already (one query less per add)."""
    if hygiene_settings is None:
        hygiene_settings = selectors.memory_settings_get(workspace_id=workspace_id)
    fields.setdefault("importance", importance_llm(workspace_id=workspace_id, content=fields["content"]))
    memory = services.memory_add(
        workspace_id=workspace_id, scope=scope, scrub_at_rest=hygiene_settings.scrub_at_rest, **fields
    )
    _map_fresh(workspace_id=workspace_id, memory=memory)
    jobs.jobs_enqueue(
        workspace_id=workspace_id,
        memory_ids=[memory.id],
        kind=jobs.Kind.EMBED,
        model=embedding_model_for(memory),
    )
    _compact_working(workspace_id=workspace_id, memory=memory)
    return memory


def _map_fresh(*, workspace_id: int, memory: Memory) -> None:
    """A new memory's mapping in one round trip; the database function catches its own failure, so no
    savepoint is needed. A failure is recorded like graph_step's and the write goes on; an incomplete mapping
    (a node a concurrent transaction committed) is redone the long way, in a savepoint."""
    try:
        outcome = mapping.mapping_insert_fresh(memory=snapshot(memory))
    except DatabaseError:
        raise  # outside the function's own guard (a lost connection): the transaction cannot go on anyway
    except Exception as exc:  # noqa: BLE001 - building the mapping failed before any SQL ran: nothing to undo
        outcome = mapping.FreshMappingOutcome(complete=False, error=f"{type(exc).__name__}: {exc}")
    if outcome.error is not None:
        logger.error("graph mapping failed for memory %s: %s", memory.id, outcome.error)
        pipeline_error_record(
            workspace_id=workspace_id,
            memory_id=memory.id,
            stage="mapping",
            code=GRAPH_MAPPING_SYNC_FAILED,
            message=outcome.error,
        )
    elif not outcome.complete:
        graph_step(
            workspace_id=workspace_id,
            memory_id=memory.id,
            action=lambda: mapping.mapping_sync(memory=snapshot(memory)),
        )


def _compact_working(*, workspace_id: int, memory: Memory) -> None:
    if memory.layer == Memory.Layer.WORKING:
        dropped = services.working_memory_compact(workspace_id=workspace_id, user_id=memory.user_id)
        forget_side_effects(workspace_id=workspace_id, memory_ids=dropped)


def memory_edit_flow(
    *, workspace_id: int, scope: MemoryScope, memory_id: str, changes: dict[str, Any]
) -> Memory:
    before = selectors.memory_get_writable(workspace_id=workspace_id, scope=scope, memory_id=memory_id)
    if before is None:
        raise services.memory_not_found(memory_id)
    before_content, before_model, before_expiry = before.content, before.embedding_model, before.expires_at
    scrub_at_rest = selectors.memory_settings_get(workspace_id=workspace_id).scrub_at_rest
    memory = services.memory_edit(
        workspace_id=workspace_id,
        scope=scope,
        memory_id=memory_id,
        changes=changes,
        scrub_at_rest=scrub_at_rest,
    )
    graph_step(
        workspace_id=workspace_id,
        memory_id=memory.id,
        action=lambda: mapping.mapping_sync(memory=snapshot(memory)),
    )
    content_changed = memory.content != before_content
    model_changed = (memory.embedding_model or None) != (before_model or None)
    if content_changed or model_changed:
        jobs.jobs_enqueue(
            workspace_id=workspace_id,
            memory_ids=[memory.id],
            kind=jobs.Kind.EMBED,
            model=embedding_model_for(memory),
        )
    elif memory.expires_at != before_expiry:
        edge_expiry = memory.expires_at if memory.layer == Memory.Layer.WORKING else None
        vectors.embeddings_update_expiry(
            workspace_id=workspace_id, memory_id=memory.id, expires_at=memory.expires_at
        )
        graph_step(
            workspace_id=workspace_id,
            memory_id=memory.id,
            action=lambda: similarity.similarity_edges_set_expiry(
                workspace_id=workspace_id, memory_id=memory.id, expires_at=edge_expiry
            ),
        )
    _compact_working(workspace_id=workspace_id, memory=memory)
    return memory


def memory_forget_flow(*, workspace_id: int, scope: MemoryScope, memory_id: str) -> Memory:
    memory = services.memory_forget(workspace_id=workspace_id, scope=scope, memory_id=memory_id)
    forget_side_effects(workspace_id=workspace_id, memory_ids=[memory.id])
    return memory


def forget_side_effects(*, workspace_id: int, memory_ids: list[uuid.UUID]) -> None:
    """A forgotten memory leaves the graph and the vector index at once (in batches for bulk operations)."""
    for start in range(0, len(memory_ids), MAPPING_BATCH_SIZE):
        batch = memory_ids[start : start + MAPPING_BATCH_SIZE]
        vectors.embeddings_delete(workspace_id=workspace_id, memory_ids=batch)
        graph_step(
            workspace_id=workspace_id,
            memory_id=None,
            action=functools.partial(mapping.mapping_remove, workspace_id=workspace_id, memory_ids=batch),
        )


def memory_bulk_forget_flow(
    *, workspace_id: int, scope: MemoryScope, filters: services.BulkFilters, dry_run: bool
) -> dict[str, Any]:
    result = services.memory_bulk_forget(
        workspace_id=workspace_id, scope=scope, filters=filters, dry_run=dry_run
    )
    if not dry_run:
        forget_side_effects(workspace_id=workspace_id, memory_ids=[uuid.UUID(i) for i in result["ids"]])
    return result


def memory_vacuum_flow(*, workspace_id: int, scope: MemoryScope) -> int:
    def before_delete(memory_ids: list[uuid.UUID]) -> None:
        forget_side_effects(workspace_id=workspace_id, memory_ids=memory_ids)

    return services.memory_vacuum(workspace_id=workspace_id, scope=scope, before_delete=before_delete)


# --- hygiene: admission control, LLM scores, consolidation --------------------------------------------------


class _Score(BaseModel):
    score: float = Field(ge=0.0, le=1.0)


_UTILITY_SYSTEM = (
    "You are a memory relevance judge. Rate how likely this memory will be referenced in future "
    'conversations on a scale of 0.0 to 1.0. Answer as JSON {"score": <0.0-1.0>}.'
)
_IMPORTANCE_SYSTEM = (
    "You rate how important a memory is for an AI agent to keep (stable preferences, decisions, "
    "facts about people and projects are important; chit-chat is not) on a scale of 0.0 to 1.0. "
    'Answer as JSON {"score": <0.0-1.0>}.'
)


def _llm_score(*, workspace_id: int, purpose: str, system: str, content: str) -> float | None:
    """One model rating in [0, 1], or None when no model is configured, the content carries a prompt-injection
    flag, or the call fails. Callers fall back to scoring without the model: admission to its heuristic (as
    with no model configured), importance to the write-time heuristic of memories.hygiene.

    The injection check comes first: text written to steer a model must not reach one, here no more than in
    extraction, which skips flagged memories. The whole content is checked, not only the part sent, so a
    memory stored with a flag was never shown to a model."""
    # The scoring model (GRAPH_LLM_MODEL_SCORING, else GRAPH_LLM_MODEL) decides, not the extraction one.
    if not llm.llm_enabled(purpose) or injection_flags(content):
        return None
    try:
        answer = llm.llm_structured(
            workspace_id=workspace_id,
            purpose=purpose,
            system=system,
            user=f"Memory:\n{llm.external(content, limit=500)}\n\nScore (0.0-1.0):",
            answer_model=_Score,
        )
    except llm.LlmError:
        return None
    return round(answer.score, 4)


def importance_llm(*, workspace_id: int, content: str) -> float | None:
    """The model's importance when MEMORY_IMPORTANCE_LLM is on (a model round trip per write); else None."""
    if not settings.MEMORY_IMPORTANCE_LLM:
        return None
    return _llm_score(
        workspace_id=workspace_id, purpose="importance", system=_IMPORTANCE_SYSTEM, content=content
    )


@dataclass(frozen=True)
class AdmissionDecision:
    admitted: bool
    reason: str  # FAST_PATH | SCORE | NEAR_DUPLICATE | LOW_SCORE
    score: float
    nearest_id: uuid.UUID | None
    similarity: float | None
    factors: dict[str, float]

    def payload(self) -> dict[str, Any]:
        return {
            "admitted": self.admitted,
            "reason": self.reason,
            "score": self.score,
            "nearestMemoryId": str(self.nearest_id) if self.nearest_id else None,
            "similarity": round(self.similarity, 4) if self.similarity is not None else None,
            "factors": self.factors,
        }


def _nearest_existing(
    *, workspace_id: int, scope: MemoryScope, content: str, model: str
) -> tuple[uuid.UUID | None, float | None]:
    """The closest live memory the writer can read, and its cosine; an exact repeat counts as 1.0 even before
    its twin is embedded. (None, None) when nothing is comparable (empty store, embedder unavailable)."""
    twin = (
        selectors.memories_readable(workspace_id=workspace_id, scope=scope)
        .filter(content=content)
        .order_by("-created_at")
        .values_list("id", flat=True)
        .first()
    )
    if twin is not None:
        return twin, 1.0
    try:
        vector = get_embedder(model).embed([content])[0]
    except Exception:  # noqa: BLE001 - novelty is then unknown (1.0 in A-MAC): admit rather than lose a write
        logger.warning("admission: embedding unavailable, novelty taken as 1.0", exc_info=True)
        return None, None
    found = vectors.nearest(
        workspace_id=workspace_id,
        model=model,
        query=vector,
        limit=10,
        scope=vectors.VectorScope(user_id=scope.user_id, project_id=scope.project_id),
    )
    live = set(
        selectors.memories_readable(workspace_id=workspace_id, scope=scope)
        .filter(pk__in=[mid for mid, _ in found])
        .values_list("id", flat=True)
    )
    for memory_id, cosine in found:
        if memory_id in live:
            return memory_id, cosine
    return None, None


def admission_decide(
    *,
    workspace_id: int,
    scope: MemoryScope,
    content: str,
    memory_type: str,
    metadata: dict[str, Any] | None,
    model: str,
    threshold: float,
) -> AdmissionDecision:
    """Zeph's A-MAC: a heuristic score with future utility 0.5 admits on the fast path (≥ threshold + margin);
    below that a configured model rates future utility and the composite must reach the threshold. A
    near-exact repeat (cosine ≥ MEMORY_ADMISSION_DUPLICATE_COSINE) is refused outright: without a model A-MAC
    alone would admit it (its heuristic never drops under 0.475)."""
    role = hygiene.memory_role(metadata)
    nearest_id, cosine = _nearest_existing(
        workspace_id=workspace_id, scope=scope, content=content, model=model
    )
    heuristic = hygiene.admission_score(
        content=content, memory_type=memory_type, role=role, max_cosine=cosine
    )

    def decide(admitted: bool, reason: str, score: hygiene.AdmissionScore) -> AdmissionDecision:
        return AdmissionDecision(admitted, reason, score.composite, nearest_id, cosine, score.factors)

    if nearest_id is not None and cosine is not None and cosine >= settings.MEMORY_ADMISSION_DUPLICATE_COSINE:
        return decide(False, "NEAR_DUPLICATE", heuristic)
    if heuristic.composite >= threshold + settings.MEMORY_ADMISSION_FAST_PATH_MARGIN:
        return decide(True, "FAST_PATH", heuristic)
    utility = _llm_score(
        workspace_id=workspace_id, purpose="admission", system=_UTILITY_SYSTEM, content=content
    )
    scored = (
        heuristic
        if utility is None
        else hygiene.admission_score(
            content=content, memory_type=memory_type, role=role, max_cosine=cosine, future_utility=utility
        )
    )
    if scored.composite >= threshold or nearest_id is None:
        return decide(True, "SCORE", scored)
    return decide(False, "LOW_SCORE", scored)


@dataclass(frozen=True)
class AddOutcome:
    memory: Memory
    admitted: bool
    admission: AdmissionDecision | None


def memory_add_admitted_flow(*, workspace_id: int, scope: MemoryScope, **fields: Any) -> AddOutcome:
    """memories/add: admission control when the workspace turned it on, then the ordinary write flow.

    A refused memory is not written; the caller gets the existing memory it duplicates instead."""
    hygiene_settings = selectors.memory_settings_get(workspace_id=workspace_id)
    decision = None
    if hygiene_settings.admission_enabled:
        decision = admission_decide(
            workspace_id=workspace_id,
            scope=scope,
            content=fields["content"],
            memory_type=fields.get("type") or "note",
            metadata=fields.get("metadata"),
            model=fields.get("embedding_model") or settings.EMBEDDING_MODEL,
            threshold=hygiene_settings.admission_threshold,
        )
        services.admission_count_record(
            workspace_id=workspace_id, admitted=decision.admitted, reason=decision.reason
        )
        if not decision.admitted and decision.nearest_id is not None:
            existing = Memory.objects.get(workspace_id=workspace_id, pk=decision.nearest_id)
            return AddOutcome(existing, False, decision)
    memory = memory_add_flow(
        workspace_id=workspace_id, scope=scope, hygiene_settings=hygiene_settings, **fields
    )
    return AddOutcome(memory, True, decision)


def memory_consolidate_flow(
    *, workspace_id: int, scope: MemoryScope, **options: Any
) -> services.ConsolidationResult:
    """Consolidate, then link each winner to what it replaced with a `supersedes` edge (best-effort, as
    mapping)."""
    result = services.memory_consolidate(workspace_id=workspace_id, scope=scope, **options)
    # Superseded memories keep their vectors and edges (includeSuperseded still finds them); every read path
    # reloads through memories_readable, which leaves them out by default.
    if result.run is not None and result.superseded:
        graph_step(
            workspace_id=workspace_id,
            memory_id=None,
            action=lambda: graph_services.supersedes_edges_add(
                workspace_id=workspace_id, pairs=result.superseded
            ),
        )
        now = timezone.now()
        graph_step(
            workspace_id=workspace_id,
            memory_id=None,
            action=lambda: [
                supersession.facts_follow(workspace_id=workspace_id, newer_id=winner, older_id=loser, at=now)
                for winner, loser in result.superseded
            ],
        )
    return result


def embedding_model_for(memory: Memory) -> str:
    return memory.embedding_model or settings.EMBEDDING_MODEL


# --- jobs ---------------------------------------------------------------------------------------------------


def job_run(
    *, workspace_id: int, job_id: int | None = None, memory_id: str | None = None, kind: str | None = None
) -> int:
    """Entry point of the worker (pipeline.tasks): claim, run, record; returns how many jobs it ran.

    The message names its job by id, or by memory and kind (messages written with their job, jobs_enqueue), or
    only the kind (coalesced messages: a batch of the workspace's due jobs). Failures of the work itself are
    recorded on the job rows, never raised. A message whose job another live worker holds (in a batch) is
    simply acknowledged: that worker's own message covers the job if it dies.
    """
    with workspace_context(workspace_id):
        # A message by job id may be an embedding job: its claim must wait like any batch claim.
        batchable = kind in jobs.BATCHABLE_KINDS or (kind is None and job_id is not None)
        if batchable:
            jobs.jobs_claim_lock(workspace_id=workspace_id, kind=kind or jobs.Kind.EMBED)
        claimed = jobs.jobs_claim(
            workspace_id=workspace_id,
            job_id=job_id,
            memory_id=memory_id,
            kind=kind,
            batch_size=EMBED_BATCH_SIZE,
        )
        embed_claimed = sum(1 for job in claimed if job.kind in jobs.BATCHABLE_KINDS)
        if batchable and embed_claimed >= EMBED_BATCH_SIZE:
            # More may be waiting, some with no message of their own: the next batch gets one now, so another
            # worker can take it while this one embeds.
            jobs.jobs_push_follow_up(workspace_id=workspace_id, kind=claimed[0].kind)
        if not claimed:
            # Nothing to run for this message: a job whose worker died on every attempt ends here, visibly.
            jobs.jobs_dead_letter_lost(workspace_id=workspace_id)
            claimed = jobs.jobs_claim_followups(workspace_id=workspace_id, batch_size=EMBED_BATCH_SIZE)
    if not claimed:
        return 0
    by_kind: dict[str, list[jobs.ClaimedJob]] = {}
    for job in claimed:
        by_kind.setdefault(job.kind, []).append(job)
    for kind, group in by_kind.items():
        runner = _RUNNERS[kind]
        started = time.perf_counter()
        runner(workspace_id=workspace_id, claimed=group)
        _job_metrics_record(
            workspace_id=workspace_id, kind=kind, group=group, seconds=time.perf_counter() - started
        )
    return len(claimed)


def _job_metrics_record(
    *, workspace_id: int, kind: str, group: list[jobs.ClaimedJob], seconds: float
) -> None:
    """Outcomes of the jobs just run, for /metrics; best-effort, a metrics failure never fails a job."""
    try:
        with workspace_context(workspace_id):
            statuses = list(
                PipelineJob.objects.filter(
                    workspace_id=workspace_id, id__in=[job.id for job in group]
                ).values_list("status", "model")
            )
        outcomes = {"succeeded": 0, "retry": 0, "dead_letter": 0, "other": 0}
        for status, _ in statuses:
            key = {"succeeded": "succeeded", "queued": "retry", "dead_letter": "dead_letter"}.get(
                status, "other"
            )
            outcomes[key] += 1
        ops_metrics.job_duration_record(kind=kind, seconds=seconds, outcomes=outcomes)
        if kind == jobs.Kind.EMBED and outcomes["succeeded"]:
            embedded: dict[str, int] = {}
            for status, model in statuses:
                if status == "succeeded":
                    name = model or settings.EMBEDDING_MODEL
                    embedded[name] = embedded.get(name, 0) + 1
            ops_metrics.counters_add(
                rows=[(ops_metrics.EMBEDDINGS, {"model": m}, n) for m, n in embedded.items()]
            )
    except Exception:  # noqa: BLE001
        logger.warning("could not record job metrics", exc_info=True)


def _load_memories(workspace_id: int, memory_ids: list[uuid.UUID]) -> dict[uuid.UUID, Memory]:
    return {
        memory.id: memory
        for memory in Memory.objects.filter(
            workspace_id=workspace_id, pk__in=memory_ids, deleted_at__isnull=True
        )
    }


def run_embed_jobs(*, workspace_id: int, claimed: list[jobs.ClaimedJob]) -> None:
    with workspace_context(workspace_id):
        memories = _load_memories(workspace_id, [job.memory_id for job in claimed])
    gone = [job for job in claimed if job.memory_id not in memories]
    live = [job for job in claimed if job.memory_id in memories]
    by_model: dict[str, list[jobs.ClaimedJob]] = {}
    for job in live:
        by_model.setdefault(job.model or embedding_model_for(memories[job.memory_id]), []).append(job)

    for model, group in by_model.items():
        texts = [memories[job.memory_id].content for job in group]
        try:
            matrix = get_embedder(model).embed(texts)
        except Exception as exc:  # noqa: BLE001 - provider, model or resource failure: retry later
            if not isinstance(exc, EmbeddingUnavailable):
                logger.exception("embedding with %s failed", model)
            with workspace_context(workspace_id):
                jobs.jobs_fail(
                    workspace_id=workspace_id,
                    jobs=group,
                    code=EMBEDDING_FAILED,
                    message=f"{type(exc).__name__}: {exc}",
                )
            continue
        rows = []
        for job, vector in zip(group, matrix, strict=True):
            memory = memories[job.memory_id]
            rows.append(
                vectors.EmbeddingRow(
                    memory_id=memory.id,
                    user_id=memory.user_id,
                    scope=memory.scope,
                    project_id=memory.project_id,
                    expires_at=memory.expires_at,
                    content_sha256=vectors.content_hash(memory.content),
                    vector=vector,
                )
            )
        with workspace_context(workspace_id):
            current = _load_memories(workspace_id, [row.memory_id for row in rows])
            # An edit during embedding re-queued its own job; do not store a vector of the old text.
            rows = [
                r
                for r in rows
                if r.memory_id in current
                and vectors.content_hash(current[r.memory_id].content) == r.content_sha256
            ]
            vectors.embeddings_store(workspace_id=workspace_id, model=model, rows=rows)
            jobs.jobs_succeed(jobs=group)
            # Run inline below; if this task dies first, its re-delivered message picks them up (job_run).
            similarity_ids = jobs.jobs_enqueue(
                workspace_id=workspace_id,
                memory_ids=[r.memory_id for r in rows],
                kind=jobs.Kind.SIMILARITY,
                model=model,
                push=False,
            )
        if similarity_ids:
            with workspace_context(workspace_id):
                follow_up = jobs.jobs_claim_ids(workspace_id=workspace_id, job_ids=similarity_ids)
            run_similarity_jobs(workspace_id=workspace_id, claimed=follow_up)
        _maybe_build_vector_index(workspace_id=workspace_id, dimension=int(matrix.shape[1]))
    if gone:
        with workspace_context(workspace_id):
            jobs.jobs_succeed(jobs=gone)


def run_similarity_jobs(*, workspace_id: int, claimed: list[jobs.ClaimedJob]) -> None:
    if not claimed:
        return
    try:
        with workspace_context(workspace_id):
            memories = _load_memories(workspace_id, [job.memory_id for job in claimed])
            by_model: dict[str, list[Memory]] = {}
            for job in claimed:
                memory = memories.get(job.memory_id)
                if memory is not None:
                    by_model.setdefault(job.model or embedding_model_for(memory), []).append(memory)
            updates = []
            detect = settings.SUPERSESSION_DETECTION
            for model, group in by_model.items():
                # One neighbour search serves the similarity edges (the closest few) and update detection.
                found = vectors.neighbours_of_memories(
                    workspace_id=workspace_id,
                    model=model,
                    memory_ids=[m.id for m in group],
                    limit=max(
                        settings.SIMILARITY_EDGE_MAX_PER_MEMORY,
                        settings.SUPERSESSION_CANDIDATES if detect else 0,
                    ),
                )
                if detect:
                    _updates_detect(workspace_id=workspace_id, memories=group, found=found)
                for memory in group:
                    kept = [
                        (mid, score)
                        for mid, score in found.get(memory.id, [])[: settings.SIMILARITY_EDGE_MAX_PER_MEMORY]
                        if score >= settings.SIMILARITY_EDGE_THRESHOLD
                    ]
                    expiry = memory.expires_at if memory.layer == Memory.Layer.WORKING else None
                    updates.append(
                        similarity.SimilarityUpdate(memory_id=memory.id, neighbours=kept, expires_at=expiry)
                    )
            similarity.similarity_edges_replace(workspace_id=workspace_id, updates=updates)
            jobs.jobs_succeed(jobs=claimed)
            _enqueue_llm_steps(
                workspace_id=workspace_id, memories=[m for group in by_model.values() for m in group]
            )
    except Exception as exc:  # noqa: BLE001 - retried; the stored embedding is reused
        logger.exception("similarity edges failed in workspace %s", workspace_id)
        with workspace_context(workspace_id):
            jobs.jobs_fail(
                workspace_id=workspace_id,
                jobs=claimed,
                code=GRAPH_RELATIONSHIP_SYNC_FAILED,
                message=f"{type(exc).__name__}: {exc}",
            )


def _updates_detect(
    *, workspace_id: int, memories: list[Memory], found: dict[uuid.UUID, list[tuple[uuid.UUID, float]]]
) -> None:
    """Update detection for freshly embedded memories (memories.updates via memories.supersession), in a
    savepoint: a failure is recorded and the similarity step goes on."""
    wanted = {
        mid
        for memory in memories
        for mid, score in found.get(memory.id, [])
        if score >= settings.SUPERSESSION_MIN_SIMILARITY
    }
    if not wanted:
        return
    loaded = _load_memories(workspace_id, list(wanted))
    for memory in sorted(memories, key=lambda m: (m.created_at, str(m.id))):
        neighbours = [
            (loaded[mid], score)
            for mid, score in found.get(memory.id, [])
            if mid in loaded and score >= settings.SUPERSESSION_MIN_SIMILARITY
        ]
        if not neighbours:
            continue
        try:
            with transaction.atomic(using="app"):
                supersession.updates_detect(
                    workspace_id=workspace_id,
                    memory=memory,
                    neighbours=neighbours,
                    threshold=settings.SUPERSESSION_THRESHOLD,
                )
        except Exception as exc:  # noqa: BLE001 - detection is an addition to the write, never a reason to fail it
            logger.exception("update detection failed for memory %s", memory.id)
            pipeline_error_record(
                workspace_id=workspace_id,
                memory_id=memory.id,
                stage="supersession",
                code=UPDATE_DETECTION_FAILED,
                message=f"{type(exc).__name__}: {exc}",
            )


def _enqueue_llm_steps(*, workspace_id: int, memories: list[Memory]) -> None:
    """LLM steps get their own broker messages: a slow provider must not hold up embedding batches."""
    if not llm.llm_enabled():
        return
    # Injection-flagged memories are stored and searchable but never handed to a model.
    eligible = [m.id for m in memories if not m.injection_flags]
    for kind in (jobs.Kind.RELATE, jobs.Kind.EXTRACT):
        jobs.jobs_enqueue(workspace_id=workspace_id, memory_ids=eligible, kind=kind)


def _memory_text(memory: Memory) -> relationships.MemoryText:
    return relationships.MemoryText(id=memory.id, content=memory.content, created_at=memory.created_at)


def _llm_job_memory(workspace_id: int, job: jobs.ClaimedJob) -> Memory | None:
    """The live, unflagged memory a claimed LLM job is about; None (and the job done) when there is none."""
    with workspace_context(workspace_id):
        memory = _load_memories(workspace_id, [job.memory_id]).get(job.memory_id)
        if memory is None or memory.injection_flags or not llm.llm_enabled():
            jobs.jobs_succeed(jobs=[job])
            return None
    return memory


def _recent_peers(workspace_id: int, memory: Memory, limit: int) -> list[Memory]:
    scope = MemoryScope(user_id=memory.user_id, project_id=memory.project_id)
    with workspace_context(workspace_id):
        return list(
            selectors.memories_readable(workspace_id=workspace_id, scope=scope)
            .exclude(pk=memory.id)
            .filter(injection_flags=[])
            .exclude(layer=Memory.Layer.RULE)
            .order_by("-updated_at", "-id")[:limit]
        )


def _llm_failed(
    *,
    workspace_id: int,
    job: jobs.ClaimedJob,
    memory_id: uuid.UUID,
    stage: str,
    code: str,
    error: llm.LlmError,
) -> None:
    message = f"{error.code}: {error}"
    with workspace_context(workspace_id):
        if isinstance(error, llm.LlmBudgetExhausted):
            jobs.jobs_defer(
                workspace_id=workspace_id,
                jobs=[job],
                code=error.code,
                message=str(error),
                delay_seconds=settings.GRAPH_LLM_BUDGET_RECHECK_SECONDS,
            )
            return
        jobs.jobs_fail(
            workspace_id=workspace_id, jobs=[job], code=code, message=message, final=not error.retryable
        )
        pipeline_error_record(
            workspace_id=workspace_id, memory_id=memory_id, stage=stage, code=code, message=message
        )


def run_relate_jobs(*, workspace_id: int, claimed: list[jobs.ClaimedJob]) -> None:
    for job in claimed:
        memory = _llm_job_memory(workspace_id, job)
        if memory is None:
            continue
        model = job.model or embedding_model_for(memory)
        with workspace_context(workspace_id):
            found = vectors.neighbours_of_memories(
                workspace_id=workspace_id,
                model=model,
                memory_ids=[memory.id],
                limit=max(20, settings.GRAPH_LLM_PAIRWISE_MAX_CALLS),
            ).get(memory.id, [])
            neighbours = _load_memories(workspace_id, [mid for mid, _ in found])
        candidates = [
            (_memory_text(neighbours[mid]), score)
            for mid, score in found
            if mid in neighbours and not neighbours[mid].injection_flags
        ]
        context = [
            _memory_text(m)
            for m in _recent_peers(workspace_id, memory, settings.GRAPH_LLM_SEMANTIC_CONTEXT_LIMIT)
        ]
        with workspace_context(workspace_id):
            detected = supersession.heuristic_pairs(workspace_id=workspace_id, memory_id=memory.id)
        try:
            result = relationships.relationships_find(
                workspace_id=workspace_id,
                memory=_memory_text(memory),
                candidates=candidates,
                context=context,
                job_id=job.id,
                always_ask=frozenset(detected),
            )
        except llm.LlmBudgetExhausted as exc:
            _llm_failed(
                workspace_id=workspace_id,
                job=job,
                memory_id=memory.id,
                stage="relate",
                code=exc.code,
                error=exc,
            )
            continue
        degrade = result.degrade_message()
        if result.calls and len(result.issues) and sum(result.issues.values()) == result.calls:
            code = next(iter(sorted(result.issues)))
            retryable = result.all_failed_transiently
            _llm_failed(
                workspace_id=workspace_id,
                job=job,
                memory_id=memory.id,
                stage="relate",
                code=code,
                error=llm.LlmError(code, degrade or code, retryable=retryable),
            )
            continue
        expiry = memory.expires_at if memory.layer == Memory.Layer.WORKING else None
        try:
            with workspace_context(workspace_id):
                relationships.relationship_edges_replace(
                    workspace_id=workspace_id, memory_id=memory.id, edges=result.edges, expires_at=expiry
                )
                supersession.model_decisions_apply(
                    workspace_id=workspace_id,
                    memory=memory,
                    neighbours={mid: neighbours[mid] for mid, _ in found if mid in neighbours},
                    answers=result.answers,
                    model=llm.model_for("pairwise"),
                )
                jobs.jobs_succeed(
                    jobs=[job],
                    error_code=relationships.GRAPH_RELATIONSHIP_PARTIAL_DEGRADE if degrade else None,
                    error_message=degrade,
                )
                if degrade:
                    pipeline_error_record(
                        workspace_id=workspace_id,
                        memory_id=memory.id,
                        stage="relate",
                        code=relationships.GRAPH_RELATIONSHIP_PARTIAL_DEGRADE,
                        message=degrade,
                    )
        except Exception as exc:  # noqa: BLE001 - retried with backoff
            logger.exception("relationship edges failed for memory %s", memory.id)
            with workspace_context(workspace_id):
                jobs.jobs_fail(
                    workspace_id=workspace_id,
                    jobs=[job],
                    code=GRAPH_RELATIONSHIP_SYNC_FAILED,
                    message=f"{type(exc).__name__}: {exc}",
                )


def run_extract_jobs(*, workspace_id: int, claimed: list[jobs.ClaimedJob]) -> None:
    embedder_model = settings.EMBEDDING_MODEL
    for job in claimed:
        memory = _llm_job_memory(workspace_id, job)
        if memory is None:
            continue
        context = [
            m.content
            for m in _recent_peers(workspace_id, memory, settings.GRAPH_ENTITY_CONTEXT_MEMORIES)
            if m.created_at <= memory.created_at
        ]
        try:
            embedder = get_embedder(embedder_model)
            embed = embedder.embed
        except Exception:  # noqa: BLE001 - resolution works without embeddings (alias, name, trigram)
            embed = None
        try:
            entities.entities_extract(
                workspace_id=workspace_id,
                memory_id=memory.id,
                content=memory.content,
                context=context,
                observed_at=memory.created_at,
                job_id=job.id,
                embed=embed,
                embedding_model=embedder_model,
                user_id=memory.user_id,
            )
        except llm.LlmError as exc:
            _llm_failed(
                workspace_id=workspace_id,
                job=job,
                memory_id=memory.id,
                stage="extract",
                code=entities.GRAPH_LLM_ENTITY_EXTRACTION_FAILED,
                error=exc,
            )
            continue
        except Exception as exc:  # noqa: BLE001 - retried with backoff
            logger.exception("entity extraction failed for memory %s", memory.id)
            with workspace_context(workspace_id):
                jobs.jobs_fail(
                    workspace_id=workspace_id,
                    jobs=[job],
                    code=entities.GRAPH_LLM_ENTITY_EXTRACTION_FAILED,
                    message=f"{type(exc).__name__}: {exc}",
                )
            continue
        with workspace_context(workspace_id):
            graph_step(
                workspace_id=workspace_id,
                memory_id=memory.id,
                action=functools.partial(
                    supersession.facts_follow_memory, workspace_id=workspace_id, memory=memory
                ),
            )
            jobs.jobs_succeed(jobs=[job])


_RUNNERS = {
    jobs.Kind.EMBED: run_embed_jobs,
    jobs.Kind.SIMILARITY: run_similarity_jobs,
    jobs.Kind.RELATE: run_relate_jobs,
    jobs.Kind.EXTRACT: run_extract_jobs,
}


def _maybe_build_vector_index(*, workspace_id: int, dimension: int) -> None:
    with workspace_context(workspace_id):
        if vectors.hnsw_index_ready(workspace_id=workspace_id, dimension=dimension):
            return
        count = vectors.workspace_vector_count(workspace_id=workspace_id, dimension=dimension)
    if count > settings.VECTOR_EXACT_MAX_ROWS:
        from django_q.tasks import async_task

        async_task("pipeline.tasks.vector_index_build", workspace_id, dimension)


def jobs_run_pending(*, workspace_id: int, include_delayed: bool = False, max_jobs: int = 100_000) -> int:
    """Run this workspace's queued jobs now, in this process, with the real job code (tests, manage.py
    commands).

    Returns how many jobs ran (follow-up steps run inline are not counted). `include_delayed` also runs
    retries still waiting for their backoff.
    """
    from django.utils import timezone

    from memories.models import PipelineJob

    ran = 0
    while ran < max_jobs:
        with workspace_context(workspace_id):
            due = PipelineJob.objects.filter(workspace_id=workspace_id, status=jobs.Status.QUEUED)
            if not include_delayed:
                due = due.filter(run_after__lte=timezone.now())
            job_ids = list(due.order_by("run_after", "id").values_list("id", flat=True)[:EMBED_BATCH_SIZE])
        if not job_ids:
            break
        for job_id in job_ids:
            ran += job_run(workspace_id=workspace_id, job_id=job_id)
    return ran

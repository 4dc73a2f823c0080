"""Graph work that outlasts a web request, as background jobs (pipeline.background): a community refresh
(detection, then up to 200 model summaries) and the LLM-extraction backfill of a workspace.

The backfill is here rather than in graphsvc because it queues and runs pipeline jobs (relate and extract) the
way the workers do; `manage.py graph_backfill` calls the same function."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from django.db.models import Exists, OuterRef

from config.errors import ApiError
from graphsvc import llm, upkeep
from memories.models import Memory, PipelineJob
from pipeline import background, jobs, selectors, services
from pipeline.background import JobRun
from pipeline.models import BackgroundJob
from tenancy.rls import workspace_context

COMMUNITIES_REFRESH_KIND = "graph_communities_refresh"
BACKFILL_KIND = "graph_backfill"
BACKFILL_PHASE = "extract"
# Memories one backfill job extracts: two model calls each, so a job stays well within
# BACKGROUND_JOB_TIMEOUT_SECONDS; a larger workspace takes another job, which starts where this one ended.
BACKFILL_JOB_MAX_MEMORIES = 2_000

# The newest jobs of a kind looked at for one still queued or running (a workspace has at most a few active).
JOBS_SCANNED = 10

BackfillProgress = Callable[[int, int], None]


def llm_required() -> None:
    """The backfill needs a model: 409 LLM_NOT_CONFIGURED, before a job is queued, when there is none."""
    if not llm.llm_enabled():
        raise ApiError(
            409,
            "LLM_NOT_CONFIGURED",
            "No extraction model is configured on this server (GRAPH_LLM_MODEL): there is nothing to "
            "backfill with. Ask the operator to configure one.",
        )


def _pending(*, workspace_id: int, limit: int | None) -> list[uuid.UUID]:
    """Live, unflagged memories whose extraction never succeeded and is not queued or running, oldest first.
    Injection-flagged memories are never sent to the model."""
    done = PipelineJob.objects.filter(
        memory_id=OuterRef("pk"),
        kind=jobs.Kind.EXTRACT,
        status__in=[jobs.Status.SUCCEEDED, jobs.Status.QUEUED, jobs.Status.PROCESSING],
    )
    with workspace_context(workspace_id):
        pending = (
            Memory.objects.filter(workspace_id=workspace_id, deleted_at__isnull=True, injection_flags=[])
            .exclude(Exists(done))
            .order_by("created_at", "id")
            .values_list("id", flat=True)
        )
        return list(pending[:limit] if limit is not None else pending)


def graph_backfill(
    *,
    workspace_id: int,
    limit: int | None = None,
    enqueue: bool = False,
    progress: BackfillProgress | None = None,
) -> int:
    """Run LLM extraction (memory relationships, entities and facts) for the workspace's memories that never
    had it (written before a model was configured, or dead-lettered): queue their relate and extract jobs
    and, unless `enqueue`, run them here, one memory at a time, each in its own transactions as a worker
    would. Uses the workspace's token budget like the workers. `progress` hears (done, total) after each
    memory. Returns how many memories were extracted or queued."""
    memory_ids = _pending(workspace_id=workspace_id, limit=limit)
    if progress is not None:
        progress(0, len(memory_ids))
    for done, memory_id in enumerate(memory_ids, start=1):
        with workspace_context(workspace_id):
            job_ids = [
                job_id
                for kind in (jobs.Kind.RELATE, jobs.Kind.EXTRACT)
                for job_id in jobs.jobs_enqueue(
                    workspace_id=workspace_id, memory_ids=[memory_id], kind=kind, push=enqueue
                )
            ]
        if not enqueue:
            for job_id in job_ids:
                services.job_run(workspace_id=workspace_id, job_id=job_id)
        if progress is not None:
            progress(done, len(memory_ids))
    return len(memory_ids)


# --- the job kinds (registered in pipeline.apps) ----------------------------------------------------------


def communities_refresh_run(job: JobRun) -> dict[str, Any]:
    """Detection, then the summaries, with the phase and done/total of each on the job."""

    def report(phase: str, done: int, total: int | None) -> None:
        # A new phase shows at once; the per-summary steps within a phase are throttled by JobRun.
        job.progress(phase=phase, done=done, total=total, force=done == 0 or done == total)

    result = upkeep.communities_refresh(workspace_id=job.workspace_id, progress=report)
    return {
        "communities": int(result.get("communities", 0)),
        "entities": int(result.get("entities", 0)),
        "summarized": int(result.get("summarized", 0)),
    }


def graph_backfill_run(job: JobRun) -> dict[str, Any]:
    llm_required()
    limit = max(1, min(int(job.params.get("limit") or BACKFILL_JOB_MAX_MEMORIES), BACKFILL_JOB_MAX_MEMORIES))

    def report(done: int, total: int) -> None:
        job.progress(phase=BACKFILL_PHASE, done=done, total=total, force=done in (0, total))

    extracted = graph_backfill(workspace_id=job.workspace_id, limit=limit, progress=report)
    # Whether memories are left for another job: one more past the limit is enough to know.
    more = extracted == limit and bool(_pending(workspace_id=job.workspace_id, limit=1))
    return {"memories": extracted, "more": more}


def graph_job_start(
    *, workspace_id: int, kind: str, params: dict[str, Any] | None = None, created_by: str = ""
) -> BackgroundJob:
    """The workspace's queued or running job of `kind` when there is one (a second refresh or backfill at once
    would only repeat the first's work), else a new one. Inside the caller's workspace_context."""
    for job in selectors.jobs_list(workspace_id=workspace_id, kind=kind, limit=JOBS_SCANNED):
        if not job.finished:
            return job
    return background.job_create(workspace_id=workspace_id, kind=kind, params=params, created_by=created_by)

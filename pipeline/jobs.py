"""Pipeline jobs: one row per (memory, kind) holding the status agents see, plus the django-q2 message that
runs it.

The job row and its broker message are written in the caller's transaction (the ORM broker lives in the same
database), so a committed memory always has its job and a rolled-back one never does. Embedding jobs share
their messages: one per batch rather than one per memory (jobs_enqueue, jobs_claim_lock,
docs/write-performance.md). Workers claim rows with FOR UPDATE SKIP LOCKED and a claim token; a retry is a new
broker message whose `lock` lies in the future, which is how the ORM broker expresses "not before" —
exponential backoff without a scheduler.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connections
from django.utils import timezone

from config import tracing

MAX_ATTEMPTS = 5
BACKOFF_BASE_SECONDS = 1.0
BACKOFF_CAP_SECONDS = 60.0
TASK_FUNC = "pipeline.tasks.pipeline_job_run"
# Messages written in the same statement as their job name the job by (memory, kind): its id is not known yet.
MEMORY_TASK_FUNC = "pipeline.tasks.pipeline_memory_job_run"
# Coalesced messages of batchable kinds name only the workspace and the kind: they claim its due jobs.
KIND_TASK_FUNC = "pipeline.tasks.pipeline_kind_jobs_run"


class Kind:
    EMBED = "embed"
    SIMILARITY = "similarity"
    # LLM steps (only with GRAPH_LLM_MODEL): memory relationships (memories.sh) and entities + facts (Zeph).
    RELATE = "relate"
    EXTRACT = "extract"


# Kinds whose claim takes a batch of the workspace's due jobs, and whose messages are coalesced
# (jobs_enqueue).
BATCHABLE_KINDS = [Kind.EMBED]


class Status:
    QUEUED = "queued"
    PROCESSING = "processing"
    SUCCEEDED = "succeeded"
    DEAD_LETTER = "dead_letter"


def backoff_seconds(attempts: int) -> float:
    """1 s, 2 s, 4 s … capped at 60 s, after the n-th failed attempt."""
    return min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2 ** max(0, attempts - 1))


def _broker_payload(func: str, args: tuple[Any, ...]) -> str:
    """A django-q2 task message as its ORM broker stores it (signed pickle), for `func(*args)`."""
    from django_q.humanhash import uuid as q_uuid
    from django_q.signing import SignedPackage

    name, task_id = q_uuid()
    task: dict[str, Any] = {
        "id": task_id,
        "name": name,
        "func": func,
        "args": args,
        "kwargs": {},
        "started": timezone.now(),
    }
    # The job's trace links to the request (or job) that queued it.
    return SignedPackage.dumps(tracing.job_message_stamp(task))


def broker_push(*, workspace_id: int, job_ids: list[int], delay_seconds: float = 0.0) -> None:
    """Queue one django-q2 message per job; a delay keeps it invisible to workers until then."""
    if not job_ids:
        return
    from django_q.conf import Conf
    from django_q.models import OrmQ

    visible_at = timezone.now() + timedelta(seconds=delay_seconds)
    messages = [
        OrmQ(
            key=Conf.CLUSTER_NAME, payload=_broker_payload(TASK_FUNC, (workspace_id, job_id)), lock=visible_at
        )
        for job_id in job_ids
    ]
    OrmQ.objects.using("app").bulk_create(messages)


def _claim_lock_key(*, workspace_id: int, kind: str) -> str:
    return f"cairn.pipeline.claim:{workspace_id}:{kind}"


def jobs_enqueue(
    *, workspace_id: int, memory_ids: list[uuid.UUID], kind: str, model: str | None = None, push: bool = True
) -> list[int]:
    """(Re)queue `kind` for the memories, resetting attempts; returns job ids. Call inside the write
    transaction.

    `push=False` queues a follow-up step that the current task runs itself (see jobs_claim_followups).

    Batchable kinds (embedding) coalesce their broker messages: the statement adds one message for the whole
    call, and none at all when another job of the kind is already queued, due and recent, because whichever
    message claims that job takes this one in the same batch (see jobs_claim_lock for why that holds under
    concurrency).
    """
    if not memory_ids:
        return []
    upsert = """
        INSERT INTO pipeline_jobs (workspace_id, memory_id, kind, status, attempts, model, run_after,
            created_at, updated_at)
        SELECT %(ws)s, memory_id, %(kind)s, 'queued', 0, %(model)s, now(), now(), now()
        FROM unnest(%(memories)s::uuid[]) AS m(memory_id)
        ON CONFLICT (memory_id, kind) DO UPDATE
            SET status = 'queued', attempts = 0, model = EXCLUDED.model, run_after = now(),
                claim_token = NULL, updated_at = now(), finished_at = NULL
        RETURNING id, memory_id
    """
    params: dict[str, Any] = {"ws": workspace_id, "kind": kind, "model": model, "memories": memory_ids}
    if not push:
        sql = f"WITH job AS ({upsert}) SELECT id FROM job"
    elif kind in BATCHABLE_KINDS:
        from django_q.conf import Conf

        # `covered`: a queued, due job of the same kind that this call can ride on. Reading it under FOR KEY
        # SHARE re-checks its newest committed version (not the statement's snapshot), and the shared advisory
        # lock is taken once (an InitPlan) before any row reaches that re-check: a claim that took the job has
        # committed by then and the row no longer matches, and a claim still to come must wait for this
        # transaction (it takes the lock exclusively), so it sees these jobs. `try`: while a claim holds the
        # lock, add a message instead of waiting. Only jobs due within the broker's retry window count (newest
        # first, a short backward scan of pipeline_jobs_ws_status even behind a large backlog), so a job whose
        # message was lost (purged, dropped after django-q2's own retries) cannot hold back every later add;
        # the next batch takes it along.
        sql = f"""
            WITH job AS ({upsert}),
            covered AS (
                SELECT id FROM pipeline_jobs
                WHERE workspace_id = %(ws)s AND status = 'queued'
                  AND run_after <= now() AND run_after > now() - make_interval(secs => %(fresh)s)
                  AND kind = %(kind)s AND NOT (memory_id = ANY(%(memories)s::uuid[]))
                  AND (SELECT pg_try_advisory_xact_lock_shared(hashtextextended(%(lock)s, 0)))
                ORDER BY run_after DESC
                LIMIT 1
                FOR KEY SHARE
            ),
            message AS (
                INSERT INTO django_q_ormq (key, payload, lock)
                SELECT %(queue)s, %(payload)s, %(visible)s
                WHERE NOT EXISTS (SELECT 1 FROM covered)
            )
            SELECT id FROM job
        """
        params |= {
            "queue": Conf.CLUSTER_NAME,
            "visible": timezone.now(),
            "payload": _broker_payload(KIND_TASK_FUNC, (workspace_id, kind)),
            "fresh": float(settings.Q_CLUSTER["retry"]),
            "lock": _claim_lock_key(workspace_id=workspace_id, kind=kind),
        }
    else:
        from django_q.conf import Conf

        # The job rows and their broker messages in one statement (one round trip less on every add): the
        # messages name their job by (memory, kind), which the upsert keeps unique.
        sql = f"""
            WITH job AS ({upsert}),
            message AS (
                INSERT INTO django_q_ormq (key, payload, lock)
                SELECT %(queue)s, p.payload, %(visible)s
                FROM unnest(%(memories)s::uuid[], %(payloads)s::text[]) AS p(memory_id, payload)
                JOIN job USING (memory_id)
            )
            SELECT id FROM job
        """
        params |= {
            "queue": Conf.CLUSTER_NAME,
            "visible": timezone.now(),
            "payloads": [_broker_payload(MEMORY_TASK_FUNC, (workspace_id, str(m), kind)) for m in memory_ids],
        }
    with (
        tracing.span("jobs.enqueue", {"cairn.job.kind": kind, "cairn.jobs": len(memory_ids)}),
        connections["app"].cursor() as cursor,
    ):
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


def jobs_claim_lock(*, workspace_id: int, kind: str) -> None:
    """Wait for the writes that queued jobs of `kind` without a message of their own; call before claiming.

    Such a write (jobs_enqueue) holds this lock shared from the moment it relied on another queued job until
    it commits; a claim holds it exclusively for its own short transaction. So a claim's statement, run after
    this, sees every job that relied on a job it can claim, and a message is never consumed by a claim that
    misses one.
    """
    with connections["app"].cursor() as cursor:
        # Bounded: behind a write that holds its transaction open for long, the task fails (LockNotAvailable)
        # and the broker re-delivers its message after JOB_RETRY_SECONDS, instead of the worker sitting there
        # until django-q2 kills it at JOB_TIMEOUT_SECONDS. The jobs stay queued either way. Transaction-local.
        cursor.execute("SELECT set_config('lock_timeout', %s, true)", [f"{claim_lock_timeout_ms()}ms"])
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
            [_claim_lock_key(workspace_id=workspace_id, kind=kind)],
        )


def claim_lock_timeout_ms() -> int:
    return int(settings.Q_CLUSTER["timeout"] * 1000 / 2)


def jobs_push_follow_up(*, workspace_id: int, kind: str) -> bool:
    """After a full batch was claimed (under jobs_claim_lock): one more message for the kind if due jobs are
    left.

    Those jobs may have no message of their own (coalesced); this one takes the next batch, on another worker
    if one is free, while this worker runs the batch it has."""
    from django_q.conf import Conf

    with connections["app"].cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO django_q_ormq (key, payload, lock)
            SELECT %s, %s, %s
            WHERE EXISTS (SELECT 1 FROM pipeline_jobs
                          WHERE workspace_id = %s AND kind = %s AND status = 'queued' AND run_after <= now())
            """,
            [
                Conf.CLUSTER_NAME,
                _broker_payload(KIND_TASK_FUNC, (workspace_id, kind)),
                timezone.now(),
                workspace_id,
                kind,
            ],
        )
        return cursor.rowcount > 0


@dataclass(frozen=True)
class ClaimedJob:
    id: int
    memory_id: uuid.UUID
    kind: str
    attempts: int
    model: str | None
    claim_token: uuid.UUID


def _stale_before() -> datetime:
    # django-q2 kills a task at its timeout, so a job still "processing" after it belongs to a dead worker
    # (kill -9, OOM, timeout); the broker re-delivers its message only after `retry` > timeout.
    return timezone.now() - timedelta(seconds=settings.Q_CLUSTER["timeout"] + 1)


WORKER_LOST = "JOB_WORKER_LOST"


def jobs_dead_letter_lost(*, workspace_id: int) -> int:
    """Dead-letter stale "processing" jobs that already used every attempt.

    A job whose worker dies each time (killed, out of memory, past the task timeout) never reaches jobs_fail,
    so without this its message would be delivered again and again, each claim adding an attempt, forever.
    """
    with connections["app"].cursor() as cursor:
        cursor.execute(
            """
        UPDATE pipeline_jobs
        SET status = 'dead_letter', last_error_code = %s, claim_token = NULL, finished_at = now(),
            updated_at = now(),
            last_error_message = 'The worker running this job stopped (killed, out of memory or past '
                                 'JOB_TIMEOUT_SECONDS) on every attempt.'
        WHERE workspace_id = %s AND status = 'processing' AND started_at < %s AND attempts >= %s
        """,
            [WORKER_LOST, workspace_id, _stale_before(), MAX_ATTEMPTS],
        )
        return cursor.rowcount


def jobs_claim(
    *,
    workspace_id: int,
    job_id: int | None = None,
    memory_id: uuid.UUID | str | None = None,
    kind: str | None = None,
    batch_size: int = 1,
) -> list[ClaimedJob]:
    """Claim the job (by id, or by memory and kind) and, for batchable kinds (embedding), other due jobs of
    its kind in the workspace; with only `kind` (a coalesced message), up to `batch_size` due jobs of that
    kind.

    Runs in the caller's workspace transaction (after jobs_claim_lock for batchable kinds); returns nothing
    when the job is done, dead or claimed elsewhere and, for a batchable kind, no other job of it is due.
    """
    if job_id is None and kind is None:
        raise ValueError("jobs_claim needs job_id, or memory_id and kind, or kind")
    # Two spellings rather than an OR, so each uses its unique index (the key, or memory_id + kind).
    if job_id is not None:
        target = "id = %(job)s"
    elif memory_id is not None:
        target = "memory_id = %(memory)s::uuid AND kind = %(kind)s"
    else:
        target = "false"
    token = uuid.uuid4()
    with connections["app"].cursor() as cursor:
        cursor.execute(
            f"""
            WITH wanted AS (
                SELECT id, kind FROM pipeline_jobs
                WHERE workspace_id = %(ws)s AND {target}
                  AND (status = 'queued'
                       OR (status = 'processing' AND started_at < %(stale)s AND attempts < %(max)s))
                FOR UPDATE SKIP LOCKED
            ),
            batch AS (
                -- Stale "processing" rows too: they belong to a worker that died holding a batch, and this
                -- message may be the only one left to bring them back. A message whose own job is gone still
                -- takes due jobs of its kind: coalesced jobs may be counting on it.
                SELECT id FROM pipeline_jobs
                WHERE workspace_id = %(ws)s AND id NOT IN (SELECT id FROM wanted)
                  AND ((status = 'queued' AND run_after <= now())
                       OR (status = 'processing' AND started_at < %(stale)s AND attempts < %(max)s))
                  AND kind = COALESCE((SELECT kind FROM wanted), %(kind)s) AND kind = ANY(%(batchable)s)
                ORDER BY run_after, id
                LIMIT %(extra)s
                FOR UPDATE SKIP LOCKED
            )
            UPDATE pipeline_jobs j
            SET status = 'processing', attempts = j.attempts + 1, started_at = now(), updated_at = now(),
                claim_token = %(token)s
            WHERE j.id IN (SELECT id FROM wanted UNION SELECT id FROM batch)
            RETURNING j.id, j.memory_id, j.kind, j.attempts, j.model
            """,
            {
                "ws": workspace_id,
                "job": job_id,
                "memory": str(memory_id) if memory_id is not None else None,
                "kind": kind,
                "stale": _stale_before(),
                "batchable": BATCHABLE_KINDS,
                "extra": batch_size if target == "false" else max(0, batch_size - 1),
                "token": token,
                "max": MAX_ATTEMPTS,
            },
        )
        rows = cursor.fetchall()
    return [
        ClaimedJob(id=r[0], memory_id=r[1], kind=r[2], attempts=r[3], model=r[4], claim_token=token)
        for r in rows
    ]


def jobs_succeed(
    *, jobs: list[ClaimedJob], error_code: str | None = None, error_message: str | None = None
) -> None:
    """Mark claimed jobs done; a job re-queued meanwhile (an edit) keeps its new state. Optional degrade
    code."""
    if not jobs:
        return
    with connections["app"].cursor() as cursor:
        cursor.execute(
            """
            UPDATE pipeline_jobs SET status = 'succeeded', finished_at = now(), updated_at = now(),
                last_error_code = COALESCE(%s, last_error_code),
                last_error_message = COALESCE(%s, last_error_message)
            WHERE id = ANY(%s) AND claim_token = %s AND status = 'processing'
            """,
            [error_code, error_message, [job.id for job in jobs], jobs[0].claim_token],
        )


def jobs_fail(
    *, workspace_id: int, jobs: list[ClaimedJob], code: str, message: str, final: bool = False
) -> None:
    """Record the failure; retry with backoff, or dead-letter after MAX_ATTEMPTS (at once when `final`: a
    failure that a retry would only repeat)."""
    retry_by_delay: dict[float, list[int]] = {}
    # Wall-clock time, not the transaction's now(): a long transaction must not make the retry due at once.
    failed_at = timezone.now()
    with connections["app"].cursor() as cursor:
        for job in jobs:
            dead = final or job.attempts >= MAX_ATTEMPTS
            delay = backoff_seconds(job.attempts)
            cursor.execute(
                """
                UPDATE pipeline_jobs
                SET status = %s, last_error_code = %s, last_error_message = %s, updated_at = %s,
                    run_after = %s, claim_token = NULL,
                    finished_at = CASE WHEN %s THEN now() ELSE NULL END
                WHERE id = %s AND claim_token = %s AND status = 'processing'
                """,
                [
                    Status.DEAD_LETTER if dead else Status.QUEUED,
                    code,
                    message[:500],
                    failed_at,
                    failed_at + timedelta(seconds=delay),
                    dead,
                    job.id,
                    job.claim_token,
                ],
            )
            if cursor.rowcount and not dead:
                retry_by_delay.setdefault(delay, []).append(job.id)
    for delay, job_ids in retry_by_delay.items():
        broker_push(workspace_id=workspace_id, job_ids=job_ids, delay_seconds=delay)


def jobs_defer(
    *, workspace_id: int, jobs: list[ClaimedJob], code: str, message: str, delay_seconds: float
) -> None:
    """Put claimed jobs back without using up an attempt (a paused dependency, e.g. a spent LLM budget)."""
    run_after = timezone.now() + timedelta(seconds=delay_seconds)
    with connections["app"].cursor() as cursor:
        cursor.execute(
            """
            UPDATE pipeline_jobs
            SET status = 'queued', attempts = greatest(0, attempts - 1), last_error_code = %s,
                last_error_message = %s, run_after = %s, claim_token = NULL, updated_at = now()
            WHERE id = ANY(%s) AND claim_token = %s AND status = 'processing'
            RETURNING id
            """,
            [code, message[:500], run_after, [job.id for job in jobs], jobs[0].claim_token if jobs else None],
        )
        deferred = [row[0] for row in cursor.fetchall()]
    broker_push(workspace_id=workspace_id, job_ids=deferred, delay_seconds=delay_seconds)


FOLLOW_UP_KINDS = [Kind.SIMILARITY]


def jobs_claim_followups(*, workspace_id: int, batch_size: int) -> list[ClaimedJob]:
    """Claim follow-up steps of the workspace that wait without a broker message or were left by a dead
    worker.

    A follow-up step (similarity after embedding) runs inside the task of the step before it and has no
    message of its own; if that task died after the first step committed, any later message of the workspace
    that finds its own job done sweeps them up here (the dead task's own message is re-delivered, so there
    always is one).
    """
    with connections["app"].cursor() as cursor:
        cursor.execute(
            """
            SELECT id FROM pipeline_jobs
            WHERE workspace_id = %s AND kind = ANY(%s)
              AND ((status = 'queued' AND run_after <= now()) OR (status = 'processing' AND started_at < %s))
            ORDER BY run_after, id
            LIMIT %s
            """,
            [workspace_id, FOLLOW_UP_KINDS, _stale_before(), batch_size],
        )
        ids = [row[0] for row in cursor.fetchall()]
    return jobs_claim_ids(workspace_id=workspace_id, job_ids=ids, include_stale=True)


def jobs_claim_ids(*, workspace_id: int, job_ids: list[int], include_stale: bool = False) -> list[ClaimedJob]:
    """Claim specific queued jobs now (a follow-up step run in the same task as the step before it)."""
    if not job_ids:
        return []
    token = uuid.uuid4()
    with connections["app"].cursor() as cursor:
        cursor.execute(
            """
            UPDATE pipeline_jobs j
            SET status = 'processing', attempts = j.attempts + 1, started_at = now(), updated_at = now(),
                claim_token = %s
            WHERE j.id IN (
                SELECT id FROM pipeline_jobs WHERE workspace_id = %s AND id = ANY(%s)
                  AND (status = 'queued'
                       OR (%s AND status = 'processing' AND started_at < %s AND attempts < %s))
                FOR UPDATE SKIP LOCKED
            )
            RETURNING j.id, j.memory_id, j.kind, j.attempts, j.model
            """,
            [token, workspace_id, job_ids, include_stale, _stale_before(), MAX_ATTEMPTS],
        )
        rows = cursor.fetchall()
    return [
        ClaimedJob(id=r[0], memory_id=r[1], kind=r[2], attempts=r[3], model=r[4], claim_token=token)
        for r in rows
    ]

"""Pipeline jobs: one row per (memory, kind) holding the status agents see, plus the django-q2 message that runs it.

The job row and its broker message are written in the caller's transaction (the ORM broker lives in the same
database), so a committed memory always has its job and a rolled-back one never does. Workers claim rows with
FOR UPDATE SKIP LOCKED and a claim token; a retry is a new broker message whose `lock` lies in the future, which
is how the ORM broker expresses "not before" — exponential backoff without a scheduler.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connections
from django.utils import timezone

MAX_ATTEMPTS = 5
BACKOFF_BASE_SECONDS = 1.0
BACKOFF_CAP_SECONDS = 60.0
TASK_FUNC = "memories.tasks.pipeline_job_run"
# Messages written in the same statement as their job name the job by (memory, kind): its id is not known yet.
MEMORY_TASK_FUNC = "memories.tasks.pipeline_memory_job_run"


class Kind:
    EMBED = "embed"
    SIMILARITY = "similarity"
    # LLM steps (only with GRAPH_LLM_MODEL): memory relationships (memories.sh) and entities + facts (Zeph).
    RELATE = "relate"
    EXTRACT = "extract"


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
        "id": task_id, "name": name, "func": func, "args": args, "kwargs": {}, "started": timezone.now(),
    }
    return SignedPackage.dumps(task)


def broker_push(*, workspace_id: int, job_ids: list[int], delay_seconds: float = 0.0) -> None:
    """Queue one django-q2 message per job; a delay keeps it invisible to workers until then."""
    if not job_ids:
        return
    from django_q.conf import Conf
    from django_q.models import OrmQ

    visible_at = timezone.now() + timedelta(seconds=delay_seconds)
    messages = [
        OrmQ(key=Conf.CLUSTER_NAME, payload=_broker_payload(TASK_FUNC, (workspace_id, job_id)), lock=visible_at)
        for job_id in job_ids
    ]
    OrmQ.objects.using("app").bulk_create(messages)


def jobs_enqueue(
    *, workspace_id: int, memory_ids: list[uuid.UUID], kind: str, model: str | None = None, push: bool = True
) -> list[int]:
    """(Re)queue `kind` for the memories, resetting attempts; returns job ids. Call inside the write transaction.

    `push=False` queues a follow-up step that the current task runs itself (see jobs_claim_followups).
    """
    if not memory_ids:
        return []
    upsert = """
        INSERT INTO pipeline_jobs (workspace_id, memory_id, kind, status, attempts, model, run_after,
            created_at, updated_at)
        SELECT %(ws)s, memory_id, %(kind)s, 'queued', 0, %(model)s, now(), now(), now()
        FROM unnest(%(memories)s::uuid[]) AS m(memory_id)
        ON CONFLICT (memory_id, kind) DO UPDATE
            SET status = 'queued', attempts = 0, model = EXCLUDED.model, run_after = now(), claim_token = NULL,
                updated_at = now(), finished_at = NULL
        RETURNING id, memory_id
    """
    params: dict[str, Any] = {"ws": workspace_id, "kind": kind, "model": model, "memories": memory_ids}
    if push:
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
    else:
        sql = f"WITH job AS ({upsert}) SELECT id FROM job"
    with connections["app"].cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


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


BATCHABLE_KINDS = [Kind.EMBED]


WORKER_LOST = "JOB_WORKER_LOST"


def jobs_dead_letter_lost(*, workspace_id: int) -> int:
    """Dead-letter stale "processing" jobs that already used every attempt.

    A job whose worker dies each time (killed, out of memory, past the task timeout) never reaches jobs_fail, so
    without this its message would be delivered again and again, each claim adding an attempt, forever.
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
    *, workspace_id: int, job_id: int | None = None, memory_id: uuid.UUID | str | None = None,
    kind: str | None = None, batch_size: int = 1,
) -> list[ClaimedJob]:
    """Claim the job (by id, or by memory and kind) and, for batchable kinds (embedding), other due jobs of its
    kind in the workspace.

    Runs in the caller's workspace transaction; returns nothing when the job is done, dead or claimed elsewhere.
    """
    if job_id is None and (memory_id is None or kind is None):
        raise ValueError("jobs_claim needs job_id, or memory_id and kind")
    # Two spellings rather than an OR, so each uses its unique index (the key, or memory_id + kind).
    target = "id = %(job)s" if job_id is not None else "memory_id = %(memory)s::uuid AND kind = %(kind)s"
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
                -- message may be the only one left to bring them back.
                SELECT id FROM pipeline_jobs
                WHERE workspace_id = %(ws)s AND id NOT IN (SELECT id FROM wanted)
                  AND ((status = 'queued' AND run_after <= now())
                       OR (status = 'processing' AND started_at < %(stale)s AND attempts < %(max)s))
                  AND kind = (SELECT kind FROM wanted WHERE kind = ANY(%(batchable)s))
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
                "extra": max(0, batch_size - 1),
                "token": token,
                "max": MAX_ATTEMPTS,
            },
        )
        rows = cursor.fetchall()
    return [ClaimedJob(id=r[0], memory_id=r[1], kind=r[2], attempts=r[3], model=r[4], claim_token=token) for r in rows]


def jobs_succeed(*, jobs: list[ClaimedJob], error_code: str | None = None, error_message: str | None = None) -> None:
    """Mark claimed jobs done; a job re-queued meanwhile (an edit) keeps its new state. Optional degrade code."""
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
    """Record the failure; retry with backoff, or dead-letter after MAX_ATTEMPTS (at once when `final`: a failure
    that a retry would only repeat)."""
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


def jobs_defer(*, workspace_id: int, jobs: list[ClaimedJob], code: str, message: str, delay_seconds: float) -> None:
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
    """Claim follow-up steps of the workspace that wait without a broker message or were left by a dead worker.

    A follow-up step (similarity after embedding) runs inside the task of the step before it and has no message of
    its own; if that task died after the first step committed, any later message of the workspace that finds its
    own job done sweeps them up here (the dead task's own message is re-delivered, so there always is one).
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
                  AND (status = 'queued' OR (%s AND status = 'processing' AND started_at < %s AND attempts < %s))
                FOR UPDATE SKIP LOCKED
            )
            RETURNING j.id, j.memory_id, j.kind, j.attempts, j.model
            """,
            [token, workspace_id, job_ids, include_stale, _stale_before(), MAX_ATTEMPTS],
        )
        rows = cursor.fetchall()
    return [ClaimedJob(id=r[0], memory_id=r[1], kind=r[2], attempts=r[3], model=r[4], claim_token=token) for r in rows]

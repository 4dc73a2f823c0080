"""Background jobs: work that outlasts a web request runs in a django-q2 worker while the caller polls
jobs/status.

A job is a BackgroundJob row (pipeline.models: kind, status queued → running → succeeded | failed, phase,
done/total, result, error code and class) and one django-q2 message naming `pipeline.tasks.background_job_run`
with the workspace and job ids. Both are written in the caller's transaction: the ORM broker lives in the same
database, so the job and its message commit together or not at all.

The runner (job_run) holds a session advisory lock on the job while it runs. A message the broker hands out
again while the job still runs (it does so after JOB_RETRY_SECONDS) finds the lock taken and leaves a delayed
message behind it, so a worker that dies mid-job is noticed: the next message finds the job running without
its lock and runs it again (its transaction was rolled back with the worker), or fails it as WORKER_LOST after
MAX_ATTEMPTS. A job may run for BACKGROUND_JOB_TIMEOUT_SECONDS.

Adding a job kind
-----------------
1. Write the work in the app that owns it: `run(job: JobRun) -> dict[str, Any]`. It opens its own
   tenancy.rls.workspace_context, calls `job.progress(done=…, total=…, phase=…)` as often as it likes (writes
   are throttled to one a second, on a connection of their own so they show while the job's transaction is
   still open), and returns the result: small JSON (counts, a file name), never row contents. Raise
   config.errors.ApiError for a failure the caller can fix: its code, class and the message Cairn wrote are
   shown. Any other exception shows as JOB_FAILED with the exception's class name; its text stays in the log.
2. Register it in the app's AppConfig.ready(): `background.job_kind_register("my_kind", run)`, optionally
   with `sweep=` (a function the hourly `background-jobs-sweep` schedule calls, e.g. to delete old files).
   Every process loads every app, so the web process that creates the job and the worker that runs it both
   know the kind.
3. Create jobs with `background.job_create(workspace_id=…, kind="my_kind", params={…}, created_by=…)` inside
   the caller's workspace_context; answer 202 with `pipeline.selectors.job_payload(job)`. params hold ids and
   small values only.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connections, transaction
from django.utils import timezone

from config import tracing
from config.errors import ApiError
from pipeline.models import BackgroundJob
from tenancy.rls import workspace_context

logger = logging.getLogger("cairn.background")

RUN_TASK = "pipeline.tasks.background_job_run"
# Runs of one job (a worker that died mid-job counts as one); then it fails with WORKER_LOST.
MAX_ATTEMPTS = 3
# Queued or running jobs one workspace may have at a time; one more is 429 JOBS_LIMIT_REACHED.
MAX_ACTIVE_PER_WORKSPACE = 4
PROGRESS_INTERVAL_SECONDS = 1.0

Run = Callable[["JobRun"], dict[str, Any]]
Sweep = Callable[[], int]


@dataclass(frozen=True)
class JobKind:
    run: Run
    sweep: Sweep | None = None


_KINDS: dict[str, JobKind] = {}


def job_kind_register(kind: str, run: Run, *, sweep: Sweep | None = None) -> None:
    """Make `kind` runnable (call from an AppConfig.ready)."""
    if len(kind) > 32:
        raise ValueError(f"job kind {kind!r} is longer than 32 characters")
    _KINDS[kind] = JobKind(run=run, sweep=sweep)


# --- create -------------------------------------------------------------------------------------------------


def _message(workspace_id: int, job_id: uuid.UUID) -> str:
    """A django-q2 message as its ORM broker stores it (signed pickle) for background_job_run, with the job
    timeout instead of the cluster's (JOB_TIMEOUT_SECONDS is sized for pipeline jobs)."""
    from django_q.humanhash import uuid as q_uuid
    from django_q.signing import SignedPackage

    name, task_id = q_uuid()
    task: dict[str, Any] = {
        "id": task_id,
        "name": name,
        "func": RUN_TASK,
        "args": (workspace_id, str(job_id)),
        "kwargs": {},
        "started": timezone.now(),
        "timeout": settings.BACKGROUND_JOB_TIMEOUT_SECONDS,
    }
    # The job's trace links to the request that queued it.
    return SignedPackage.dumps(tracing.job_message_stamp(task))


def _push(*, workspace_id: int, job_id: uuid.UUID, delay_seconds: float = 0.0) -> None:
    from django_q.conf import Conf
    from django_q.models import OrmQ

    OrmQ.objects.using("app").create(
        key=Conf.CLUSTER_NAME,
        payload=_message(workspace_id, job_id),
        lock=timezone.now() + timedelta(seconds=delay_seconds),
    )


def job_create(
    *,
    workspace_id: int,
    kind: str,
    params: dict[str, Any] | None = None,
    created_by: str = "",
    total: int | None = None,
) -> BackgroundJob:
    """Queue a job of a registered kind: its row and its broker message in one transaction (the caller's, when
    there is one). 429 JOBS_LIMIT_REACHED when the workspace already has MAX_ACTIVE_PER_WORKSPACE jobs queued
    or running."""
    if kind not in _KINDS:
        raise ValueError(f"unknown background job kind {kind!r}; register it with job_kind_register")
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        # Two creates at once must not both pass the count below.
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended('cairn.background.create:' || %s::text, 0))",
            [workspace_id],
        )
        active = BackgroundJob.objects.filter(
            workspace_id=workspace_id, status__in=[BackgroundJob.Status.QUEUED, BackgroundJob.Status.RUNNING]
        ).count()
        if active >= MAX_ACTIVE_PER_WORKSPACE:
            raise ApiError(
                429,
                "JOBS_LIMIT_REACHED",
                f"This workspace already has {active} background jobs queued or running (at most "
                f"{MAX_ACTIVE_PER_WORKSPACE}). Wait for one to finish (jobs/list shows them), then retry.",
                details={"active": active, "limit": MAX_ACTIVE_PER_WORKSPACE},
                headers={"Retry-After": "30"},
            )
        now = timezone.now()
        job = BackgroundJob.objects.create(
            workspace_id=workspace_id,
            kind=kind,
            params=params or {},
            total=total,
            created_by=created_by[:120],
            created_at=now,
            updated_at=now,
        )
        _push(workspace_id=workspace_id, job_id=job.id)
    return job


# --- run ----------------------------------------------------------------------------------------------------


class _SideWriter:
    """Runs writes on a helper thread, which has a database connection of its own: a job's progress commits
    while the job's own transaction is still open (an import is one transaction)."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None

    def run(self, write: Callable[[], None]) -> None:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cairn-job-progress")
        try:
            self._pool.submit(write).result()
        except Exception:  # noqa: BLE001 - progress is a courtesy; the job goes on without it
            logger.warning("progress write failed", exc_info=True)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.submit(connections.close_all).result()
            self._pool.shutdown()
            self._pool = None


@dataclass
class JobRun:
    """What a job kind's `run` gets: the job's ids and params, and progress reporting."""

    id: uuid.UUID
    workspace_id: int
    kind: str
    params: dict[str, Any]
    _writer: _SideWriter = field(default_factory=_SideWriter, repr=False)
    _last_write: float = field(default=0.0, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # The latest progress reported, written with the job's end whether or not a throttled write carried it.
    latest: dict[str, Any] = field(default_factory=dict, repr=False)

    def progress(
        self, *, done: int, total: int | None = None, phase: str | None = None, force: bool = False
    ) -> None:
        """Record how far the job got; written at most once per PROGRESS_INTERVAL_SECONDS unless `force`."""
        values: dict[str, Any] = {"done": max(0, done)}
        if total is not None:
            values["total"] = max(0, total)
        if phase is not None:
            values["phase"] = phase[:32]
        now = time.monotonic()
        with self._lock:
            self.latest.update(values)
            if not force and now - self._last_write < PROGRESS_INTERVAL_SECONDS:
                return
            self._last_write = now
        values["updated_at"] = timezone.now()

        def write() -> None:
            with workspace_context(self.workspace_id), connections["app"].cursor() as cursor:
                # Never wait long on the job's row: a caller that runs the job inside its own open transaction
                # holds it, and this thread's wait would be that caller's wait too.
                cursor.execute("SET LOCAL lock_timeout = '2s'")
                BackgroundJob.objects.filter(
                    workspace_id=self.workspace_id, pk=self.id, status=BackgroundJob.Status.RUNNING
                ).update(**values)

        self._writer.run(write)


def _lock_key(job_id: uuid.UUID) -> str:
    return f"cairn.background.run:{job_id}"


def _try_lock(job_id: uuid.UUID) -> bool:
    with connections["app"].cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", [_lock_key(job_id)])
        return bool(cursor.fetchone()[0])


def _unlock(job_id: uuid.UUID) -> None:
    with connections["app"].cursor() as cursor:
        cursor.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", [_lock_key(job_id)])


def _finish(
    *,
    workspace_id: int,
    job_id: uuid.UUID,
    status: str,
    result: dict[str, Any] | None = None,
    error_code: str | None = None,
    error_class: str | None = None,
    error_details: dict[str, Any] | None = None,
    progress: dict[str, Any] | None = None,
) -> None:
    now = timezone.now()
    with workspace_context(workspace_id):
        BackgroundJob.objects.filter(workspace_id=workspace_id, pk=job_id).update(
            **(progress or {}),
            status=status,
            result=result,
            error_code=error_code,
            error_class=error_class,
            error_details=error_details,
            finished_at=now,
            updated_at=now,
        )


def _claim(*, workspace_id: int, job_id: uuid.UUID) -> BackgroundJob | None:
    """The job, now running, when this run should do it; None when it is finished, unknown, or given up."""
    with workspace_context(workspace_id):
        job = BackgroundJob.objects.select_for_update().filter(workspace_id=workspace_id, pk=job_id).first()
        if job is None or job.finished:
            return None
        if job.status == BackgroundJob.Status.RUNNING and job.attempts >= MAX_ATTEMPTS:
            # Running without its lock: every earlier run died with its worker (a timeout kills it too).
            logger.error("background job %s (%s) lost its worker %s times", job_id, job.kind, job.attempts)
            _finish(
                workspace_id=workspace_id,
                job_id=job_id,
                status=BackgroundJob.Status.FAILED,
                error_code="WORKER_LOST",
                error_class="internal_error",
            )
            return None
        now = timezone.now()
        job.status, job.attempts, job.updated_at = BackgroundJob.Status.RUNNING, job.attempts + 1, now
        job.started_at = job.started_at or now
        job.save(update_fields=["status", "attempts", "started_at", "updated_at"])
        return job


def job_run(*, workspace_id: int, job_id: str | uuid.UUID) -> str:
    """Run one job (the django-q2 task calls this); returns the status it ended in, or why it did nothing."""
    try:
        parsed = uuid.UUID(str(job_id))
    except ValueError:
        return "unknown"
    if not _try_lock(parsed):
        # Another worker runs it; come back later in case that worker dies.
        with transaction.atomic(using="app"):
            _push(workspace_id=workspace_id, job_id=parsed, delay_seconds=settings.Q_CLUSTER["retry"])
        return "running elsewhere"
    try:
        job = _claim(workspace_id=workspace_id, job_id=parsed)
        if job is None:
            return "finished"
        return _execute(job)
    finally:
        _unlock(parsed)


def _execute(job: BackgroundJob) -> str:
    kind = _KINDS.get(job.kind)
    run = JobRun(id=job.id, workspace_id=job.workspace_id, kind=job.kind, params=dict(job.params or {}))
    failed = BackgroundJob.Status.FAILED
    try:
        if kind is None:
            raise ApiError(500, "JOB_KIND_UNKNOWN", f"This server cannot run jobs of kind {job.kind!r}.")
        result = kind.run(run)
    except ApiError as exc:
        if exc.status >= 500:
            logger.error("background job %s (%s) failed: %s", job.id, job.kind, exc.code)
        details = {"message": exc.message, **(exc.details or {})}
        _finish(
            workspace_id=job.workspace_id,
            job_id=job.id,
            status=failed,
            error_code=exc.code,
            error_class=exc.error_type,
            error_details=details,
            progress=run.latest,
        )
        return failed
    except Exception as exc:  # noqa: BLE001 - every failure ends the job; its text stays in the log
        logger.exception("background job %s (%s) failed", job.id, job.kind)
        _finish(
            workspace_id=job.workspace_id,
            job_id=job.id,
            status=failed,
            error_code="JOB_FAILED",
            error_class=type(exc).__name__[:64],
            progress=run.latest,
        )
        return failed
    finally:
        run._writer.close()
    _finish(
        workspace_id=job.workspace_id,
        job_id=job.id,
        status=BackgroundJob.Status.SUCCEEDED,
        result=result,
        progress=run.latest,
    )
    return BackgroundJob.Status.SUCCEEDED


def jobs_sweep() -> int:
    """The hourly upkeep of every kind that registered a sweep (old files); returns what they removed."""
    removed = 0
    for name, kind in sorted(_KINDS.items()):
        if kind.sweep is None:
            continue
        try:
            removed += kind.sweep()
        except Exception:  # noqa: BLE001 - one kind's upkeep must not stop the others'
            logger.exception("sweep of background job kind %s failed", name)
    return removed

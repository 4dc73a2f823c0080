"""Reads of background jobs (pipeline.models.BackgroundJob); callers run inside
tenancy.rls.workspace_context."""

from __future__ import annotations

import uuid
from typing import Any

from pipeline.models import BackgroundJob

JOBS_LIST_MAX = 100


def job_get(*, workspace_id: int, job_id: str) -> BackgroundJob | None:
    """The job, when it is one of this workspace's; None for a malformed id or another workspace's job."""
    try:
        parsed = uuid.UUID(job_id)
    except ValueError:
        return None
    return BackgroundJob.objects.filter(workspace_id=workspace_id, pk=parsed).first()


def jobs_list(*, workspace_id: int, kind: str | None = None, limit: int = 20) -> list[BackgroundJob]:
    """Newest first, at most JOBS_LIST_MAX."""
    queryset = BackgroundJob.objects.filter(workspace_id=workspace_id)
    if kind:
        queryset = queryset.filter(kind=kind)
    return list(queryset.order_by("-created_at", "-id")[: max(1, min(limit, JOBS_LIST_MAX))])


def job_payload(job: BackgroundJob) -> dict[str, Any]:
    """What jobs/status and jobs/list show of a job (JobOut): its code and class when it failed, and the
    message only when Cairn wrote it for the caller (a refused import line), never an exception's text."""
    error = None
    if job.status == BackgroundJob.Status.FAILED:
        details = dict(job.error_details or {})
        message = details.pop("message", None)
        error = {
            "code": job.error_code or "JOB_FAILED",
            "errorClass": job.error_class or "internal_error",
            "message": message if isinstance(message, str) else None,
            "details": details or None,
        }
    return {
        "id": str(job.id),
        "kind": job.kind,
        "status": job.status,
        "phase": job.phase or None,
        "done": job.done,
        "total": job.total,
        "result": job.result,
        "error": error,
        "createdAt": job.created_at,
        "startedAt": job.started_at,
        "finishedAt": job.finished_at,
    }

"""SDK routes jobs/status and jobs/list: how far a background job (import, export, …) got, in the caller's
workspace only."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router

from config.errors import ApiError, success_envelope
from config.schemas import Envelope
from pipeline import selectors
from pipeline.schemas import JobListIn, JobListOut, JobOut, JobStatusIn
from tenancy.access import request_workspace_id
from tenancy.auth import SdkKeyAuth
from tenancy.policy import READ, requires
from tenancy.rls import workspace_context

router = Router(tags=["jobs"], auth=SdkKeyAuth())


@router.post(
    "/jobs/status",
    response=Envelope[JobOut],
    summary="A background job's status, progress and result",
    description="Poll this with the jobId of a 202 answer (workspace/import, workspace/export): status "
    "queued, running (with phase, done and total), succeeded (with result) or failed (with the error's code "
    "and class). A job of another workspace is 404 JOB_NOT_FOUND.",
)
@requires(READ)
def jobs_status(request: HttpRequest, payload: JobStatusIn) -> dict[str, Any]:
    workspace_id = request_workspace_id(request, payload.scope)
    with workspace_context(workspace_id):
        job = selectors.job_get(workspace_id=workspace_id, job_id=payload.id)
        if job is None:
            raise ApiError(
                404, "JOB_NOT_FOUND", "No such job in this workspace; pass the jobId a 202 answer gave."
            )
        data = selectors.job_payload(job)
    return success_envelope(request, data)


@router.post(
    "/jobs/list",
    response=Envelope[JobListOut],
    summary="The workspace's background jobs, newest first",
)
@requires(READ)
def jobs_list(request: HttpRequest, payload: JobListIn) -> dict[str, Any]:
    workspace_id = request_workspace_id(request, payload.scope)
    with workspace_context(workspace_id):
        jobs = [
            selectors.job_payload(job)
            for job in selectors.jobs_list(workspace_id=workspace_id, kind=payload.kind, limit=payload.limit)
        ]
    return success_envelope(request, {"jobs": jobs, "count": len(jobs)})

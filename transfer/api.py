"""SDK routes of transfer: workspace export and import as background jobs (202 with a jobId, followed with
jobs/status), and the download of a finished export."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, StreamingHttpResponse
from ninja import Query, Router, Status

from config.errors import ApiError, success_envelope
from config.schemas import Envelope
from pipeline import background
from pipeline import selectors as job_selectors
from pipeline.models import BackgroundJob
from pipeline.schemas import JobAcceptedOut
from tenancy.access import request_workspace_id
from tenancy.auth import SdkCaller, SdkKeyAuth
from tenancy.policy import ADMIN, requires
from tenancy.rls import workspace_context
from transfer import jobs
from transfer.schemas import ExportDownloadIn, ExportIn, ImportQuery

router = Router(tags=["workspace"], auth=SdkKeyAuth())

NDJSON = "application/x-ndjson"


def _caller_label(request: HttpRequest) -> str:
    caller: SdkCaller = request.auth  # type: ignore[attr-defined]
    return f"user:{caller.user.pk}"


def _accepted(request: HttpRequest, job: BackgroundJob) -> Status[dict[str, Any]]:
    return Status(
        202, success_envelope(request, {"jobId": str(job.id), "job": job_selectors.job_payload(job)})
    )


@router.post(
    "/workspace/export",
    response={202: Envelope[JobAcceptedOut]},
    summary="Export the workspace as versioned JSON Lines (a background job)",
    description="Queues the export and answers 202 with a jobId. A worker writes the workspace — memories, "
    "optional vectors, graph nodes, edges, fact evidence, memory links, entity aliases, "
    "communities, rollout, graph and memory settings — as one JSON object per line: a header "
    "(format, version) first, a trailer with per-kind counts last. Follow it with jobs/status "
    "(progress by line); once it succeeded, fetch the file with workspace/export/download within "
    "EXPORT_RETENTION_HOURS.",
)
@requires(ADMIN)
def workspace_export(request: HttpRequest, payload: ExportIn) -> Status[dict[str, Any]]:
    workspace_id = request_workspace_id(request, payload.scope)
    with workspace_context(workspace_id):
        job = background.job_create(
            workspace_id=workspace_id,
            kind=jobs.EXPORT_KIND,
            params={"includeEmbeddings": payload.includeEmbeddings},
            created_by=_caller_label(request),
        )
    return _accepted(request, job)


@router.post(
    "/workspace/export/download",
    response={200: None},
    summary="Download a finished export (JSON Lines)",
    description="Streams the file of a succeeded workspace/export job. 409 EXPORT_NOT_READY while the job "
    "is queued or running, 410 EXPORT_EXPIRED once the file was deleted (EXPORT_RETENTION_HOURS), 404 "
    "JOB_NOT_FOUND for a job that is not an export of this workspace.",
    openapi_extra={
        "responses": {200: {"description": "JSON Lines", "content": {NDJSON: {"schema": {"type": "string"}}}}}
    },
)
@requires(ADMIN)
def workspace_export_download(request: HttpRequest, payload: ExportDownloadIn) -> StreamingHttpResponse:
    workspace_id = request_workspace_id(request, payload.scope)
    with workspace_context(workspace_id):
        job = job_selectors.job_get(workspace_id=workspace_id, job_id=payload.id)
    if job is None or job.kind != jobs.EXPORT_KIND:
        raise ApiError(404, "JOB_NOT_FOUND", "No export job with this id in this workspace.")
    if job.status != BackgroundJob.Status.SUCCEEDED:
        raise ApiError(
            409,
            "EXPORT_NOT_READY",
            f"The export is {job.status}; download it once jobs/status says succeeded.",
            details={"status": job.status},
            retryable=job.status in (BackgroundJob.Status.QUEUED, BackgroundJob.Status.RUNNING),
        )
    path = jobs.export_file(workspace_id=workspace_id, job_id=job.id)
    if path is None:
        raise ApiError(
            410,
            "EXPORT_EXPIRED",
            "This export's file was deleted (kept EXPORT_RETENTION_HOURS); run workspace/export again.",
            error_type="not_found_error",
        )
    response = StreamingHttpResponse(jobs.export_chunks(path), content_type=NDJSON)
    response["Content-Disposition"] = f'attachment; filename="cairn-workspace-{workspace_id}.jsonl"'
    response["Content-Length"] = str(path.stat().st_size)
    return response


@router.post(
    "/workspace/import",
    response={202: Envelope[JobAcceptedOut]},
    summary="Import a workspace export (JSON Lines body) into the scope's workspace (a background job)",
    description="Send the file as the body with Content-Type application/x-ndjson, up to "
    "EXPORT_IMPORT_MAX_UPLOAD_BYTES (50 MB; use `manage.py workspace_import` for more). The body is"
    " stored and the answer is 202 with a jobId; a worker imports the file in one transaction. Ids "
    "are remapped, rows that exist are skipped (importing twice changes nothing), every record is "
    "checked by the rules of the API, and a bad line fails the whole job with IMPORT_FILE_INVALID "
    "naming the line and the field (jobs/status); nothing is half-imported. A body that is not an "
    "export at all is refused at once (422).",
    openapi_extra={"requestBody": {"required": True, "content": {NDJSON: {"schema": {"type": "string"}}}}},
)
@requires(ADMIN)
def workspace_import(request: HttpRequest, query: Query[ImportQuery]) -> Status[dict[str, Any]]:
    workspace_id = request_workspace_id(request, query.scope())
    if request.content_type != NDJSON:
        raise ApiError(415, "UNSUPPORTED_MEDIA_TYPE", f"Send the export file with Content-Type: {NDJSON}.")
    # Streamed to disk: the file may be larger than the API's in-memory body limit.
    upload = jobs.upload_receive(stream=request)  # type: ignore[arg-type]
    try:
        with workspace_context(workspace_id):
            job = background.job_create(
                workspace_id=workspace_id,
                kind=jobs.IMPORT_KIND,
                params={"file": upload.name, "bytes": upload.size, "lines": upload.lines},
                created_by=_caller_label(request),
                total=upload.lines,
            )
    except BaseException:
        jobs.upload_discard(upload)
        raise
    return _accepted(request, job)

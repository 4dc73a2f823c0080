"""Import and export through the SDK API as a client sees them: 202 with a jobId, the job run by the real task
function (as a worker takes it from the broker), then jobs/status and the download."""

from __future__ import annotations

import json
from typing import Any

from django_q.models import OrmQ
from django_q.signing import SignedPackage

from pipeline import tasks
from tests.conftest import API, SdkClient

NDJSON = "application/x-ndjson"


def run_queued_jobs() -> int:
    """Run every queued background-job message, as a worker would, and take it off the queue."""
    ran = 0
    for message in OrmQ.objects.using("app").order_by("id"):
        task = SignedPackage.loads(message.payload)
        if task["func"] != "pipeline.tasks.background_job_run":
            continue
        message.delete()
        tasks.background_job_run(*task["args"])
        ran += 1
    return ran


def _scope_of(query: str) -> dict[str, str]:
    pairs = [part.split("=", 1) for part in query.lstrip("?").split("&") if "=" in part]
    return {key: value for key, value in pairs if key in {"tenantId", "projectId"}}


def job_status(api: SdkClient, job_id: str, scope: dict[str, Any] | None = None) -> dict[str, Any]:
    return api.ok("jobs/status", {"id": job_id, "scope": scope or {}})


def import_post(api: SdkClient, lines: list[dict[str, Any]] | bytes, *, query: str = "") -> Any:
    body = lines if isinstance(lines, bytes) else "".join(json.dumps(line) + "\n" for line in lines).encode()
    return api.client.post(
        f"{API}/workspace/import{query}",
        data=body,
        content_type=NDJSON,
        HTTP_AUTHORIZATION=f"Bearer {api.key}",
    )


def import_job(api: SdkClient, lines: list[dict[str, Any]] | bytes, *, query: str = "") -> dict[str, Any]:
    """Upload, run the job, and answer its final status (succeeded with the report as result, or failed)."""
    response = import_post(api, lines, query=query)
    assert response.status_code == 202, response.content
    job_id = response.json()["data"]["jobId"]
    assert run_queued_jobs() >= 1
    return job_status(api, job_id, _scope_of(query))


def import_report(api: SdkClient, lines: list[dict[str, Any]] | bytes, *, query: str = "") -> dict[str, Any]:
    job = import_job(api, lines, query=query)
    assert job["status"] == "succeeded", job["error"]
    return job["result"]


def export_lines(api: SdkClient, **body: Any) -> list[dict[str, Any]]:
    response = api.post("workspace/export", body)
    assert response.status_code == 202, response.content
    job_id = response.json()["data"]["jobId"]
    run_queued_jobs()
    scope = body.get("scope") or {}
    job = job_status(api, job_id, scope)
    assert job["status"] == "succeeded", job["error"]
    download = api.post("workspace/export/download", {"id": job_id, "scope": scope})
    assert download.status_code == 200, download.content
    assert download["Content-Type"] == NDJSON
    content = b"".join(download.streaming_content)
    assert len(content) == job["result"]["bytes"]
    return [json.loads(line) for line in content.splitlines()]

"""In/Out schemas of the background-job routes jobs/status and jobs/list."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from config.schemas import ApiDateTime, ScopeIn, StrictIn, Trimmed, scope_field


class JobErrorOut(BaseModel):
    code: str = Field(description="Stable code, e.g. IMPORT_FILE_INVALID, WORKER_LOST or JOB_FAILED.")
    errorClass: str = Field(
        description="validation_error, internal_error, … or the class of an unexpected exception (its text "
        "stays in the server log)."
    )
    message: str | None = Field(
        description="What to fix, when the failure is one the caller can fix (e.g. the import line)."
    )
    details: dict[str, Any] | None = Field(description="Facts about the failure, e.g. line and field.")


class JobOut(BaseModel):
    id: str = Field(description="Job id: follow it with jobs/status.")
    kind: str = Field(description="workspace_import, workspace_export, …")
    status: Literal["queued", "running", "succeeded", "failed"] = Field(
        description="queued → running → succeeded or failed."
    )
    phase: str | None = Field(description="What the job is doing now, e.g. memories or writing.")
    done: int = Field(description="Units done so far (lines for import and export).")
    total: int | None = Field(description="Units in all, when known.")
    result: dict[str, Any] | None = Field(
        description="What the job produced once it succeeded (import: created/skipped counts; export: lines "
        "and bytes of the file to download)."
    )
    error: JobErrorOut | None = Field(description="Why it failed; null unless status is failed.")
    createdAt: ApiDateTime = Field(description="When it was queued.")
    startedAt: ApiDateTime | None = Field(description="When a worker started it.")
    finishedAt: ApiDateTime | None = Field(description="When it succeeded or failed.")


class JobAcceptedOut(BaseModel):
    jobId: str = Field(description="Follow the job with jobs/status {id: jobId}.")
    job: JobOut = Field(description="The job as queued.")


class JobStatusIn(StrictIn):
    id: Annotated[str, Trimmed(64)] = Field(description="The jobId a 202 answer gave.")
    scope: ScopeIn = scope_field()


class JobListIn(StrictIn):
    kind: Annotated[str, Trimmed(32)] | None = Field(None, description="Only jobs of this kind.")
    limit: int = Field(20, ge=1, le=100, description="How many, newest first, 1–100 (default 20).")
    scope: ScopeIn = scope_field()


class JobListOut(BaseModel):
    jobs: list[JobOut] = Field(description="Newest first.")
    count: int = Field(description="Jobs listed.")

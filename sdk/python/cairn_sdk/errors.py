"""Typed exceptions. Every error the server answers carries the envelope's code, message and requestId."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cairn_sdk.models import Job


class CairnError(Exception):
    """Base class of everything this package raises."""


class ConfigurationError(CairnError):
    """The client cannot be built as asked (no API key, a malformed base URL)."""


class APIConnectionError(CairnError):
    """The server could not be reached, or did not answer in time, after every retry."""


class APITimeoutError(APIConnectionError):
    """The server did not answer within the client's timeout, after every retry."""


class APIError(CairnError):
    """The server answered with an error envelope (or, behind a proxy, with a bare HTTP error)."""

    def __init__(
        self,
        *,
        status: int,
        code: str,
        message: str,
        request_id: str | None = None,
        type: str | None = None,
        retryable: bool = False,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(
            f"{code} ({status}): {message}" + (f" [requestId {request_id}]" if request_id else "")
        )
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id
        self.type = type
        self.retryable = retryable
        self.details = details or {}
        self.headers = headers or {}


class BadRequestError(APIError):
    """400, 405, 410, 413, 415, 422: the request must change (details["issues"] names the fields); 410 is
    EXPORT_EXPIRED."""


class AuthenticationError(APIError):
    """401: missing, malformed, unknown, revoked or expired API key."""


class PermissionDeniedError(APIError):
    """403: FORBIDDEN_ROLE (details["requiredRole"], details["heldRole"]) or KEY_PINNED."""


class NotFoundError(APIError):
    """404: e.g. MEMORY_NOT_FOUND (also for anything outside your scope), TENANT_NOT_FOUND,
    ENTITY_NOT_FOUND (details["closest"]), MERGE_NOT_FOUND, KEY_NOT_FOUND or JOB_NOT_FOUND."""


class ConflictError(APIError):
    """409: e.g. CANARY_ROLLOUT_BLOCKED, TENANT_LIMIT_REACHED, KEY_LIMIT_REACHED, EXPORT_NOT_READY,
    LLM_NOT_CONFIGURED, ENTITY_EXISTS, MERGE_NOT_UNDOABLE."""


class RateLimitError(APIError):
    """429 after every retry; retry_after is the server's Retry-After in seconds."""

    @property
    def retry_after(self) -> float | None:
        value = self.details.get("retryAfterSeconds")
        return float(value) if isinstance(value, int | float) else None


class ServerError(APIError):
    """5xx after every retry."""


def error_class(status: int) -> type[APIError]:
    if status == 401:
        return AuthenticationError
    if status == 403:
        return PermissionDeniedError
    if status == 404:
        return NotFoundError
    if status == 409:
        return ConflictError
    if status == 429:
        return RateLimitError
    if status >= 500:
        return ServerError
    if status >= 400:
        return BadRequestError
    return APIError


class JobFailedError(CairnError):
    """A background job (an import, an export, a community refresh, a backfill) ended in failure.

    `code` and `error_class` are the job's error (e.g. IMPORT_FILE_INVALID and validation_error; WORKER_LOST;
    JOB_FAILED with the class of an unexpected exception, whose text stays in the server's log). For a failure
    the caller can fix, `message` and `details` say what (an import's bad line: details["line"] and
    details["field"]). `job` is the failed job as jobs.status answered it."""

    def __init__(self, job: Job) -> None:
        error = job.error
        self.job = job
        self.job_id = job.id
        self.kind = job.kind
        self.code = error.code if error is not None else "JOB_FAILED"
        self.error_class = error.error_class if error is not None else "internal_error"
        self.message = (error.message if error is not None else None) or ""
        self.details: dict[str, Any] = (error.details if error is not None else None) or {}
        super().__init__(
            f"{self.code} ({self.error_class}): the {self.kind} job {self.job_id} failed"
            + (f": {self.message}" if self.message else ".")
        )


class JobTimeoutError(CairnError, TimeoutError):
    """A background job did not finish within the time the caller waited. The job goes on: wait again with
    jobs.wait(e.job_id) (or read jobs.status); `job` is its last status seen."""

    def __init__(self, job: Job, *, timeout: float) -> None:
        self.job = job
        self.job_id = job.id
        self.kind = job.kind
        self.timeout = timeout
        progress = f"{job.done} of {job.total}" if job.total is not None else f"{job.done} done"
        where = f"{job.phase}, {progress}" if job.phase else progress
        super().__init__(
            f"The {job.kind} job {job.id} is still {job.status} after {timeout:g} s ({where}); it goes on: "
            f"wait again with jobs.wait({job.id!r})."
        )

"""What the sync and async clients share: configuration, request building, retries, response parsing."""

from __future__ import annotations

import json
import os
import random
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote, urlsplit

import httpx
from pydantic import BaseModel, ValidationError

from cairn_sdk import errors
from cairn_sdk.models import ImportReport, Job, RequestModel, Scope
from cairn_sdk.operations import OPERATIONS, Operation

__version__ = "0.1.0"

DEFAULT_BASE_URL = "http://127.0.0.1:8000"
API_PREFIX = "/api/sdk/v1"
DEFAULT_TIMEOUT = 30.0
USER_AGENT = f"cairn-sdk-python/{__version__}"
NDJSON = "application/x-ndjson"
# Waiting for a background job (jobs.wait, and the workspace helpers built on it): how long in all, and how
# often to ask. The server writes a job's progress at most once a second, so polling faster shows nothing new.
DEFAULT_JOB_TIMEOUT = 600.0
DEFAULT_POLL_INTERVAL = 1.0
FIRST_POLL_DELAY = 0.2


class _Unset:
    """Marks an argument the caller did not give, where None means something (edit's metadata=None clears)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


@dataclass(frozen=True)
class RetryPolicy:
    """Retries on 429 (waiting what Retry-After says), on 5xx and on network failures, with capped backoff.

    A Retry-After longer than max_retry_after is not waited for: the RateLimitError is raised at once so the
    caller can decide (a 60 s stall inside an agent turn is rarely what anyone wants).
    """

    max_retries: int = 3
    backoff_base: float = 0.5
    backoff_max: float = 8.0
    max_retry_after: float = 60.0

    def backoff(self, attempt: int) -> float:
        # Half fixed, half random: spreads clients that failed together without ever retrying at once.
        ceiling = min(self.backoff_max, self.backoff_base * (2**attempt))
        return ceiling / 2 + random.uniform(0, ceiling / 2)


def resolve_api_key(api_key: str | None) -> str:
    key = (api_key or os.environ.get("CAIRN_API_KEY", "")).strip()
    if not key:
        raise errors.ConfigurationError(
            "No API key: pass api_key=... or set CAIRN_API_KEY (create one with `manage.py apikey_create`)."
        )
    return key


def resolve_base_url(base_url: str | None) -> str:
    url = (base_url or os.environ.get("CAIRN_BASE_URL", "") or DEFAULT_BASE_URL).strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        raise errors.ConfigurationError(
            f"CAIRN_BASE_URL must be an http(s) URL such as {DEFAULT_BASE_URL}, got {url!r}."
        )
    if not url.endswith(API_PREFIX):
        url += API_PREFIX
    return url


def coerce_scope(scope: Scope | Mapping[str, Any] | None) -> Scope | None:
    if scope is None or isinstance(scope, Scope):
        return scope
    return Scope.model_validate(dict(scope))


def drop_none(**fields: Any) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if value is not None}


@dataclass(frozen=True)
class PreparedRequest:
    operation: Operation
    method: str
    path: str
    headers: dict[str, str]
    json: dict[str, Any] | None
    params: dict[str, Any] | None


def prepare(
    operation_name: str,
    request: RequestModel | None,
    *,
    default_scope: Scope | None,
    idempotency_key: str | None = None,
) -> PreparedRequest:
    operation = OPERATIONS[operation_name]
    body: dict[str, Any] | None = None
    params: dict[str, Any] | None = None
    if request is not None:
        body = request.to_wire()
        if operation.query_params:
            # The caller resolved the scope into the flat fields already (see Graph.rollout).
            params = {name: value for name, value in body.items() if value is not None}
            body = None
        elif "scope" in type(request).model_fields and "scope" not in body and default_scope is not None:
            body["scope"] = default_scope.to_wire()
    headers = {"X-Request-Id": uuid.uuid4().hex}
    if operation.request_body == "ndjson":
        headers["Content-Type"] = NDJSON
    if operation.response_body == "ndjson":
        headers["Accept"] = f"{NDJSON}, application/json"  # JSON still carries the errors
    if idempotency_key is not None:
        headers["Idempotency-Key"] = idempotency_key
    path = operation.path
    if "{" in path and params is not None:
        # A path parameter ({session_id}) is one of the request model's fields: it leaves the query string.
        for name in [name for name in params if "{" + name + "}" in path]:
            path = path.replace("{" + name + "}", quote(str(params.pop(name)), safe=""))
    return PreparedRequest(operation, operation.method, path, headers, body, params)


def new_idempotency_key() -> str:
    return str(uuid.uuid4())


def _retry_after_seconds(response: httpx.Response) -> float | None:
    raw = response.headers.get("Retry-After")
    if raw:
        raw = raw.strip()
        try:
            return max(0.0, float(raw))
        except ValueError:
            try:
                when = parsedate_to_datetime(raw)
            except (TypeError, ValueError):
                when = None
            if when is not None:
                if when.tzinfo is None:
                    when = when.replace(tzinfo=UTC)
                return max(0.0, (when - datetime.now(UTC)).total_seconds())
    try:
        details = response.json()["error"]["details"]
        return float(details["retryAfterSeconds"])
    except (ValueError, KeyError, TypeError):
        return None


def retry_delay(response: httpx.Response, *, attempt: int, policy: RetryPolicy) -> float | None:
    """Seconds to wait before trying again, or None when this answer is final."""
    status = response.status_code
    if attempt >= policy.max_retries or not (status == 429 or status == 408 or status >= 500):
        return None
    hinted = _retry_after_seconds(response) if status in (429, 503) else None
    if hinted is None:
        return policy.backoff(attempt)
    if hinted > policy.max_retry_after:
        return None
    return hinted


def connection_retry_delay(*, attempt: int, policy: RetryPolicy) -> float | None:
    return policy.backoff(attempt) if attempt < policy.max_retries else None


def connection_error(exc: httpx.HTTPError, *, url: str) -> errors.APIConnectionError:
    if isinstance(exc, httpx.TimeoutException):
        return errors.APITimeoutError(f"No answer from {url} within the timeout ({type(exc).__name__}).")
    return errors.APIConnectionError(f"Could not reach {url}: {exc}")


def parse_response(operation: Operation, response: httpx.Response) -> BaseModel:
    try:
        body = response.json()
    except ValueError:
        body = None
    envelope = body if isinstance(body, dict) and "ok" in body and "meta" in body else None
    request_id = response.headers.get("X-Request-Id")
    if envelope is not None:
        request_id = (envelope.get("meta") or {}).get("requestId") or request_id
    status = response.status_code

    if 200 <= status < 300:
        if envelope is None or envelope.get("ok") is not True:
            raise errors.APIError(
                status=status,
                code="INVALID_RESPONSE",
                message=(
                    f"Expected the Cairn envelope from {operation.path}; is CAIRN_BASE_URL pointing at Cairn?"
                ),
                request_id=request_id,
            )
        try:
            return operation.response_for(status).model_validate(envelope.get("data"))
        except ValidationError as exc:
            raise errors.APIError(
                status=status,
                code="INVALID_RESPONSE",
                message=f"The answer of {operation.path} does not match this SDK's model: {exc}",
                request_id=request_id,
            ) from exc

    error = envelope.get("error") if envelope is not None else None
    cls = errors.error_class(status)
    if isinstance(error, dict) and "code" in error:
        raise cls(
            status=status,
            code=str(error["code"]),
            message=str(error.get("message", "")),
            request_id=request_id,
            type=error.get("type"),
            retryable=bool(error.get("retryable", status >= 500 or status == 429)),
            details=error.get("details") if isinstance(error.get("details"), dict) else None,
            headers=dict(response.headers),
        )
    text = response.text.strip()
    raise cls(
        status=status,
        code=f"HTTP_{status}",
        message=(text[:300] if text else response.reason_phrase) or f"HTTP {status}",
        request_id=request_id,
        retryable=status >= 500 or status == 429,
        headers=dict(response.headers),
    )


def client_headers(api_key: str, extra: Mapping[str, str] | None) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {api_key}",
        "User-Agent": USER_AGENT,
        "Accept": "application/json",
        **(extra or {}),
    }


# --- workspace export / import ------------------------------------------------------------------------------

# What workspace.import_ takes: the file's bytes, a path to it, or the records (e.g. straight from export()).
ImportSource = bytes | bytearray | memoryview | str | os.PathLike[str] | Iterable[Mapping[str, Any]]


def import_body(source: ImportSource) -> bytes | Path:
    """The body to send, in a form every retry can send again: bytes, or a path reopened for each attempt.

    Records are serialised once up front: an iterator (such as a running export) could not be replayed, and
    the server caps the body (EXPORT_IMPORT_MAX_UPLOAD_BYTES, 50 MB) anyway.
    """
    if isinstance(source, bytes | bytearray | memoryview):
        return bytes(source)
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(
                f"No export file at {path}; pass the file's bytes or records to send data."
            )
        return path
    return b"".join(
        (json.dumps(dict(record), separators=(",", ":"), ensure_ascii=False) + "\n").encode()
        for record in source
    )


class LineSplitter:
    """Cuts a byte stream into JSON Lines at b"\\n" only.

    httpx's iter_lines follows str.splitlines, which also breaks at U+2028, U+0085 and lone CRs:
    characters the server writes unescaped inside JSON strings (ensure_ascii=False), so a memory holding
    one would be cut in two.
    """

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, chunk: bytes) -> Iterator[bytes]:
        self._pending += chunk
        *lines, self._pending = self._pending.split(b"\n")
        return (line for line in lines if line.strip())

    def rest(self) -> bytes:
        """What came after the last newline (nothing, in a complete stream)."""
        return self._pending.strip()


def check_export_response(operation: Operation, response: httpx.Response) -> None:
    """Raise the typed error of a failed export (its body is the envelope), or refuse an answer that is
    no export."""
    if not 200 <= response.status_code < 300:
        parse_response(operation, response)  # raises
    media_type = response.headers.get("Content-Type", "").split(";")[0].strip()
    if media_type != NDJSON:
        raise errors.APIError(
            status=response.status_code,
            code="INVALID_RESPONSE",
            message=f"Expected {NDJSON} from {operation.path}, got {media_type or 'no Content-Type'}; is "
            "CAIRN_BASE_URL pointing at Cairn?",
            request_id=response.headers.get("X-Request-Id"),
        )


def export_record(line: bytes, *, request_id: str | None) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except ValueError as exc:
        raise errors.APIError(
            status=200,
            code="INVALID_RESPONSE",
            message=f"An export line is not JSON: {exc}",
            request_id=request_id,
        ) from exc
    if not isinstance(record, dict) or "kind" not in record:
        raise errors.APIError(
            status=200,
            code="INVALID_RESPONSE",
            message="An export line has no record kind.",
            request_id=request_id,
        )
    return record


def export_cut_short(url: str) -> errors.APIConnectionError:
    # The trailer is the last line by contract; a stream that ends without it lost its end on the way.
    return errors.APIConnectionError(
        f"The export from {url} ended before its trailer line: the stream was cut. Export again."
    )


# --- background jobs ----------------------------------------------------------------------------------------


class JobPoll:
    """When to ask for a job's status again: after FIRST_POLL_DELAY, doubling up to `poll_interval`, so a job
    of a second is seen done at once and a long one costs a request per interval; never past the deadline."""

    def __init__(self, *, timeout: float | None, poll_interval: float) -> None:
        if not poll_interval > 0:
            raise ValueError(f"poll_interval must be a positive number of seconds, got {poll_interval!r}")
        if timeout is not None and not timeout >= 0:
            raise ValueError(f"timeout must be None (no limit) or seconds >= 0, got {timeout!r}")
        self.timeout = timeout
        self.poll_interval = poll_interval
        self._delay = min(FIRST_POLL_DELAY, poll_interval)
        self._deadline = None if timeout is None else time.monotonic() + timeout

    def next_delay(self, job: Job) -> float:
        """Seconds to sleep before the next jobs.status; raises JobTimeoutError once the time is up."""
        delay, self._delay = self._delay, min(self._delay * 2, self.poll_interval)
        if self._deadline is None:
            return delay
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise errors.JobTimeoutError(job, timeout=self.timeout or 0.0)
        return min(delay, remaining)


def job_finished(job: Job) -> bool:
    """True once the job succeeded; False while it is queued or running. A failed job raises JobFailedError
    with its error's code and class."""
    if job.status == "failed":
        raise errors.JobFailedError(job)
    return job.status == "succeeded"


def import_report(job: Job) -> ImportReport:
    """The report of a succeeded workspace_import job, from its result."""
    try:
        return ImportReport.model_validate(job.result or {})
    except ValidationError as exc:
        raise errors.APIError(
            status=200,
            code="INVALID_RESPONSE",
            message=f"The result of the import job {job.id} does not match this SDK's ImportReport: {exc}",
        ) from exc


def job_scope(scope: Scope | None, default: Scope | None) -> Scope | None:
    """The scope to follow a job in: the workspace the starting call resolved to. Only tenant_id and
    project_id choose a workspace; user_id is dropped so jobs.status answers wherever the job was started."""
    chosen = scope or default
    if chosen is None:
        return None
    return Scope(**drop_none(tenant_id=chosen.tenant_id, project_id=chosen.project_id))


# --- workspace export download targets ---------------------------------------------------------------------

# Where workspace.export_to / download_export write the file: a path (written under <path>.part, renamed when
# complete) or a binary file object the caller opened (written as it arrives).
ExportTarget = str | os.PathLike[str] | IO[bytes]


class ExportWriter:
    """Writes the lines of a download to its target and keeps the trailer's counts. A path is written under
    `<path>.part` and renamed only once the whole file arrived, so a download that breaks off leaves no file
    behind; a file object gets the lines as they arrive (what it holds after an error is the caller's)."""

    def __init__(self, target: ExportTarget) -> None:
        self._path: Path | None = None
        self._partial: Path | None = None
        self._out: IO[bytes] | None = None
        if isinstance(target, str | os.PathLike):
            self._path = Path(target)
            self._partial = self._path.with_name(self._path.name + ".part")
        else:
            self._out = target
        self.counts: dict[str, int] = {}

    def __enter__(self) -> ExportWriter:
        if self._partial is not None:
            self._out = self._partial.open("wb")
        return self

    def write(self, raw: bytes, record: Mapping[str, Any]) -> None:
        assert self._out is not None
        self._out.write(raw + b"\n")
        if record["kind"] == "trailer":
            self.counts = dict(record.get("counts") or {})

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if self._partial is None or self._path is None or self._out is None:
            return
        try:
            self._out.close()
            if exc_type is None:
                self._partial.replace(self._path)
        finally:
            self._partial.unlink(missing_ok=True)

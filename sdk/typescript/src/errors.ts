import type { JobOut } from "./openapi.js";

/** Base class of everything this package throws. */
export class CairnError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** The client cannot be built as asked (no API key, a malformed base URL). */
export class ConfigurationError extends CairnError {}

/** The server could not be reached, or did not answer in time, after every retry. */
export class APIConnectionError extends CairnError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message);
    if (options?.cause !== undefined) (this as { cause?: unknown }).cause = options.cause;
  }
}

/** The server did not answer within the call's timeout, after every retry. */
export class APITimeoutError extends APIConnectionError {}

/** The caller's AbortSignal fired: the call stopped, and is not retried. */
export class APIUserAbortError extends CairnError {}

export interface APIErrorFields {
  status: number;
  code: string;
  message: string;
  requestId?: string | null;
  type?: string | null;
  retryable?: boolean;
  details?: Record<string, unknown> | null;
  headers?: Record<string, string>;
}

/** The server answered with an error envelope (or, behind a proxy, with a bare HTTP error). */
export class APIError extends CairnError {
  readonly status: number;
  /** The envelope's stable code, e.g. MEMORY_NOT_FOUND, or HTTP_<status> for an answer without envelope. */
  readonly code: string;
  readonly requestId: string | null;
  readonly type: string | null;
  readonly retryable: boolean;
  readonly details: Record<string, unknown>;
  readonly headers: Record<string, string>;
  /** The envelope's message alone (`message` also names the code, status and request id). */
  readonly reason: string;

  constructor(fields: APIErrorFields) {
    super(
      `${fields.code} (${fields.status}): ${fields.message}` +
        (fields.requestId ? ` [requestId ${fields.requestId}]` : ""),
    );
    this.status = fields.status;
    this.code = fields.code;
    this.reason = fields.message;
    this.requestId = fields.requestId ?? null;
    this.type = fields.type ?? null;
    this.retryable = fields.retryable ?? false;
    this.details = fields.details ?? {};
    this.headers = fields.headers ?? {};
  }
}

/** 400, 405, 410, 413, 415, 422: the request must change (details.issues names the fields). */
export class BadRequestError extends APIError {}
/** 401: missing, malformed, unknown, revoked or expired API key. */
export class AuthenticationError extends APIError {}
/** 403: FORBIDDEN_ROLE (details.requiredRole, details.heldRole) or KEY_PINNED. */
export class PermissionDeniedError extends APIError {}
/** 404: e.g. MEMORY_NOT_FOUND (also for anything outside your scope), TENANT_NOT_FOUND, JOB_NOT_FOUND. */
export class NotFoundError extends APIError {}
/** 409: e.g. KEY_LIMIT_REACHED, EXPORT_NOT_READY, LLM_NOT_CONFIGURED, MERGE_NOT_UNDOABLE. */
export class ConflictError extends APIError {}
/** 429 after every retry (or a Retry-After longer than the policy's maxRetryAfter). */
export class RateLimitError extends APIError {
  /** Seconds the server asked to wait, when it said. */
  get retryAfter(): number | null {
    const value = this.details.retryAfterSeconds;
    return typeof value === "number" ? value : null;
  }
}
/** 5xx after every retry. */
export class ServerError extends APIError {}

export function errorClass(status: number): typeof APIError {
  if (status === 401) return AuthenticationError;
  if (status === 403) return PermissionDeniedError;
  if (status === 404) return NotFoundError;
  if (status === 409) return ConflictError;
  if (status === 429) return RateLimitError;
  if (status >= 500) return ServerError;
  if (status >= 400) return BadRequestError;
  return APIError;
}

/** A background job (import, export, community refresh, backfill) ended in failure. */
export class JobFailedError extends CairnError {
  readonly job: JobOut;
  readonly jobId: string;
  readonly kind: string;
  /** The job's error code, e.g. IMPORT_FILE_INVALID or WORKER_LOST. */
  readonly code: string;
  readonly errorClass: string;
  readonly details: Record<string, unknown>;

  constructor(job: JobOut) {
    const code = job.error?.code ?? "JOB_FAILED";
    const errorClassName = job.error?.errorClass ?? "internal_error";
    const text = job.error?.message ?? "";
    super(`${code} (${errorClassName}): the ${job.kind} job ${job.id} failed${text ? `: ${text}` : "."}`);
    this.job = job;
    this.jobId = job.id;
    this.kind = job.kind;
    this.code = code;
    this.errorClass = errorClassName;
    this.details = job.error?.details ?? {};
  }
}

/** A background job did not finish within the time waited; it goes on (wait again with jobs.wait(jobId)). */
export class JobTimeoutError extends CairnError {
  readonly job: JobOut;
  readonly jobId: string;
  readonly timeout: number;

  constructor(job: JobOut, timeout: number) {
    super(
      `The ${job.kind} job ${job.id} is still ${job.status} after ${timeout} ms (${job.done} done); it goes on: ` +
        `wait again with jobs.wait("${job.id}").`,
    );
    this.job = job;
    this.jobId = job.id;
    this.timeout = timeout;
  }
}

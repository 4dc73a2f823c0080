import {
  APIConnectionError,
  APIError,
  APITimeoutError,
  APIUserAbortError,
  CairnError,
  ConfigurationError,
  JobFailedError,
  JobTimeoutError,
  errorClass,
} from "./errors.js";
import type * as api from "./openapi.js";
import type { Paths } from "./openapi.js";

export const VERSION = "0.1.0";
export const API_PREFIX = "/api/sdk/v1";
/** Where a self-hosted Cairn answers by default (`make run`); there is no hosted default. */
export const DEFAULT_BASE_URL = "http://127.0.0.1:8000";
const NDJSON = "application/x-ndjson";

type Method = "get" | "post" | "patch";
type PathOf<M extends Method> = { [P in keyof Paths]: M extends keyof Paths[P] ? P : never }[keyof Paths];
type Op<P extends keyof Paths, M extends keyof Paths[P]> = Paths[P][M] extends {
  request: infer Req;
  responses: infer Res;
}
  ? { request: Req; responses: Res }
  : never;
/** The request an operation takes (its JSON body, or its query string). */
export type RequestOf<P extends keyof Paths, M extends keyof Paths[P] = "post" & keyof Paths[P]> = Op<P, M>["request"];
/** The `data` of an operation's success envelope (any of its success statuses). */
export type ResponseOf<P extends keyof Paths, M extends keyof Paths[P] = "post" & keyof Paths[P]> =
  Op<P, M>["responses"][keyof Op<P, M>["responses"]];

export type Scope = api.ScopeIn;

export interface RetryPolicy {
  /** Retries after the first attempt (default 3). */
  maxRetries: number;
  /** First backoff in ms (default 500), doubling per attempt, with jitter. */
  backoffBase: number;
  /** Longest backoff in ms (default 8000). */
  backoffMax: number;
  /** A Retry-After longer than this (ms, default 60000) is not waited for: the RateLimitError is thrown. */
  maxRetryAfter: number;
}

export interface CairnOptions {
  /** Default: the CAIRN_API_KEY environment variable (Node, Deno, Bun). */
  apiKey?: string;
  /** Your Cairn server, e.g. http://127.0.0.1:8000 (`/api/sdk/v1` is appended). Default: CAIRN_BASE_URL, else
   * http://127.0.0.1:8000. */
  baseUrl?: string;
  /** Default scope of every call that takes one; a request's own `scope` replaces it. */
  scope?: Scope;
  /** Per attempt, in ms (default 30000). */
  timeout?: number;
  maxRetries?: number;
  retry?: Partial<RetryPolicy>;
  headers?: Record<string, string>;
  /** Another fetch (a proxy agent, a test double); default: the platform's. */
  fetch?: typeof fetch;
}

export interface RequestOptions {
  /** Aborts the call (and its retries); the promise rejects with APIUserAbortError. */
  signal?: AbortSignal;
  /** Per attempt, in ms; replaces the client's timeout for this call. */
  timeout?: number;
  /** Writes send one Idempotency-Key for every retry of the call: yours, or a fresh UUID. */
  idempotencyKey?: string;
  maxRetries?: number;
}

export interface WaitOptions extends RequestOptions {
  /** How long to wait for the job, in ms (default 600000; null: no limit). */
  waitTimeout?: number | null;
  /** Longest pause between two jobs/status calls, in ms (default 1000; the first polls come sooner). */
  pollInterval?: number;
}

/** One record of a workspace export file (header first, trailer with per-kind counts last). */
export type ExportRecord = { kind: string; [field: string]: unknown };

interface Envelope {
  ok: boolean;
  data: unknown;
  error: api.ErrorOut | null;
  // Read loosely: only the request id is used, and an error envelope from a proxy or an older server may lack
  // the rest.
  meta: { requestId?: unknown } | null;
}

const env = (name: string): string | undefined => {
  const process = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  return process?.env?.[name];
};

const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortError(signal));
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortError(signal!));
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });

const abortError = (signal: AbortSignal) =>
  new APIUserAbortError(`The call was aborted${signal.reason ? `: ${String(signal.reason)}` : "."}`);

const uuid = (): string => {
  const crypto = (globalThis as { crypto?: { randomUUID?: () => string } }).crypto;
  if (crypto?.randomUUID) return crypto.randomUUID();
  // Older runtimes: random enough for a retry key, not a secret.
  return "10000000-1000-4000-8000-100000000000".replace(/[018]/g, (c) =>
    (Number(c) ^ ((Math.random() * 16) >> (Number(c) / 4))).toString(16),
  );
};

function dropUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, field]) => field !== undefined)) as T;
}

/** Seconds the answer asks to wait: Retry-After (seconds or an HTTP date), else details.retryAfterSeconds. */
function retryAfterSeconds(response: Response, envelope: Envelope | null): number | null {
  const raw = response.headers.get("Retry-After")?.trim();
  if (raw) {
    const seconds = Number(raw);
    if (Number.isFinite(seconds)) return Math.max(0, seconds);
    const when = Date.parse(raw);
    if (!Number.isNaN(when)) return Math.max(0, (when - Date.now()) / 1000);
  }
  const hinted = envelope?.error?.details?.retryAfterSeconds;
  return typeof hinted === "number" ? hinted : null;
}

const WRITES = new Set([
  "memories/add",
  "memories/edit",
  "memories/forget",
  "memories/bulk-forget",
  "memories/vacuum",
  "memories/consolidate",
  "memories/resolve",
  "sessions/start",
  "sessions/checkpoint",
  "sessions/turns",
  "sessions/end",
  "skills/files/upsert",
  "skills/files/delete",
  "skills/files/promote",
  "graph/entities/merge",
  "graph/entities/split",
  "graph/backfill",
  "graph/clear",
  "graph/decay",
  "keys/create",
  "keys/revoke",
  "workspace/export",
  "workspace/import",
]);
// Calls with no scope: the keys of your own user, whichever workspace.
const UNSCOPED = new Set(["health", "keys/list", "keys/revoke"]);

interface Answer {
  response: Response;
  text: string;
}

interface Call {
  method: "GET" | "POST" | "PATCH";
  path: string;
  body?: unknown;
  query?: Record<string, unknown>;
  ndjson?: string;
  accept?: string;
}

/**
 * Client of Cairn's SDK API.
 *
 * ```ts
 * const cairn = new Cairn({ apiKey, baseUrl: "http://127.0.0.1:8000" });
 * await cairn.memories.add({ content: "We deploy on Fridays", tags: ["deploy"] });
 * console.log((await cairn.context.get({ query: "how do we deploy?" })).context);
 * ```
 *
 * Retries: 429 (after Retry-After), 408, 5xx and network failures, up to `maxRetries` times with exponential
 * backoff; writes carry an Idempotency-Key, so a retried memories.add never stores the memory twice.
 */
export class Cairn {
  readonly apiKey: string;
  readonly baseUrl: string;
  readonly scope: Scope | undefined;
  readonly timeout: number;
  readonly retry: RetryPolicy;
  readonly memories: Memories;
  readonly context: Context;
  readonly graph: Graph;
  readonly workspace: Workspace;
  readonly keys: Keys;
  readonly jobs: Jobs;
  readonly sessions: Sessions;
  readonly skills: Skills;
  private readonly extraHeaders: Record<string, string>;
  private readonly fetcher: typeof fetch;
  /** Pauses between retries and polls; tests replace it to see the waits. */
  sleep: (ms: number, signal?: AbortSignal) => Promise<void> = sleep;

  constructor(options: CairnOptions = {}) {
    const apiKey = (options.apiKey ?? env("CAIRN_API_KEY") ?? "").trim();
    if (!apiKey) {
      throw new ConfigurationError(
        "No API key: pass new Cairn({ apiKey }) or set CAIRN_API_KEY (create one with `manage.py apikey_create`).",
      );
    }
    this.apiKey = apiKey;
    this.baseUrl = resolveBaseUrl(options.baseUrl ?? env("CAIRN_BASE_URL"));
    this.scope = options.scope;
    this.timeout = options.timeout ?? 30_000;
    this.retry = {
      maxRetries: options.maxRetries ?? options.retry?.maxRetries ?? 3,
      backoffBase: options.retry?.backoffBase ?? 500,
      backoffMax: options.retry?.backoffMax ?? 8_000,
      maxRetryAfter: options.retry?.maxRetryAfter ?? 60_000,
    };
    this.extraHeaders = { ...(options.headers ?? {}) };
    const platformFetch = (globalThis as { fetch?: typeof fetch }).fetch;
    const chosen = options.fetch ?? platformFetch;
    if (!chosen) throw new ConfigurationError("No fetch on this platform: pass new Cairn({ fetch }).");
    // Called as a method of this client, a browser's fetch throws "Illegal invocation": keep it unbound.
    this.fetcher = (input, init) => chosen(input, init);
    this.memories = new Memories(this);
    this.context = new Context(this);
    this.graph = new Graph(this);
    this.workspace = new Workspace(this);
    this.keys = new Keys(this);
    this.jobs = new Jobs(this);
    this.sessions = new Sessions(this);
    this.skills = new Skills(this);
  }

  /** A client like this one with another default scope (e.g. one per end user). */
  withScope(scope: Scope | undefined): Cairn {
    const clone = new Cairn({
      apiKey: this.apiKey,
      baseUrl: this.baseUrl,
      scope,
      timeout: this.timeout,
      retry: this.retry,
      headers: this.extraHeaders,
      fetch: this.fetcher,
    });
    clone.sleep = this.sleep;
    return clone;
  }

  health(options?: RequestOptions): Promise<api.HealthOut> {
    return this.request({ method: "GET", path: "health" }, options) as Promise<api.HealthOut>;
  }

  /** POST one operation's JSON body (the client's scope filled in) and return its envelope's data. */
  post<P extends PathOf<"post">>(path: P, body: RequestOf<P, "post" & keyof Paths[P]>, options?: RequestOptions) {
    return this.request({ method: "POST", path, body: this.scoped(path, body) }, options) as Promise<
      ResponseOf<P, "post" & keyof Paths[P]>
    >;
  }

  patch<P extends PathOf<"patch">>(path: P, body: RequestOf<P, "patch" & keyof Paths[P]>, options?: RequestOptions) {
    return this.request({ method: "PATCH", path, body: this.scoped(path, body) }, options) as Promise<
      ResponseOf<P, "patch" & keyof Paths[P]>
    >;
  }

  /** GET an operation whose input is the query string; `scope` is spread into tenantId/userId/projectId. */
  get<P extends PathOf<"get">>(path: P, query: { scope?: Scope } & object = {}, options?: RequestOptions) {
    const { scope, ...rest } = query as { scope?: Scope };
    const chosen = scope ?? this.scope ?? {};
    return this.request({ method: "GET", path, query: { ...chosen, ...rest } }, options) as Promise<
      ResponseOf<P, "get" & keyof Paths[P]>
    >;
  }

  private scoped(path: string, body: unknown): unknown {
    const fields = dropUndefined({ ...((body as object) ?? {}) }) as { scope?: Scope };
    if (!UNSCOPED.has(path) && fields.scope === undefined && this.scope !== undefined) fields.scope = this.scope;
    return fields;
  }

  /** Send with retries; the parsed envelope's data, or a typed error. */
  async request(call: Call, options: RequestOptions = {}): Promise<unknown> {
    const { response, text } = await this.send(call, options);
    return dataOrThrow(call.path, response, parseEnvelope(text), text);
  }

  /** Send with retries; the final answer (success or not) with its body read. The body is read inside the
   * attempt, so the timeout and the caller's signal also cover an answer that stalls halfway. */
  async send(call: Call, options: RequestOptions = {}): Promise<Answer> {
    const url = new URL(`${this.baseUrl}/${call.path}`);
    for (const [name, value] of Object.entries(call.query ?? {})) {
      if (value !== undefined && value !== null) url.searchParams.set(name, String(value));
    }
    const headers: Record<string, string> = {
      Authorization: `Bearer ${this.apiKey}`,
      Accept: call.accept ?? "application/json",
      ...this.extraHeaders,
    };
    if (call.body !== undefined) headers["Content-Type"] = "application/json";
    if (call.ndjson !== undefined) headers["Content-Type"] = NDJSON;
    if (WRITES.has(call.path) && call.method !== "GET") headers["Idempotency-Key"] = options.idempotencyKey ?? uuid();
    const body = call.ndjson ?? (call.body !== undefined ? JSON.stringify(call.body) : undefined);
    const maxRetries = options.maxRetries ?? this.retry.maxRetries;
    const timeout = options.timeout ?? this.timeout;
    const signal = options.signal;

    for (let attempt = 0; ; attempt++) {
      if (signal?.aborted) throw abortError(signal);
      headers["X-Request-Id"] = uuid().replaceAll("-", "");
      const controller = new AbortController();
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        controller.abort();
      }, timeout);
      const onAbort = () => controller.abort();
      signal?.addEventListener("abort", onAbort, { once: true });
      let delay: number | null;
      try {
        const response = await this.fetcher(url, { method: call.method, headers, body, signal: controller.signal });
        const text = await response.text();
        if (response.ok) return { response, text };
        delay = this.retryDelay(response, text, attempt, maxRetries);
        if (delay === null) return { response, text };
      } catch (error) {
        if (signal?.aborted) throw abortError(signal);
        if (error instanceof CairnError) throw error;
        if (attempt >= maxRetries) {
          if (timedOut) throw new APITimeoutError(`No answer from ${url} within ${timeout} ms.`, { cause: error });
          throw new APIConnectionError(`Could not reach ${url}: ${String(error)}`, { cause: error });
        }
        delay = this.backoff(attempt);
      } finally {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
      }
      await this.sleep(delay, signal);
    }
  }

  private backoff(attempt: number): number {
    const ceiling = Math.min(this.retry.backoffMax, this.retry.backoffBase * 2 ** attempt);
    return ceiling / 2 + Math.random() * (ceiling / 2);
  }

  /** Ms to wait before trying again, or null when this answer is final. */
  private retryDelay(response: Response, text: string, attempt: number, maxRetries: number): number | null {
    const status = response.status;
    if (attempt >= maxRetries || !(status === 429 || status === 408 || status >= 500)) return null;
    if (status !== 429 && status !== 503) return this.backoff(attempt);
    const hinted = retryAfterSeconds(response, parseEnvelope(text));
    if (hinted === null) return this.backoff(attempt);
    const ms = hinted * 1000;
    return ms > this.retry.maxRetryAfter ? null : ms;
  }
}

function resolveBaseUrl(raw: string | undefined): string {
  let url = (raw ?? "").trim() || DEFAULT_BASE_URL;
  url = url.replace(/\/+$/, "");
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ConfigurationError(`baseUrl must be an http(s) URL such as ${DEFAULT_BASE_URL}, got ${JSON.stringify(url)}.`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new ConfigurationError(`baseUrl must be an http(s) URL such as ${DEFAULT_BASE_URL}, got ${JSON.stringify(url)}.`);
  }
  return url.endsWith(API_PREFIX) ? url : url + API_PREFIX;
}

function parseEnvelope(text: string): Envelope | null {
  try {
    const body = JSON.parse(text) as unknown;
    if (body && typeof body === "object" && "ok" in body && "meta" in body) return body as Envelope;
  } catch {
    // not JSON: a proxy's page, reported with its status
  }
  return null;
}

function headersOf(response: Response): Record<string, string> {
  const out: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    out[name] = value;
  });
  return out;
}

function dataOrThrow(path: string, response: Response, envelope: Envelope | null, text: string): unknown {
  const status = response.status;
  const metaId = envelope?.meta?.requestId;
  const requestId = typeof metaId === "string" ? metaId : response.headers.get("X-Request-Id");
  if (status >= 200 && status < 300) {
    if (!envelope || envelope.ok !== true) {
      throw new APIError({
        status,
        code: "INVALID_RESPONSE",
        message: `Expected the Cairn envelope from ${path}; is the base URL pointing at Cairn?`,
        requestId,
      });
    }
    return envelope.data;
  }
  const Class = errorClass(status);
  const error = envelope?.error;
  if (error && typeof error.code === "string") {
    throw new Class({
      status,
      code: error.code,
      message: error.message ?? "",
      requestId,
      type: error.type,
      retryable: error.retryable ?? (status >= 500 || status === 429),
      details: error.details ?? null,
      headers: headersOf(response),
    });
  }
  throw new Class({
    status,
    code: `HTTP_${status}`,
    message: text.trim().slice(0, 300) || response.statusText || `HTTP ${status}`,
    requestId,
    retryable: status >= 500 || status === 429,
    headers: headersOf(response),
  });
}

const idRequest = <T extends { id: string }>(value: string | T): T =>
  (typeof value === "string" ? { id: value } : value) as T;

/** The scope a job is followed in: the workspace it was started in (userId does not choose one). */
function jobScope(scope: Scope | undefined): Scope | undefined {
  if (!scope) return undefined;
  return dropUndefined({ tenantId: scope.tenantId ?? undefined, projectId: scope.projectId ?? undefined });
}

export class Memories {
  constructor(private readonly client: Cairn) {}

  /** Store a memory (201); one Idempotency-Key covers every retry. */
  add(request: api.AddIn, options?: RequestOptions) {
    return this.client.post("memories/add", request, options);
  }

  search(request: api.SearchIn, options?: RequestOptions) {
    return this.client.post("memories/search", request, options);
  }

  /** One page; pass `nextCursor` back as `cursor` for the next. */
  list(request: api.ListIn = {}, options?: RequestOptions) {
    return this.client.post("memories/list", request, options);
  }

  /** Every memory, page after page (`for await`). */
  async *iter(request: Omit<api.ListIn, "cursor"> = {}, options?: RequestOptions): AsyncGenerator<api.MemoryOut> {
    let cursor: string | null | undefined;
    do {
      const page = await this.list({ ...request, cursor }, options);
      yield* page.memories;
      cursor = page.nextCursor;
    } while (cursor);
  }

  edit(request: api.EditIn, options?: RequestOptions) {
    return this.client.post("memories/edit", request, options);
  }

  /** Delete one memory: `forget(id)` or `forget({ id, scope })`. */
  forget(request: string | api.ForgetIn, options?: RequestOptions) {
    return this.client.post("memories/forget", idRequest(request), options);
  }

  bulkForget(request: api.BulkForgetIn, options?: RequestOptions) {
    return this.client.post("memories/bulk-forget", request, options);
  }

  vacuum(request: api.VacuumIn = {}, options?: RequestOptions) {
    return this.client.post("memories/vacuum", request, options);
  }

  consolidate(request: api.ConsolidateIn = {}, options?: RequestOptions) {
    return this.client.post("memories/consolidate", request, options);
  }

  settings(request: { scope?: Scope } = {}, options?: RequestOptions) {
    return this.client.get("memories/settings", request, options);
  }

  updateSettings(request: api.MemorySettingsPatchIn, options?: RequestOptions) {
    return this.client.patch("memories/settings", request, options);
  }

  /** Decide which of two memories is current (supersedes, not_conflict, restates, or revert); reversible. */
  resolve(request: api.ResolveIn, options?: RequestOptions) {
    return this.client.post("memories/resolve", request, options);
  }

  /** The decisions about which memory is current that involve one memory, newest first. */
  decisions(request: api.DecisionsIn, options?: RequestOptions) {
    return this.client.post("memories/decisions", request, options);
  }
}

/** A conversation or working session: its turns are memories, its end writes a summary. */
export class Sessions {
  constructor(private readonly client: Cairn) {}

  start(request: api.SessionStartIn = {}, options?: RequestOptions) {
    return this.client.post("sessions/start", request, options);
  }
  checkpoint(request: api.CheckpointIn, options?: RequestOptions) {
    return this.client.post("sessions/checkpoint", request, options);
  }
  /** Many turns at once (a chat client uploading a conversation), all or nothing. */
  turns(request: api.TurnsIn, options?: RequestOptions) {
    return this.client.post("sessions/turns", request, options);
  }
  end(request: api.SessionEndIn, options?: RequestOptions) {
    return this.client.post("sessions/end", request, options);
  }
  /** The session's Markdown transcript. */
  snapshot(sessionId: string, request: { scope?: Scope } = {}, options?: RequestOptions) {
    const { scope, ...rest } = request;
    const chosen = scope ?? this.client.scope ?? {};
    return this.client.request(
      { method: "GET", path: `sessions/${encodeURIComponent(sessionId)}/snapshot`, query: { ...chosen, ...rest } },
      options,
    ) as Promise<ResponseOf<"sessions/{session_id}/snapshot", "get">>;
  }
}

/** Skill files: instructions an agent loads, addressed by path; a session can be promoted into one. */
export class Skills {
  constructor(private readonly client: Cairn) {}

  upsert(request: api.SkillUpsertIn, options?: RequestOptions) {
    return this.client.post("skills/files/upsert", request, options);
  }
  list(request: api.SkillListIn = {}, options?: RequestOptions) {
    return this.client.post("skills/files/list", request, options);
  }
  delete(request: api.SkillDeleteIn, options?: RequestOptions) {
    return this.client.post("skills/files/delete", request, options);
  }
  promote(request: api.SkillPromoteIn, options?: RequestOptions) {
    return this.client.post("skills/files/promote", request, options);
  }
}

export class Context {
  constructor(private readonly client: Cairn) {}

  /** What to put in front of the next model call: `(await cairn.context.get({ query })).context`. */
  get(request: api.ContextIn = {}, options?: RequestOptions) {
    return this.client.post("context/get", request, options);
  }
}

export class Graph {
  constructor(private readonly client: Cairn) {}

  trace(request: api.TraceIn = {}, options?: RequestOptions) {
    return this.client.post("graph/trace", request, options);
  }
  status(request: api.StatusIn = {}, options?: RequestOptions) {
    return this.client.post("graph/status", request, options);
  }
  rollout(request: { windowHours?: number; scope?: Scope } = {}, options?: RequestOptions) {
    return this.client.get("graph/rollout", request, options);
  }
  setRollout(request: api.RolloutSetIn, options?: RequestOptions) {
    return this.client.post("graph/rollout", request, options);
  }
  updateRollout(request: api.RolloutPatchIn, options?: RequestOptions) {
    return this.client.patch("graph/rollout", request, options);
  }
  extraction(request: { scope?: Scope } = {}, options?: RequestOptions) {
    return this.client.get("graph/extraction", request, options);
  }
  updateExtraction(request: api.ExtractionSettingsIn, options?: RequestOptions) {
    return this.client.patch("graph/extraction", request, options);
  }
  facts(request: api.FactsIn, options?: RequestOptions) {
    return this.client.post("graph/facts", request, options);
  }
  traverse(request: api.TraverseIn, options?: RequestOptions) {
    return this.client.post("graph/traverse", request, options);
  }
  entities(request: api.EntitiesIn = {}, options?: RequestOptions) {
    return this.client.post("graph/entities", request, options);
  }
  mergeEntities(request: api.EntityMergeIn, options?: RequestOptions) {
    return this.client.post("graph/entities/merge", request, options);
  }
  splitEntity(request: api.EntitySplitIn, options?: RequestOptions) {
    return this.client.post("graph/entities/split", request, options);
  }
  /** Communities, largest first; `refresh: true` first runs the refresh job and waits for it. */
  async communities(
    request: Omit<api.CommunitiesIn, "refresh"> & { refresh?: boolean } = {},
    options: WaitOptions = {},
  ): Promise<api.CommunitiesOut> {
    const { refresh, ...rest } = request;
    if (refresh) {
      const accepted = await this.refreshCommunities({ scope: rest.scope }, options);
      await this.client.jobs.wait({ id: accepted.jobId, scope: jobScope(rest.scope ?? this.client.scope) }, options);
    }
    return (await this.client.post("graph/communities", rest, options)) as api.CommunitiesOut;
  }
  /** Start a community refresh job and return it at once (202). */
  async refreshCommunities(request: { scope?: Scope } = {}, options?: RequestOptions): Promise<api.JobAcceptedOut> {
    return (await this.client.post("graph/communities", { ...request, refresh: true }, options)) as api.JobAcceptedOut;
  }
  backfill(request: api.BackfillIn = {}, options?: RequestOptions) {
    return this.client.post("graph/backfill", request, options);
  }
  stats(request: api.ScopedIn = {}, options?: RequestOptions) {
    return this.client.post("graph/stats", request, options);
  }
  clear(request: api.ClearIn, options?: RequestOptions) {
    return this.client.post("graph/clear", request, options);
  }
  decay(request: api.DecayIn, options?: RequestOptions) {
    return this.client.post("graph/decay", request, options);
  }
  settings(request: { scope?: Scope } = {}, options?: RequestOptions) {
    return this.client.get("graph/settings", request, options);
  }
  updateSettings(request: api.GraphSettingsIn, options?: RequestOptions) {
    return this.client.patch("graph/settings", request, options);
  }
}

export class Keys {
  constructor(private readonly client: Cairn) {}

  /** A new key of your user; `secret` is in this answer only. */
  create(request: api.KeyCreateIn, options?: RequestOptions) {
    return this.client.post("keys/create", request, options);
  }
  list(request: api.KeyListIn = {}, options?: RequestOptions) {
    return this.client.post("keys/list", request, options);
  }
  revoke(request: string | api.KeyRevokeIn, options?: RequestOptions) {
    return this.client.post("keys/revoke", idRequest(request), options);
  }
}

export class Jobs {
  constructor(private readonly client: Cairn) {}

  status(request: string | api.JobStatusIn, options?: RequestOptions) {
    return this.client.post("jobs/status", idRequest(request), options);
  }
  list(request: api.JobListIn = {}, options?: RequestOptions) {
    return this.client.post("jobs/list", request, options);
  }
  /** Poll jobs/status until the job ends; the succeeded job, or JobFailedError / JobTimeoutError. */
  async wait(request: string | api.JobStatusIn, options: WaitOptions = {}): Promise<api.JobOut> {
    const waitTimeout = options.waitTimeout === undefined ? 600_000 : options.waitTimeout;
    const pollInterval = options.pollInterval ?? 1_000;
    if (!(pollInterval > 0)) throw new RangeError(`pollInterval must be a positive number of ms, got ${pollInterval}`);
    const deadline = waitTimeout === null ? null : Date.now() + waitTimeout;
    let delay = Math.min(200, pollInterval);
    for (;;) {
      const job = await this.status(request, options);
      if (job.status === "failed") throw new JobFailedError(job);
      if (job.status === "succeeded") return job;
      const remaining = deadline === null ? delay : deadline - Date.now();
      if (remaining <= 0) throw new JobTimeoutError(job, waitTimeout ?? 0);
      await this.client.sleep(Math.min(delay, remaining), options.signal);
      delay = Math.min(delay * 2, pollInterval);
    }
  }
}

export class Workspace {
  constructor(private readonly client: Cairn) {}

  /** Queue an export job and return at once (202). */
  startExport(request: api.ExportIn = {}, options?: RequestOptions) {
    return this.client.post("workspace/export", request, options);
  }

  /** The records of a finished export job (header first, trailer last). */
  async downloadExport(request: string | api.ExportDownloadIn, options?: RequestOptions): Promise<ExportRecord[]> {
    const body = this.clientScoped(idRequest(request));
    const call: Call = { method: "POST", path: "workspace/export/download", body, accept: `${NDJSON}, application/json` };
    const { response, text } = await this.client.send(call, options);
    const type = (response.headers.get("Content-Type") ?? "").split(";")[0]!.trim();
    if (!response.ok || type !== NDJSON) {
      dataOrThrow(call.path, response, parseEnvelope(text), text);
      throw new APIError({
        status: response.status,
        code: "INVALID_RESPONSE",
        message: `Expected ${NDJSON} from ${call.path}, got ${type || "no Content-Type"}.`,
      });
    }
    const lines = text.split("\n").filter((line) => line.trim());
    const records = lines.map((line) => JSON.parse(line) as ExportRecord);
    if (!text.endsWith("\n") || records.at(-1)?.kind !== "trailer") {
      throw new APIConnectionError(`The export ended before its trailer line: the download was cut. Export again.`);
    }
    return records;
  }

  /** Export the workspace: start the job, wait for it, download its records. */
  async export(request: api.ExportIn = {}, options: WaitOptions = {}): Promise<ExportRecord[]> {
    const accepted = await this.startExport(request, options);
    await this.client.jobs.wait({ id: accepted.jobId, scope: jobScope(request.scope ?? this.client.scope) }, options);
    return this.downloadExport({ id: accepted.jobId, scope: request.scope }, options);
  }

  /** Upload an export file (its text, or its records) and return the import job at once (202). */
  async startImport(
    source: string | ExportRecord[],
    request: { scope?: Scope } = {},
    options?: RequestOptions,
  ): Promise<api.JobAcceptedOut> {
    const ndjson = typeof source === "string" ? source : source.map((record) => JSON.stringify(record) + "\n").join("");
    const scope = request.scope ?? this.client.scope;
    const query = dropUndefined({ tenantId: scope?.tenantId ?? undefined, projectId: scope?.projectId ?? undefined });
    return (await this.client.request({ method: "POST", path: "workspace/import", query, ndjson }, options)) as api.JobAcceptedOut;
  }

  /** Import an export file and wait for the job; its report (created, skipped, ... per record kind). */
  async import(
    source: string | ExportRecord[],
    request: { scope?: Scope } = {},
    options: WaitOptions = {},
  ): Promise<Record<string, unknown>> {
    const accepted = await this.startImport(source, request, options);
    const job = await this.client.jobs.wait(
      { id: accepted.jobId, scope: jobScope(request.scope ?? this.client.scope) },
      options,
    );
    return job.result ?? {};
  }

  private clientScoped<T extends { scope?: Scope }>(body: T): T {
    return body.scope === undefined && this.client.scope !== undefined ? { ...body, scope: this.client.scope } : body;
  }
}

export { Cairn, Context, Graph, Jobs, Keys, Memories, Workspace, API_PREFIX, DEFAULT_BASE_URL, VERSION } from "./client.js";
export type { CairnOptions, ExportRecord, RequestOf, RequestOptions, ResponseOf, RetryPolicy, Scope, WaitOptions } from "./client.js";
export * from "./errors.js";
export type * from "./openapi.js";

// cairn-sdk against a real Cairn server. Started by tests/integrations/test_typescript_sdk.py, which passes
// CAIRN_BASE_URL and CAIRN_API_KEY (alice's admin key), CAIRN_TEST_OTHER_KEY (bob, another account) and
// CAIRN_TEST_FLAKY_URL (a proxy in front of the server that fails on purpose when told to).
import assert from "node:assert/strict";
import { readdir, readFile } from "node:fs/promises";
import { test } from "node:test";
import {
  APIConnectionError,
  APIUserAbortError,
  AuthenticationError,
  BadRequestError,
  Cairn,
  CairnError,
  ConfigurationError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitError,
  ServerError,
} from "cairn-sdk";

const baseUrl = process.env.CAIRN_BASE_URL;
const flakyUrl = process.env.CAIRN_TEST_FLAKY_URL;
const fast = { backoffBase: 10, backoffMax: 50 };

async function planProxy(plan) {
  const answer = await fetch(`${flakyUrl}/__plan`, { method: "POST", body: JSON.stringify(plan) });
  assert.equal(answer.status, 204);
}

async function seenByProxy() {
  return (await fetch(`${flakyUrl}/__seen`)).json();
}

test("it takes the key and base URL from the environment and finds a memory in context", async () => {
  const cairn = new Cairn();
  assert.equal(cairn.baseUrl, `${baseUrl}/api/sdk/v1`);
  const added = await cairn.memories.add({ content: "We deploy with blue-green releases on Fridays", tags: ["deploy"] });
  assert.equal(added.memory.content, "We deploy with blue-green releases on Fridays");
  assert.deepEqual(added.memory.tags, ["deploy"]);
  const context = await cairn.context.get({ query: "how do we deploy?" });
  assert.match(context.context, /blue-green/);
  assert.equal((await cairn.health()).status, "ok");
});

test("it refuses to start without a key or with a bad URL", () => {
  const saved = process.env.CAIRN_API_KEY;
  delete process.env.CAIRN_API_KEY;
  try {
    assert.throws(() => new Cairn({ baseUrl }), ConfigurationError);
  } finally {
    process.env.CAIRN_API_KEY = saved;
  }
  assert.throws(() => new Cairn({ baseUrl: "ftp://example.com" }), /http\(s\) URL/);
});

test("it round-trips the memory operations", async () => {
  const cairn = new Cairn({ scope: { tenantId: "ts-roundtrip" } });
  const rule = await cairn.memories.add({ content: "Use pnpm, not npm, in the web repo", type: "rule", metadata: { source: "review" } });
  assert.equal(rule.memory.layer, "rule");
  assert.deepEqual(rule.memory.metadata, { source: "review" });
  const note = await cairn.memories.add({ content: "The staging database is rebuilt every night" });

  const found = await cairn.memories.search({ query: "staging database", strategy: "lexical", limit: 5 });
  assert.deepEqual(found.memories.map((memory) => memory.id), [note.id]);

  const page = await cairn.memories.list({ limit: 1 });
  assert.equal(page.memories.length, 1);
  assert.ok(page.nextCursor);
  const every = [];
  for await (const memory of cairn.memories.iter({ limit: 1 })) every.push(memory.id);
  assert.deepEqual(new Set(every), new Set([rule.id, note.id]));

  const edited = await cairn.memories.edit({ id: note.id, content: "The staging database is rebuilt every Sunday" });
  assert.equal(edited.memory.content, "The staging database is rebuilt every Sunday");

  assert.equal((await cairn.memories.forget(note.id)).deleted, true);
  // The default scope applied to every call: another tenant sees none of it.
  const other = cairn.withScope({ tenantId: "ts-someone-else" });
  assert.equal((await other.memories.list()).memories.length, 0);
  assert.ok((await cairn.memories.settings()).importanceWeight !== undefined);
});

test("it records a session's turns, reads its transcript and keeps a skill file", async () => {
  const cairn = new Cairn();
  const { sessionId } = await cairn.sessions.start({ title: "TypeScript session" });
  await cairn.sessions.checkpoint({ sessionId, content: "Which port does staging use?", speaker: "Ana" });
  await cairn.sessions.turns({
    sessionId,
    turns: [{ content: "Staging listens on port 8443.", role: "assistant", speaker: "bot" }],
  });
  const { snapshot } = await cairn.sessions.snapshot(sessionId);
  assert.equal(snapshot.messageCount, 2);
  assert.ok(snapshot.transcriptMd.indexOf("Which port") < snapshot.transcriptMd.indexOf("8443"));
  await cairn.skills.upsert({ path: "skills/staging/SKILL.md", content: "1. Use port 8443 on staging." });
  const listed = await cairn.skills.list();
  assert.ok(listed.skillFiles.some((file) => file.path === "skills/staging/SKILL.md"));
});

test("it answers the envelope's code as a typed error", async () => {
  const cairn = new Cairn();
  await assert.rejects(cairn.memories.forget("00000000-0000-0000-0000-000000000000"), (error) => {
    assert.ok(error instanceof NotFoundError && error instanceof CairnError);
    assert.equal(error.code, "MEMORY_NOT_FOUND");
    assert.equal(error.status, 404);
    assert.ok(error.requestId);
    return true;
  });
  await assert.rejects(cairn.memories.add({ content: "" }), (error) => {
    assert.ok(error instanceof BadRequestError);
    assert.equal(error.status, 400);
    assert.ok(error.code);
    assert.equal(error.retryable, false);
    return true;
  });
  const stranger = new Cairn({ apiKey: "mem_" + "0".repeat(64) });
  await assert.rejects(stranger.memories.list(), AuthenticationError);
});

test("graph reads answer, GET operations carry the scope in the query string", async () => {
  const cairn = new Cairn({ scope: { tenantId: "ts-graph" } });
  assert.equal((await cairn.graph.stats()).entities, 0);
  const settings = await cairn.graph.settings();
  assert.ok(["bfs", "spreading"].includes(settings.recallStrategy));
  const updated = await cairn.graph.updateSettings({ decayRate: 0.05 });
  assert.equal(updated.decayRate, 0.05);
  assert.equal((await cairn.graph.settings()).decayRate, 0.05);
  assert.notEqual((await cairn.withScope(undefined).graph.settings()).decayRate, 0.05, "another workspace");
  assert.ok((await cairn.graph.rollout({ windowHours: 24 })).rollout);
  assert.deepEqual((await cairn.graph.facts({ query: "anything" })).facts, []);
});

test("another account's memory is not found", async () => {
  const alice = new Cairn();
  const bob = new Cairn({ apiKey: process.env.CAIRN_TEST_OTHER_KEY });
  const added = await alice.memories.add({ content: "Alice's launch code name is Bluebird" });
  await assert.rejects(bob.memories.forget(added.id), NotFoundError);
  const context = await bob.context.get({ query: "launch code name" });
  assert.doesNotMatch(context.context, /Bluebird/);
});

test("it retries 503 and 429 (waiting what Retry-After says) with one Idempotency-Key", async () => {
  const cairn = new Cairn({ baseUrl: flakyUrl, retry: fast });
  const waits = [];
  cairn.sleep = async (ms) => {
    waits.push(ms);
  };
  await planProxy(["503", "429", "lose_answer"]);
  const added = await cairn.memories.add({ content: "Retries never store a memory twice" });
  assert.equal(waits.length, 3);
  assert.equal(waits[1], 1000, "the 429's Retry-After: 1");
  const adds = (await seenByProxy()).filter((seen) => seen.path.endsWith("/memories/add"));
  assert.deepEqual(adds.map((seen) => seen.action), ["503", "429", "lose_answer", "forward"]);
  assert.equal(new Set(adds.map((seen) => seen.idempotencyKey)).size, 1);
  assert.equal(adds[3].status, 200, "the lost answer's memory was stored; the retry replays it");
  const stored = await new Cairn().memories.search({ query: "Retries never store", strategy: "lexical" });
  assert.deepEqual(stored.memories.map((memory) => memory.id), [added.id]);
});

test("it gives up after maxRetries with the last error", async () => {
  const cairn = new Cairn({ baseUrl: flakyUrl, retry: fast, maxRetries: 1 });
  await planProxy(["503", "502_html"]);
  await assert.rejects(cairn.memories.list(), (error) => {
    assert.ok(error instanceof ServerError);
    assert.equal(error.code, "HTTP_502");
    return true;
  });
  await planProxy(["429"]);
  const impatient = new Cairn({ baseUrl: flakyUrl, retry: { maxRetryAfter: 500 } });
  await assert.rejects(impatient.memories.list(), RateLimitError);
  await planProxy([]);
});

test("a call stops at its timeout, and at its AbortSignal", async () => {
  const cairn = new Cairn({ baseUrl: flakyUrl, retry: fast, maxRetries: 0 });
  await planProxy(["hang"]);
  await assert.rejects(cairn.memories.list({}, { timeout: 200 }), (error) => {
    assert.equal(error.name, "APITimeoutError");
    assert.ok(error instanceof APIConnectionError);
    return true;
  });
  await planProxy(["hang"]);
  const controller = new AbortController();
  setTimeout(() => controller.abort("user left"), 100);
  await assert.rejects(cairn.memories.list({}, { signal: controller.signal, timeout: 10_000 }), APIUserAbortError);
  await planProxy([]);
});

test("the built package uses web APIs only, as browsers and edge runtimes have them", async () => {
  const dist = new URL("../dist/", import.meta.url);
  for (const name of (await readdir(dist)).filter((file) => file.endsWith(".js"))) {
    const code = await readFile(new URL(name, dist), "utf8");
    assert.doesNotMatch(code, /from\s+["']node:|require\(|\bBuffer\b|\bprocess\.env\b|__dirname/, name);
    for (const imported of code.matchAll(/from\s+["']([^"']+)["']/g)) assert.match(imported[1], /^\.\//, name);
  }
});

test("a server that is not there is an APIConnectionError after the retries", async () => {
  const cairn = new Cairn({ baseUrl: "http://127.0.0.1:9", retry: fast, maxRetries: 1 });
  await assert.rejects(cairn.health(), APIConnectionError);
});

test("a workspace export comes back as records and imports into another tenant, through jobs", async () => {
  const cairn = new Cairn({ scope: { tenantId: "ts-export" } });
  await cairn.memories.add({ content: "Exported through the TypeScript SDK" });
  const records = await cairn.workspace.export({}, { pollInterval: 100 });
  assert.equal(records[0].kind, "header");
  assert.equal(records.at(-1).kind, "trailer");
  assert.ok(records.some((record) => record.kind === "memory" && JSON.stringify(record).includes("TypeScript SDK")));
  const jobs = await cairn.jobs.list({ kind: "workspace_export" });
  assert.equal(jobs.jobs[0].status, "succeeded");

  const report = await cairn.workspace.import(records, { scope: { tenantId: "ts-import" } }, { pollInterval: 100 });
  assert.ok(report.created.memory >= 1, JSON.stringify(report));
  const copied = await cairn.memories.search({ query: "Exported through", strategy: "lexical", scope: { tenantId: "ts-import" } });
  assert.equal(copied.memories[0].content, "Exported through the TypeScript SDK");
});

test("keys are created, listed and revoked", async () => {
  const admin = new Cairn();
  const created = await admin.keys.create({ name: "ts-reader", keyScope: "read" });
  const reader = new Cairn({ apiKey: created.secret });
  assert.ok(Array.isArray((await reader.memories.list()).memories));
  await assert.rejects(reader.memories.add({ content: "A read key cannot write" }), (error) => {
    assert.ok(error instanceof PermissionDeniedError);
    assert.equal(error.status, 403);
    assert.ok(error.code);
    return true;
  });
  assert.ok((await admin.keys.list()).keys.some((key) => key.id === created.key.id));
  await admin.keys.revoke(created.key.id);
  await assert.rejects(reader.memories.list(), AuthenticationError);
});

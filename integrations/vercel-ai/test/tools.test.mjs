// The tools driven by the `ai` package's own mock language model through generateText, into a real Cairn
// server (tests/integrations/test_vercel_ai.py passes CAIRN_BASE_URL, CAIRN_API_KEY and CAIRN_TEST_OTHER_KEY).
import assert from "node:assert/strict";
import { test } from "node:test";
import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { Cairn } from "cairn-sdk";
import { cairnTools, withCairnContext } from "cairn-vercel-ai";

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 5, text: 5, reasoning: undefined },
};

/** A model that first calls `toolName` with `input`, then answers `text`. */
function modelCalling(toolName, input, text = "Done.") {
  return new MockLanguageModelV3({
    doGenerate: [
      {
        content: [{ type: "tool-call", toolCallId: "call-1", toolName, input: JSON.stringify(input) }],
        finishReason: { unified: "tool-calls", raw: "tool_calls" },
        usage,
        warnings: [],
      },
      { content: [{ type: "text", text }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] },
    ],
  });
}

const scope = { userId: "vercel-user" };

test("remember stores what the model asks it to, in the user's scope", async () => {
  const model = modelCalling("remember", { content: "The user's favourite deploy day is Tuesday", tags: ["deploy"] });
  const result = await generateText({
    model,
    tools: cairnTools({ scope }),
    stopWhen: stepCountIs(3),
    prompt: "Remember that I deploy on Tuesdays.",
  });
  assert.equal(result.text, "Done.");
  const [call] = result.steps[0].toolResults;
  assert.equal(call.toolName, "remember");
  assert.equal(call.output.stored, true);
  // The model's second step saw the tool's answer.
  assert.match(JSON.stringify(model.doGenerateCalls[1].prompt), new RegExp(call.output.id));

  const cairn = new Cairn({ scope });
  const stored = await cairn.memories.list();
  assert.deepEqual(
    stored.memories.map((memory) => [memory.id, memory.content, memory.tags]),
    [[call.output.id, "The user's favourite deploy day is Tuesday", ["deploy"]]],
  );
  assert.deepEqual((await new Cairn({ scope: { userId: "someone-else" } }).memories.list()).memories, []);
});

test("recall answers context/get's text, search lists ids, forget deletes", async () => {
  const cairn = new Cairn({ scope });
  const added = await cairn.memories.add({ content: "Production runs on Postgres 16 with pgvector" });

  const recalled = await generateText({
    model: modelCalling("recall", { query: "which database does production use?" }),
    tools: cairnTools({ scope }),
    stopWhen: stepCountIs(3),
    prompt: "Which database do we use?",
  });
  const recall = recalled.steps[0].toolResults[0];
  assert.equal(recall.toolName, "recall");
  assert.equal(typeof recall.output, "string");
  assert.match(recall.output, /Postgres 16/);

  const searched = await generateText({
    model: modelCalling("search", { query: "Postgres", limit: 3 }),
    tools: cairnTools({ scope }),
    stopWhen: stepCountIs(3),
    prompt: "What do you know about Postgres?",
  });
  assert.ok(searched.steps[0].toolResults[0].output.some((memory) => memory.id === added.id));

  const forgotten = await generateText({
    model: modelCalling("forget", { id: added.id }),
    tools: cairnTools({ scope }),
    stopWhen: stepCountIs(3),
    prompt: "Forget the Postgres memory.",
  });
  assert.deepEqual(forgotten.steps[0].toolResults[0].output, { id: added.id, deleted: true });
  assert.equal((await cairn.memories.search({ query: "Postgres 16 pgvector", strategy: "lexical" })).count, 0);
});

test("a tool whose call fails gives the model the error, and nothing of another account leaks", async () => {
  const alice = new Cairn({ scope });
  const added = await alice.memories.add({ content: "Alice's private note about the launch" });
  const result = await generateText({
    model: modelCalling("forget", { id: added.id }),
    tools: cairnTools({ apiKey: process.env.CAIRN_TEST_OTHER_KEY, scope }),
    stopWhen: stepCountIs(3),
    prompt: "Forget it.",
  });
  const failed = result.steps[0].content.find((part) => part.type === "tool-error");
  assert.ok(failed, JSON.stringify(result.steps[0].content));
  assert.equal(failed.error.code, "MEMORY_NOT_FOUND");
  assert.ok((await alice.memories.list({ limit: 100 })).memories.some((memory) => memory.id === added.id));
});

test("withCairnContext puts the context in front of the prompt", async () => {
  const cairn = new Cairn({ scope });
  await cairn.memories.add({ content: "Invoices are sent on the first Monday of each month" });
  const prompt = await withCairnContext("When do invoices go out?", { scope });
  assert.match(prompt, /first Monday/);
  assert.ok(prompt.endsWith("When do invoices go out?"));

  const model = new MockLanguageModelV3({
    doGenerate: { content: [{ type: "text", text: "On the first Monday." }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] },
  });
  await generateText({ model, prompt });
  assert.match(JSON.stringify(model.doGenerateCalls[0].prompt), /first Monday of each month/);
  const nothing = await withCairnContext("Unrelated question?", { scope: { userId: "nobody-yet" } });
  assert.ok(nothing.endsWith("Unrelated question?"));
});

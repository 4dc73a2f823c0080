// Compiled (not run) by `npm run build`: the answers are the generated types, and a wrong request does not compile.
import { Cairn, NotFoundError, type AddOut, type ContextOut, type MemorySettingsOut, type CommunitiesOut, type JobOut } from "../src/index.js";
const cairn = new Cairn({ apiKey: "k" });
async function f() {
  const a: AddOut = await cairn.memories.add({ content: "x" });
  const c: ContextOut = await cairn.context.get({ query: "q" });
  const text: string = c.context;
  const s: MemorySettingsOut = await cairn.memories.settings();
  const co: CommunitiesOut = await cairn.graph.communities({ refresh: true });
  const j: JobOut = await cairn.jobs.wait("id");
  const id: string = (await cairn.memories.forget("id")).id;
  // @ts-expect-error unknown field
  await cairn.memories.add({ content: "x", nope: 1 });
  // @ts-expect-error wrong enum
  await cairn.memories.add({ content: "x", type: "bogus" });
  const page = await cairn.memories.list({ limit: 5 });
  const cursor: string | null = page.nextCursor;
  const r = await cairn.graph.rollout({ windowHours: 24 });
  return [a, text, s, co, j, id, cursor, r, NotFoundError];
}
f;

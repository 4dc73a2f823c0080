import { tool } from "ai";
import { Cairn, type CairnOptions, type Scope } from "cairn-sdk";
import { z } from "zod";

export interface CairnToolsOptions extends CairnOptions {
  /** A client to share; otherwise one is made from `apiKey` and `baseUrl` (or CAIRN_API_KEY / CAIRN_BASE_URL). */
  client?: Cairn;
  /** Whose memories the tools read and write, e.g. `{ userId: session.user.id }`. */
  scope?: Scope;
  /** Memories recall puts in the context (context/get's limit; server default 10). */
  recallLimit?: number;
  /** Memories search returns at most (1–50, default 5). */
  searchLimit?: number;
}

const MEMORY_TYPES = ["rule", "decision", "fact", "note", "skill"] as const;

function clientOf(options: CairnToolsOptions): Cairn {
  const client = options.client ?? new Cairn(options);
  return options.scope !== undefined ? client.withScope(options.scope) : client;
}

/**
 * Four tools over Cairn for `generateText` / `streamText`:
 *
 * ```ts
 * const memory = cairnTools({ apiKey, baseUrl: "http://127.0.0.1:8000", scope: { userId } });
 * await generateText({ model, tools: memory, stopWhen: stepCountIs(3), prompt });
 * ```
 *
 * - `remember` stores a memory (memories/add, with an Idempotency-Key);
 * - `recall` answers context/get's text for a question: rules, relevant memories and known facts;
 * - `search` lists the best-matching memories with their ids;
 * - `forget` deletes one memory by id.
 */
export function cairnTools(options: CairnToolsOptions = {}) {
  const cairn = clientOf(options);
  return {
    remember: tool({
      description:
        "Save something worth remembering across conversations: a fact about the user, a decision, a rule to follow.",
      inputSchema: z.object({
        content: z.string().min(1).max(8000).describe("The memory, as one self-contained sentence or paragraph."),
        type: z.enum(MEMORY_TYPES).optional().describe("rule, decision, fact, note (default) or skill."),
        tags: z.array(z.string().min(1).max(120)).max(50).optional().describe("Short labels to group memories."),
      }),
      execute: async ({ content, type, tags }, { abortSignal }) => {
        const added = await cairn.memories.add({ content, type, tags }, { signal: abortSignal });
        return { id: added.id, stored: added.admitted !== false, message: added.message };
      },
    }),
    recall: tool({
      description:
        "Recall what is known that bears on a question: rules, relevant memories and facts, as text to rely on.",
      inputSchema: z.object({
        query: z.string().min(1).max(2000).describe("What you need to know, in natural language."),
      }),
      execute: async ({ query }, { abortSignal }) => {
        const answer = await cairn.context.get({ query, limit: options.recallLimit }, { signal: abortSignal });
        return answer.context;
      },
    }),
    search: tool({
      description: "Find stored memories matching a query, best first, with their ids (to forget one).",
      inputSchema: z.object({
        query: z.string().min(1).max(2000),
        limit: z.number().int().min(1).max(50).optional(),
      }),
      execute: async ({ query, limit }, { abortSignal }) => {
        const found = await cairn.memories.search(
          { query, limit: limit ?? options.searchLimit ?? 5 },
          { signal: abortSignal },
        );
        return found.memories.map((memory) => ({
          id: memory.id,
          content: memory.content,
          type: memory.type,
          tags: memory.tags,
          createdAt: memory.createdAt,
        }));
      },
    }),
    forget: tool({
      description: "Delete one stored memory by its id (from search), e.g. when the user asks to forget it.",
      inputSchema: z.object({ id: z.string().min(1).max(64) }),
      execute: async ({ id }, { abortSignal }) => {
        const forgotten = await cairn.memories.forget(id, { signal: abortSignal });
        return { id: forgotten.id, deleted: forgotten.deleted };
      },
    }),
  };
}

export interface WithContextOptions extends CairnToolsOptions {
  /** The question to recall for; default: the prompt itself. */
  query?: string;
  signal?: AbortSignal;
}

/**
 * The prompt with Cairn's context for it in front (context/get's text), ready for `generateText({ prompt })`
 * or a system message. No memory that bears on it: the prompt unchanged.
 */
export async function withCairnContext(prompt: string, options: WithContextOptions = {}): Promise<string> {
  const cairn = clientOf(options);
  const answer = await cairn.context.get(
    { query: options.query ?? prompt, limit: options.recallLimit },
    { signal: options.signal },
  );
  const context = answer.context.trim();
  if (!context) return prompt;
  return `Context from memory (may be incomplete; the user's message comes after it):\n${context}\n\n${prompt}`;
}

import { HumanMessage } from "@langchain/core/messages";
import { createAgent, tool, type ToolRuntime } from "langchain";
import { z } from "zod";
import {
  admitTurn,
  createDocumentGuardrails,
  InMemoryGuardrailStore,
  mutationKey,
  TURN_CONTEXT_KEY,
  turnContext,
  TurnInputSchema,
  turnKey,
  type TurnInput,
} from "arkah-agent-guardrails";
import { ScriptedModel } from "arkah-agent-guardrails/testing";

// A write service that dedupes on an idempotency key: a key it has seen changes nothing.
const applied = new Map<string, string>();
const writeService = (key: string, title: string) => {
  if (!applied.has(key)) applied.set(key, `renamed to ${title}`);
  return applied.get(key) ?? "";
};

const readDocument = tool(() => "Untitled", { name: "read_document", description: "Read the title.", schema: z.object({}) });
const renameDocument = tool(
  (args, runtime: ToolRuntime<unknown, Record<string, unknown>>) => {
    // The turn is in the invocation's context (a tool's runtime gets it raw); the call id is
    // the runtime's; `args` are the arguments the guardrails checked and claimed.
    const turn = TurnInputSchema.parse(runtime.context[TURN_CONTEXT_KEY]);
    const key = mutationKey(turn, { id: runtime.toolCallId, name: "rename_document", args });
    return writeService(key, args.title);
  },
  { name: "rename_document", description: "Rename the document.", schema: z.object({ title: z.string() }) },
);

const store = new InMemoryGuardrailStore();
const agent = createAgent({
  model: new ScriptedModel([
    { toolCalls: [{ id: "call-1", name: "read_document", args: {} }] },
    { toolCalls: [{ id: "call-2", name: "rename_document", args: { title: "Field notes" } }] },
    { content: "Renamed." },
  ]),
  tools: [readDocument, renameDocument],
  middleware: [
    createDocumentGuardrails({
      store,
      userMessageLabel: "user",
      authorize: () => true,
      tools: { read_document: { kind: "document-read" }, rename_document: { kind: "mutation" } },
    }),
  ],
});

const turn: TurnInput = {
  scopeId: "doc-1",
  turnId: "req-5c1d",
  policyVersion: "2026-11",
  segments: [{ label: "user", content: "Rename it to Field notes." }],
};
await admitTurn({ store, input: turn, moderate: () => true });
await agent.invoke({ messages: [new HumanMessage("Rename it to Field notes.")] }, { context: turnContext(turn) });

// The write service got one key: the one the guardrails claimed the turn's mutation under.
const claimed = (await store.readAudit({ turnKey: turnKey(turn) })).find((event) => event.kind === "mutation");
console.log(applied.size, applied.has(claimed?.mutationKey ?? "")); // 1 true

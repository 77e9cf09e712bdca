/**
 * The offline demo: a real `createAgent` loop, a scripted model, real tools and the in-memory
 * store. Only the model's responses and the moderation decision are stubbed.
 *
 *   pnpm demo
 *
 * The model reads a document and renames it. It tries a few things the guardrails refuse, then
 * the whole request is sent again (a transport retry, same turn id): the rename is replayed from
 * the store instead of running twice. Exits non-zero if anything differs from the expected trace.
 */
import { HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { createAgent, tool } from "langchain";
import { z } from "zod";
import {
  admitTurn,
  createDocumentGuardrails,
  InMemoryGuardrailStore,
  type GuardrailStore,
  type TurnInput,
} from "arkah-agent-guardrails";
import { ScriptedModel, type ScriptStep } from "arkah-agent-guardrails/testing";

// The document service: every executed rename is a real write, and writes are counted.
const document = { title: "Untitled", revision: 0 };
let writes = 0;

const readDocument = tool(() => JSON.stringify(document), {
  name: "read_document",
  description: "Read the current document's title and revision.",
  schema: z.object({}),
});

const renameDocument = tool(
  ({ title, expectedRevision }) => {
    if (expectedRevision !== document.revision) {
      throw new Error(`revision conflict: expected ${String(expectedRevision)}, found ${String(document.revision)}`);
    }
    writes += 1;
    document.title = title;
    document.revision += 1;
    return JSON.stringify(document);
  },
  {
    name: "rename_document",
    description: "Rename the document. Pass the revision you read.",
    schema: z.object({ title: z.string().min(1), expectedRevision: z.number().int() }),
  },
);

const remember = tool(() => "Preference saved", {
  name: "remember",
  description: "Remember a user preference.",
  schema: z.object({ preference: z.string() }),
});

// One trusted user turn, issued by the server.
const userMessage = "Please rename this document to Field notes.";
const input: TurnInput = {
  scopeId: "doc-1",
  turnId: "turn-1",
  policyVersion: "2026-11",
  segments: [{ label: "user", content: userMessage }],
};

let moderationCalls = 0;
const store = new InMemoryGuardrailStore();

const rename = (id: string, title: string, expectedRevision: number) => ({
  id,
  name: "rename_document",
  args: { title, expectedRevision },
});

async function runTurn(guardStore: GuardrailStore, script: ScriptStep[]): Promise<BaseMessage[]> {
  const receipt = await admitTurn({
    store: guardStore,
    input,
    moderate: () => {
      moderationCalls += 1;
      return true;
    },
  });
  if (!receipt.allowed) throw new Error("the turn was denied");

  const agent = createAgent({
    model: new ScriptedModel(script),
    tools: [readDocument, renameDocument, remember],
    middleware: [
      createDocumentGuardrails({
        input,
        store: guardStore,
        userMessageLabel: "user",
        authorize: (_call, turn) => turn.scopeId === "doc-1",
        tools: {
          read_document: { kind: "document-read" },
          rename_document: { kind: "mutation" },
          remember: { kind: "auxiliary" },
        },
      }),
    ],
  });
  const result = await agent.invoke({ messages: [new HumanMessage(userMessage)] });
  return result.messages;
}

function traceLines(messages: BaseMessage[]): string[] {
  return messages.filter(ToolMessage.isInstance).map((message) => {
    const content = typeof message.content === "string" ? message.content : JSON.stringify(message.content);
    const refusal = refusalCode(content);
    return `${message.name ?? "?"} [${message.status ?? "success"}]: ${refusal ?? content}`;
  });
}

function refusalCode(content: string): string | undefined {
  try {
    const parsed: unknown = JSON.parse(content);
    if (typeof parsed === "object" && parsed !== null && "guardrail" in parsed && typeof parsed.guardrail === "string") {
      return parsed.guardrail;
    }
  } catch {
    // Not JSON: an ordinary tool result.
  }
  return undefined;
}

const firstRun = await runTurn(store, [
  // A read, a rename and a memory call in one step: the rename waits for the read.
  {
    toolCalls: [
      { id: "call-read-1", name: "read_document", args: {} },
      rename("call-rename-0", "Field notes", 0),
      { id: "call-remember-1", name: "remember", args: { preference: "short titles" } },
    ],
  },
  // Two renames in one step: only the first is eligible.
  { toolCalls: [rename("call-rename-1", "Field notes", 0), rename("call-rename-2", "Field Notes", 0)] },
  // A second change in the same turn.
  { toolCalls: [rename("call-rename-3", "Field notes (final)", 1)] },
  { content: "Renamed the document to Field notes." },
]);

// The client never saw the answer and sends the same request again: same turn id.
const retry = await runTurn(store, [
  { toolCalls: [{ id: "call-read-2", name: "read_document", args: {} }] },
  { toolCalls: [rename("call-rename-1", "Field notes", 0)] },
  { content: "Renamed the document to Field notes." },
]);

const lines = [
  ...traceLines(firstRun),
  "",
  "--- transport retry ---",
  ...traceLines(retry),
  "",
  `writes: ${String(writes)}`,
  `moderationCalls: ${String(moderationCalls)}`,
];
console.log(lines.join("\n"));

const expected = [
  'read_document [success]: {"title":"Untitled","revision":0}',
  "rename_document [error]: read_batch_deferred",
  "remember [success]: Preference saved",
  'rename_document [success]: {"title":"Field notes","revision":1}',
  "rename_document [error]: single_mutation",
  "rename_document [error]: mutation_conflict",
  "",
  "--- transport retry ---",
  'read_document [success]: {"title":"Field notes","revision":1}',
  'rename_document [success]: {"title":"Field notes","revision":1}',
  "",
  "writes: 1",
  "moderationCalls: 1",
];
if (lines.join("\n") !== expected.join("\n")) {
  console.error("\ndemo: the trace differs from the expected one (writes, moderation calls or the replayed result changed)");
  process.exit(1);
}

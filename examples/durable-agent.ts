/**
 * The durable demo: the guardrails on a SQLite file, a worker killed inside a write, and an
 * operator reconciling it with the `arkah-guardrails` CLI. Real `createAgent` loops, real tools,
 * a real SQLite file and real processes; only the model's responses and moderation are stubbed.
 *
 *   pnpm example:durable
 *
 * 1. Turn 1 reads the document and renames it (as in `pnpm demo`), on a SQLite store file.
 * 2. Turn 2 runs in a worker process whose rename tool writes and is then SIGKILLed, before the
 *    result is recorded: the claim stays `pending`, closed.
 * 3. The operator runs the CLI as a child process: `inspect` shows the claim and its mutationKey;
 *    the document service shows the write happened; `reconcile --completed --result-file` records
 *    the verified result.
 * 4. The client retries turn 2 (same turn id, same call): the operator's result is replayed and
 *    the rename does not run again. `audit` shows the reconciliation.
 *
 * Prints a trace and exits non-zero if anything differs from what is expected.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { createAgent, tool } from "langchain";
import { z } from "zod";
import {
  admitTurn,
  createDocumentGuardrails,
  mutationKey,
  turnKey,
  type GuardrailStore,
  type TurnInput,
} from "arkah-agent-guardrails";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { ScriptedModel, type ScriptStep, type ScriptedToolCall } from "arkah-agent-guardrails/testing";
import { arkahGuardrails } from "./support/operator-cli.js";

// ---------------------------------------------------------------------------------------------
// The document service: a JSON file, so every process sees the same document and write count.

interface Document {
  title: string;
  revision: number;
  writes: number;
}

const documentFile = (dir: string) => join(dir, "document.json");
const loadDocument = (dir: string): Document => JSON.parse(readFileSync(documentFile(dir), "utf8")) as Document;
const view = (doc: Document) => JSON.stringify({ title: doc.title, revision: doc.revision });

function documentTools(dir: string, options: { crashAfterWrite: boolean }) {
  const readDocument = tool(() => view(loadDocument(dir)), {
    name: "read_document",
    description: "Read the current document's title and revision.",
    schema: z.object({}),
  });
  const renameDocument = tool(
    ({ title, expectedRevision }) => {
      const doc = loadDocument(dir);
      if (expectedRevision !== doc.revision) throw new Error(`revision conflict: expected ${String(expectedRevision)}`);
      const next = { title, revision: doc.revision + 1, writes: doc.writes + 1 };
      writeFileSync(documentFile(dir), JSON.stringify(next));
      if (options.crashAfterWrite) {
        // The side effect is done; the process dies before the middleware records the result.
        console.log(`worker: rename_document wrote ${view(next)}; killed before its result is recorded`);
        process.kill(process.pid, "SIGKILL");
      }
      return view(next);
    },
    {
      name: "rename_document",
      description: "Rename the document. Pass the revision you read.",
      schema: z.object({ title: z.string().min(1), expectedRevision: z.number().int() }),
    },
  );
  return [readDocument, renameDocument];
}

// ---------------------------------------------------------------------------------------------
// Turns

function turn(turnId: string, message: string): TurnInput {
  return { scopeId: "doc-1", turnId, policyVersion: "2026-11", segments: [{ label: "user", content: message }] };
}

const TURN_1 = turn("turn-1", "Please rename this document to Field notes.");
const TURN_2 = turn("turn-2", "Actually, call it Field notes (final).");
const FINAL_RENAME: ScriptedToolCall = {
  id: "call-rename-final",
  name: "rename_document",
  args: { title: "Field notes (final)", expectedRevision: 1 },
};

async function runTurn(
  store: GuardrailStore,
  dir: string,
  input: TurnInput,
  script: ScriptStep[],
  options = { crashAfterWrite: false },
): Promise<BaseMessage[]> {
  const receipt = await admitTurn({ store, input, moderate: () => true });
  if (!receipt.allowed) throw new Error("the turn was denied");
  const agent = createAgent({
    model: new ScriptedModel(script),
    tools: documentTools(dir, options),
    middleware: [
      createDocumentGuardrails({
        input,
        store,
        userMessageLabel: "user",
        authorize: (_call, current) => current.scopeId === "doc-1",
        tools: { read_document: { kind: "document-read" }, rename_document: { kind: "mutation" } },
      }),
    ],
  });
  const message = input.segments[0]?.content ?? "";
  const result = await agent.invoke({ messages: [new HumanMessage(message)] });
  return result.messages;
}

function toolLines(messages: BaseMessage[]): string[] {
  return messages.filter(ToolMessage.isInstance).map((message) => {
    const content = typeof message.content === "string" ? message.content : JSON.stringify(message.content);
    return `${message.name ?? "?"} [${message.status ?? "success"}]: ${content}`;
  });
}

// ---------------------------------------------------------------------------------------------
// Worker mode: `durable-agent.ts --worker DIR` runs turn 2 and is killed inside its write.

if (process.argv[2] === "--worker") {
  const dir = process.argv[3] ?? "";
  const store = SqliteGuardrailStore.open({ path: join(dir, "guardrails.sqlite") });
  await runTurn(
    store,
    dir,
    TURN_2,
    [{ toolCalls: [{ id: "call-read-w", name: "read_document", args: {} }] }, { toolCalls: [FINAL_RENAME] }, { content: "Renamed." }],
    { crashAfterWrite: true },
  );
  // Not reached: the rename kills this process.
  process.exit(0);
}

// ---------------------------------------------------------------------------------------------
// The demo

const trace: string[] = [];
const failures: string[] = [];
/** A line of the trace that is compared with the expected one. */
const say = (line = "") => {
  trace.push(line);
  console.log(line);
};
/** Output shown for people but not compared (ages, paths, the CLI's wording). */
const show = (text: string) => {
  console.log(text.replace(/\n$/, "").replace(/^/gm, "    "));
};
const check = (what: string, ok: boolean) => {
  if (!ok) failures.push(what);
};


const dir = mkdtempSync(join(tmpdir(), "arkah-durable-"));
const storePath = join(dir, "guardrails.sqlite");
const flags = ["--sqlite", storePath];
const startedAt = new Date().toISOString();
writeFileSync(documentFile(dir), JSON.stringify({ title: "Untitled", revision: 0, writes: 0 }));

try {
  console.log(`store: ${storePath}\n`);
  const store = SqliteGuardrailStore.open({ path: storePath });

  say("--- turn 1: read, then rename ---");
  const first = await runTurn(store, dir, TURN_1, [
    { toolCalls: [{ id: "call-read-1", name: "read_document", args: {} }] },
    { toolCalls: [{ id: "call-rename-1", name: "rename_document", args: { title: "Field notes", expectedRevision: 0 } }] },
    { content: "Renamed the document to Field notes." },
  ]);
  toolLines(first).forEach((line) => say(line));

  say();
  say("--- turn 2, in a worker process killed inside the write ---");
  // This file again, under the same loader flags (tsx), in worker mode.
  const workerArgs = [...process.execArgv, fileURLToPath(import.meta.url), "--worker", dir];
  const worker = spawnSync(process.execPath, workerArgs, { encoding: "utf8" });
  worker.stdout.trim().split("\n").filter(Boolean).forEach((line) => say(line));
  say(`worker exit: ${worker.signal ?? `code ${String(worker.status)}`}`);
  if (worker.signal !== "SIGKILL") show(worker.stderr);

  say();
  say("--- operator: arkah-guardrails inspect ---");
  const table = arkahGuardrails([...flags, "inspect"]);
  show(table.stdout + table.stderr);
  check("inspect exits 0", table.code === 0);
  const listed = arkahGuardrails([...flags, "inspect", "--json"]);
  check("inspect --json exits 0", listed.code === 0);
  const rows = JSON.parse(listed.code === 0 ? listed.stdout : "[]") as Record<string, unknown>[];
  const expectedKey = mutationKey(TURN_2, FINAL_RENAME);
  for (const row of rows) {
    say(`unresolved: ${String(row.state)} ${String(row.toolName)} ${String(row.toolCallId)} in ${String(row.scopeId)}`);
    say(`  its mutationKey is mutationKey(turn 2, the rename call): ${String(row.mutationKey === expectedKey)}`);
  }

  say();
  const doc = loadDocument(dir);
  say(`--- operator: the document service shows revision ${String(doc.revision)}, "${doc.title}": the write happened ---`);
  const resultFile = join(dir, "verified-result.txt");
  writeFileSync(resultFile, view(doc));
  const reconcileArgs = [...flags, "reconcile", "--turn-key", turnKey(TURN_2), "--completed", "--result-file", resultFile];
  const reconciled = arkahGuardrails([...reconcileArgs, "--operator-ref", "OPS-1234"]);
  show(reconciled.stdout + reconciled.stderr);
  say(`reconcile --completed: exit ${String(reconciled.code)}`);
  const repeated = arkahGuardrails([...reconcileArgs, "--operator-ref", "OPS-1234"]);
  show(repeated.stdout + repeated.stderr);
  say(`the same reconcile again: exit ${String(repeated.code)} (already reconciled: nothing changed)`);

  say();
  say("--- turn 2 again: the client's transport retry (same turn id, same call) ---");
  const retry = await runTurn(store, dir, TURN_2, [
    { toolCalls: [{ id: "call-read-2", name: "read_document", args: {} }] },
    { toolCalls: [FINAL_RENAME] },
    { content: "Renamed the document to Field notes (final)." },
  ]);
  toolLines(retry).forEach((line) => say(line));
  store.close();

  say();
  say("--- operator: arkah-guardrails audit ---");
  const exported = arkahGuardrails([...flags, "audit", "--since", startedAt]);
  check("audit exits 0", exported.code === 0);
  const events = exported.stdout
    .trim()
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, string | number | undefined>);
  const summary = (event: Record<string, string | number | undefined>) =>
    [event.decision, event.toolName, event.toolCallId, event.action, event.code, event.operatorRef === undefined ? undefined : `by ${String(event.operatorRef)}`]
      .filter((part) => part !== undefined)
      .map(String)
      .join(" ");
  show(events.map((event) => `#${String(event.seq)} ${summary(event)}`).join("\n"));
  const reconciledAt = events.findIndex((event) => event.decision === "reconciled");
  events.filter((event) => event.decision === "reconciled").forEach((event) => say(summary(event)));
  events
    .slice(reconciledAt + 1)
    .filter((event) => event.decision === "replayed" || (event.decision === "executed" && event.kind === "mutation"))
    .forEach((event) => say(`then: ${summary(event)}`));

  say();
  say(`writes: ${String(loadDocument(dir).writes)}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}

const expected = [
  "--- turn 1: read, then rename ---",
  'read_document [success]: {"title":"Untitled","revision":0}',
  'rename_document [success]: {"title":"Field notes","revision":1}',
  "",
  "--- turn 2, in a worker process killed inside the write ---",
  'worker: rename_document wrote {"title":"Field notes (final)","revision":2}; killed before its result is recorded',
  "worker exit: SIGKILL",
  "",
  "--- operator: arkah-guardrails inspect ---",
  "unresolved: pending rename_document call-rename-final in doc-1",
  "  its mutationKey is mutationKey(turn 2, the rename call): true",
  "",
  '--- operator: the document service shows revision 2, "Field notes (final)": the write happened ---',
  "reconcile --completed: exit 0",
  "the same reconcile again: exit 0 (already reconciled: nothing changed)",
  "",
  "--- turn 2 again: the client's transport retry (same turn id, same call) ---",
  'read_document [success]: {"title":"Field notes (final)","revision":2}',
  'rename_document [success]: {"title":"Field notes (final)","revision":2}',
  "",
  "--- operator: arkah-guardrails audit ---",
  "reconciled rename_document call-rename-final completed by OPS-1234",
  "then: replayed rename_document call-rename-final",
  "",
  "writes: 2",
];
if (trace.join("\n") !== expected.join("\n")) failures.push("the trace differs from the expected one");
if (failures.length > 0) {
  console.error(`\ndurable demo: ${failures.join("; ")}`);
  process.exit(1);
}

/**
 * An approval decided from another process: an agent pauses on a `requireApproval` guardrail, an
 * operator approves the request with the `arkah-guardrails` CLI, and a fresh agent, built from
 * scratch on the same files as after a restart, resumes the thread. Real `createAgent` loops, real
 * tools, a SQLite guardrail store, a SQLite LangGraph checkpointer
 * (`@langchain/langgraph-checkpoint-sqlite`) and three OS processes; only the model's responses
 * and moderation are stubbed.
 *
 *   pnpm example:approvals
 *
 * 1. Process 1 admits the turn, reads the document and asks to rename it. The guardrail stores an
 *    approval request and pauses the run (a LangGraph interrupt, checkpointed). The process exits.
 * 2. Process 2 is the operator: `arkah-guardrails approvals` lists the request with the arguments
 *    the call would run with, and `decide --approve` records the decision in the store.
 * 3. Process 3 builds the agent again and resumes the thread with `new Command({ resume })`: the
 *    stored decision lets the rename run, once, and the request becomes `applied`.
 *
 * Prints a trace and exits non-zero if anything differs from what is expected.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { Command } from "@langchain/langgraph";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { createAgent, tool } from "langchain";
import { z } from "zod";
import { admitTurn, createDocumentGuardrails, requireApproval, type ApprovalRequest, type TurnInput } from "arkah-agent-guardrails";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { ScriptedModel, type ScriptStep } from "arkah-agent-guardrails/testing";
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

function documentTools(dir: string) {
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
// The agent, built the same way in every process

const TURN: TurnInput = {
  scopeId: "doc-1",
  turnId: "turn-approval-1",
  policyVersion: "2026-11",
  segments: [{ label: "user", content: "Please rename this document to Field notes." }],
};
const THREAD = { configurable: { thread_id: "thread-doc-1" } };

/** What the model answers, by how many times it has answered in this thread: a restart changes nothing. */
const SCRIPT: ScriptStep[] = [
  { toolCalls: [{ id: "call-read-1", name: "read_document", args: {} }] },
  { toolCalls: [{ id: "call-rename-1", name: "rename_document", args: { title: "Field notes", expectedRevision: 0 } }] },
  { content: "Renamed the document to Field notes." },
];
const byTranscript: ScriptStep = (messages) => {
  const step = SCRIPT[messages.filter((message) => AIMessage.isInstance(message)).length];
  if (step === undefined || typeof step === "function" || AIMessage.isInstance(step)) throw new Error("the script ran out");
  return step;
};

/** A fresh agent on the files in `dir`: the guardrail store and the checkpointer. */
function buildAgent(dir: string) {
  const store = SqliteGuardrailStore.open({ path: join(dir, "guardrails.sqlite") });
  const checkpointer = SqliteSaver.fromConnString(join(dir, "checkpoints.sqlite"));
  const agent = createAgent({
    model: new ScriptedModel(SCRIPT.map(() => byTranscript)),
    tools: documentTools(dir),
    checkpointer,
    middleware: [
      createDocumentGuardrails({
        input: TURN,
        store,
        userMessageLabel: "user",
        authorize: (_call, turn) => turn.scopeId === "doc-1",
        tools: { read_document: { kind: "document-read" }, rename_document: { kind: "mutation" } },
        guardrails: [
          requireApproval({
            tools: ["rename_document"],
            describe: ({ args }) => `Rename the document to ${JSON.stringify(args.title)}?`,
          }),
        ],
      }),
    ],
  });
  const close = () => {
    checkpointer.db.close();
    store.close();
  };
  return { agent, store, close };
}

function toolLines(messages: readonly BaseMessage[]): string[] {
  return messages.filter(ToolMessage.isInstance).map((message) => {
    const content = typeof message.content === "string" ? message.content : JSON.stringify(message.content);
    return `${message.name ?? "?"} [${message.status ?? "success"}]: ${content}`;
  });
}

// ---------------------------------------------------------------------------------------------
// Process 1: `--pause DIR` runs the turn until the guardrail pauses it.

if (process.argv[2] === "--pause") {
  const dir = process.argv[3] ?? "";
  const { agent, store, close } = buildAgent(dir);
  const receipt = await admitTurn({ store, input: TURN, moderate: () => true });
  if (!receipt.allowed) throw new Error("the turn was denied");
  const result = await agent.invoke({ messages: [new HumanMessage(TURN.segments[0]?.content ?? "")] }, THREAD);
  toolLines(result.messages).forEach((line) => console.log(line));
  for (const pending of result.__interrupt__ ?? []) {
    const request = pending.value as ApprovalRequest;
    console.log(`paused: ${request.tool} ${JSON.stringify(request.args)} waits for approval: ${request.reason ?? ""}`);
  }
  close();
  process.exit(0);
}

// ---------------------------------------------------------------------------------------------
// Process 3: `--resume DIR` builds the agent from scratch and resumes the thread.

if (process.argv[2] === "--resume") {
  const dir = process.argv[3] ?? "";
  const { agent, store, close } = buildAgent(dir);
  // The paused run's interrupts, from the checkpointer: which requests the thread waits on.
  const state = await agent.graph.getState(THREAD);
  const interrupts = state.tasks.flatMap((task) => task.interrupts);
  const resume: Record<string, unknown> = {};
  for (const pending of interrupts) {
    const { approvalId } = pending.value as ApprovalRequest;
    // The operator decided in the store; a decision recorded there is the one applied, whatever
    // the resume value says. Resuming with it, keyed by the interrupt and the request, says so.
    const record = await store.getApproval(approvalId);
    if (record?.decision === undefined) throw new Error(`request ${approvalId} is ${record?.status ?? "missing"}: not decided yet`);
    console.log(`resuming: request for ${record.toolName} ${record.toolCallId} is ${record.status} by ${record.operatorRef ?? "?"}`);
    if (pending.id !== undefined) resume[pending.id] = { ...record.decision, approvalId };
  }
  const result = await agent.invoke(new Command({ resume }), THREAD);
  const before = (state.values as { messages: BaseMessage[] }).messages.length;
  toolLines(result.messages.slice(before)).forEach((line) => console.log(line));
  const last = result.messages.at(-1);
  console.log(`final answer: ${last === undefined ? "" : last.text}`);
  close();
  process.exit(0);
}

// ---------------------------------------------------------------------------------------------
// The demo: three processes on the same files

const trace: string[] = [];
const failures: string[] = [];
/** A line of the trace that is compared with the expected one. */
const say = (line = "") => {
  trace.push(line);
  console.log(line);
};
/** Output shown for people but not compared (ages, ids, paths, the CLI's wording). */
const show = (text: string) => {
  if (text.trim() !== "") console.log(text.replace(/\n$/, "").replace(/^/gm, "    "));
};
const check = (what: string, ok: boolean) => {
  if (!ok) failures.push(what);
};


/** This file again, under the same loader flags (tsx), in another mode: another OS process. */
function agentProcess(mode: "--pause" | "--resume", dir: string): string[] {
  const child = spawnSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), mode, dir], { encoding: "utf8" });
  check(`${mode} exits 0`, child.status === 0);
  if (child.status !== 0) show(child.stderr);
  return child.stdout.trim().split("\n").filter(Boolean);
}

const dir = mkdtempSync(join(tmpdir(), "arkah-approvals-"));
const flags = ["--sqlite", join(dir, "guardrails.sqlite")];
writeFileSync(documentFile(dir), JSON.stringify({ title: "Untitled", revision: 0, writes: 0 }));

try {
  console.log(`store: ${flags[1] ?? ""}\ncheckpoints: ${join(dir, "checkpoints.sqlite")}\n`);

  say("--- process 1: the agent reads, asks to rename, and the guardrail pauses it ---");
  agentProcess("--pause", dir).forEach((line) => say(line));
  say(`writes so far: ${String(loadDocument(dir).writes)}`);

  say();
  say("--- process 2: the operator, with arkah-guardrails ---");
  const table = arkahGuardrails([...flags, "approvals", "--status", "pending"]);
  show(table.stdout + table.stderr);
  check("approvals exits 0", table.code === 0);
  const listed = arkahGuardrails([...flags, "approvals", "--status", "pending", "--json"]);
  check("approvals --json exits 0", listed.code === 0);
  const pending = JSON.parse(listed.code === 0 ? listed.stdout : "[]") as { approvalId: string; toolName: string; toolCallId: string; args: unknown }[];
  for (const request of pending) say(`pending: ${request.toolName} ${request.toolCallId} ${JSON.stringify(request.args)}`);
  const approvalId = pending[0]?.approvalId ?? "";
  const decideArgs = [...flags, "decide", "--approval-id", approvalId, "--approve", "--operator-ref", "OPS-77"];
  const decided = arkahGuardrails(decideArgs);
  show(decided.stdout + decided.stderr);
  say(`decide --approve: exit ${String(decided.code)}`);
  // A re-delivered decision (a retried request, a replayed webhook) is the same answer, not a refusal.
  const repeated = arkahGuardrails(decideArgs);
  show(repeated.stdout + repeated.stderr);
  say(`the same decide again: exit ${String(repeated.code)} (a repeat: the same answer, nothing changed or audited)`);
  // Another decision on the decided request is refused, and audited with who sent it.
  const other = arkahGuardrails([...flags, "decide", "--approval-id", approvalId, "--reject", "--message", "too late", "--operator-ref", "OPS-78"]);
  show(other.stderr);
  say(`another decision: exit ${String(other.code)} (wrong state: already approved, nothing changed)`);
  say(`writes so far: ${String(loadDocument(dir).writes)}`);

  say();
  say("--- process 3: a fresh agent on the same files resumes the thread ---");
  agentProcess("--resume", dir).forEach((line) => say(line));

  say();
  say("--- afterwards ---");
  const applied = arkahGuardrails([...flags, "approvals", "--json"]);
  check("approvals --json exits 0", applied.code === 0);
  const records = JSON.parse(applied.code === 0 ? applied.stdout : "[]") as { status: string; toolName: string; toolCallId: string; operatorRef?: string }[];
  for (const record of records) say(`request: ${record.status} ${record.toolName} ${record.toolCallId} (decided by ${record.operatorRef ?? "?"})`);
  const exported = arkahGuardrails([...flags, "audit"]);
  check("audit exits 0", exported.code === 0);
  const events = exported.stdout
    .trim()
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, string | undefined>);
  const steps = events
    .filter((event) => event.decision === "approval" || (event.decision === "executed" && event.kind === "mutation"))
    .map((event) =>
      [event.decision, event.action, event.code === undefined ? undefined : `(${event.code})`, event.operatorRef === undefined ? undefined : `by ${event.operatorRef}`]
        .filter(Boolean)
        .join(" "),
    );
  say(`audit: ${steps.join(", ")}`);
  say(`writes: ${String(loadDocument(dir).writes)}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}

const expected = [
  "--- process 1: the agent reads, asks to rename, and the guardrail pauses it ---",
  'read_document [success]: {"title":"Untitled","revision":0}',
  'paused: rename_document {"title":"Field notes","expectedRevision":0} waits for approval: Rename the document to "Field notes"?',
  "writes so far: 0",
  "",
  "--- process 2: the operator, with arkah-guardrails ---",
  'pending: rename_document call-rename-1 {"title":"Field notes","expectedRevision":0}',
  "decide --approve: exit 0",
  "the same decide again: exit 0 (a repeat: the same answer, nothing changed or audited)",
  "another decision: exit 4 (wrong state: already approved, nothing changed)",
  "writes so far: 0",
  "",
  "--- process 3: a fresh agent on the same files resumes the thread ---",
  "resuming: request for rename_document call-rename-1 is approved by OPS-77",
  'rename_document [success]: {"title":"Field notes","revision":1}',
  "final answer: Renamed the document to Field notes.",
  "",
  "--- afterwards ---",
  "request: applied rename_document call-rename-1 (decided by OPS-77)",
  "audit: approval requested, approval approve by OPS-77, approval decision_refused (already_decided) by OPS-78, approval applied, executed",
  "writes: 1",
];
if (trace.join("\n") !== expected.join("\n")) failures.push("the trace differs from the expected one");
if (failures.length > 0) {
  console.error(`\napproval example: ${failures.join("; ")}`);
  process.exit(1);
}

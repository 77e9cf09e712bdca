/**
 * The store fault-injection matrix (issue 12, item 1): for each store call a guarded turn makes
 * (a read-then-write turn, the same with an approval, and a turn with one side effect),
 * and each fault kind (test/support/faults.ts), run the turn through the real `createAgent` loop
 * with that call faulted, then retry the same turn (same input, same call ids) against the healthy
 * store, and judge the cell:
 *
 * - at most one write (the document service's executed writes, and the write tool's body starts),
 *   or for the side-effect turn at most one effect (notifications sent, the tool's body starts);
 * - a recorded result (a settled `complete` claim) is replayed on the retry, not run again;
 * - a write that ran but was not recorded is refused on the retry, never re-run;
 * - no store error text (the fault's marker, a store method's name) reaches the model: neither in
 *   what the model was sent nor in the runs' transcripts;
 * - a fault before the claim leaves the turn's slot free: the retry performs the write.
 *
 * A "slot lost" is a cell after which no write happened and the retry could not make one: the
 * claim landed, its answer did not, and only an operator can reconcile it. That is the contract
 * (a claim nobody can settle stays closed), reported rather than hidden; it is a violation only
 * when the fault struck before the claim.
 */
import { HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { Command, MemorySaver } from "@langchain/langgraph";
import { tool } from "langchain";
import { z } from "zod";
import { admitTurn, requireApproval, turnKey, type GuardrailStore, type TurnInput } from "arkah-agent-guardrails";
import type { ScriptStep } from "arkah-agent-guardrails/testing";
import {
  DocumentService,
  guardedAgent,
  outcomeOf,
  read,
  rename,
  TOOL_POLICIES,
  turnInput,
  userText,
  type ToolOutcome,
} from "./fixtures.js";
import { FAULT_KINDS, FAULT_MARKER, FaultPlan, STORE_METHODS, type Fault, type FaultKind } from "./faults.js";

export const TURN_KINDS = ["read-then-write", "approval", "side-effect"] as const;
export type TurnKind = (typeof TURN_KINDS)[number];

/** What a run left behind: what the model was sent, the final transcript, and how it ended. */
interface RunRecord {
  /** Every message list the model was called with. */
  readonly seen: BaseMessage[][];
  readonly messages: readonly BaseMessage[];
  readonly error: unknown;
}

interface TurnSetup {
  readonly input: TurnInput;
  readonly service: DocumentService;
  /** Body starts of the write tool (or the side-effect tool): a re-run shows here even when the write itself fails. */
  readonly bodies: { starts: number };
  /** The side-effect turn's sent notifications: its effects. */
  readonly outbox: string[];
}

function newSetup(input: TurnInput): TurnSetup {
  return { input, service: new DocumentService(), bodies: { starts: 0 }, outbox: [] };
}

/** The call the turn's cells judge: the write, or the side effect. */
const TARGET: Record<TurnKind, string> = { "read-then-write": "w1", approval: "w1", "side-effect": "e1" };
/** What the side-effect tool answers. */
const NOTIFIED = "notified";

/** The effects a turn made: the document's executed writes, or the notifications sent. */
function effectsOf(kind: TurnKind, setup: TurnSetup): number {
  return kind === "side-effect" ? setup.outbox.length : setup.service.writes;
}

/**
 * The side-effect turn's tool: it notifies (the outbox is the effect) and answers text. No read
 * first: a side effect needs none.
 */
function notifyTool(setup: TurnSetup) {
  return tool(
    ({ text }) => {
      setup.bodies.starts += 1;
      setup.outbox.push(text);
      return NOTIFIED;
    },
    { name: "notify", description: "Notify the owner.", schema: z.object({ text: z.string() }) },
  );
}

/** The turn's script, each step recording what the model was sent. */
function recordingScript(kind: TurnKind, seen: BaseMessage[][]): ScriptStep[] {
  const replies =
    kind === "side-effect"
      ? [{ toolCalls: [{ id: "e1", name: "notify", args: { text: "renamed" } }] }, { content: "done" }]
      : [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }];
  return replies.map((reply) => (messages: readonly BaseMessage[]) => {
    seen.push([...messages]);
    return reply;
  });
}

/**
 * One run of the turn: admission through `admitStore`, the agent's guardrails on `agentStore`.
 * The approval turn asks a person before the write (`requireApproval`), pauses, and is resumed
 * with an approval, on a thread of its own; it resumes at most a few times, so a run that keeps
 * asking ends as a failed run.
 */
async function runTurn(
  kind: TurnKind,
  setup: TurnSetup,
  stores: { admit: GuardrailStore; agent: GuardrailStore },
  signal: AbortSignal | undefined,
): Promise<RunRecord> {
  const seen: BaseMessage[][] = [];
  const { agent } = guardedAgent({
    store: stores.agent,
    input: setup.input,
    service: setup.service,
    hooks: {
      beforeWrite: () => {
        setup.bodies.starts += 1;
      },
    },
    script: recordingScript(kind, seen),
    ...(kind === "approval"
      ? { guardrails: { guardrails: [requireApproval({ tools: ["rename_document"] })] }, checkpointer: new MemorySaver() }
      : {}),
    ...(kind === "side-effect"
      ? { guardrails: { tools: { ...TOOL_POLICIES, notify: { kind: "side-effect" } } }, extraTools: [notifyTool(setup)] }
      : {}),
  });
  const config = { configurable: { thread_id: `${setup.input.turnId}-${String(Math.random())}` }, ...(signal === undefined ? {} : { signal }) };
  let messages: readonly BaseMessage[] = [];
  try {
    await admitWith(stores.admit, setup.input, signal);
    let result = await agent.invoke({ messages: [new HumanMessage(userText(setup.input))] }, config);
    for (let round = 0; round < 3 && (result.__interrupt__?.length ?? 0) > 0; round++) {
      // Each request answered by its own interrupt id and approvalId, as a host must once a
      // call has more than one request (test/agent/approvals.test.ts, answerEach).
      const answers = Object.fromEntries(
        (result.__interrupt__ ?? []).map((entry) => [entry.id ?? "", { decision: "approve", approvalId: approvalIdOf(entry.value) }]),
      );
      result = await agent.invoke(new Command({ resume: answers }), config);
    }
    messages = result.messages;
    if ((result.__interrupt__?.length ?? 0) > 0) return { seen, messages, error: new Error("the run still asks for approval") };
    return { seen, messages, error: undefined };
  } catch (error) {
    return { seen, messages, error };
  }
}

function approvalIdOf(value: unknown): string | undefined {
  const id = typeof value === "object" && value !== null ? (value as { approvalId?: unknown }).approvalId : undefined;
  return typeof id === "string" ? id : undefined;
}

async function admitWith(store: GuardrailStore, input: TurnInput, signal: AbortSignal | undefined) {
  return admitTurn({ store, input, moderate: () => true, ...(signal === undefined ? {} : { signal }) });
}

/**
 * The calls a healthy turn makes, in order, through a plan with no fault. The admitting server and
 * the worker running the agent hold separate views of the store (as separate processes would), so
 * the worker's own receipt check is one of the calls.
 */
export async function turnCalls(kind: TurnKind, store: GuardrailStore, input: TurnInput): Promise<string[]> {
  const plan = new FaultPlan(undefined);
  const setup = newSetup(input);
  const run = await runTurn(kind, setup, { admit: plan.store(store), agent: plan.store(store) }, plan.signal);
  await plan.drain();
  if (run.error !== undefined) throw new Error(`a healthy ${kind} turn failed`, { cause: run.error });
  if (effectsOf(kind, setup) !== 1) throw new Error(`a healthy ${kind} turn had ${String(effectsOf(kind, setup))} effects`);
  return plan.calls;
}

export interface Cell {
  readonly store: string;
  readonly turn: TurnKind;
  /** `method#occurrence`. */
  readonly call: string;
  readonly kind: FaultKind;
  /** How the faulted run ended: `completed`, or the error's name. */
  readonly faultRun: string;
  /** After the faulted run: the write ran, and its result was recorded. */
  readonly wroteFirst: boolean;
  readonly recorded: boolean;
  /** The retry's answer to the write: `executed`, `replayed`, a refusal code, or `failed: ...`. */
  readonly retry: string;
  readonly writes: number;
  readonly slotLost: boolean;
  readonly violations: readonly string[];
}

/**
 * The calls whose failure may leave a claim closed by contract: a claim that landed but whose
 * answer was lost has no token to settle or release it with, and a release that fails leaves the
 * claim pending. Only an operator can reopen such a slot (`reconcileMutation`, no-effect).
 */
const CLOSED_BY_CONTRACT: ReadonlySet<string> = new Set(["claimMutation", "releaseMutation", "claimEffect", "releaseEffect"]);

/** A run that failed with one of these crashed on a value nobody validated. */
const UNTYPED_ERRORS: ReadonlySet<string> = new Set(["TypeError", "RangeError", "ReferenceError", "SyntaxError"]);

/** Store method names and error class names that would betray store detail in a transcript. */
const LEAK_PATTERNS = [FAULT_MARKER, "StoreContractError", "SettlementError", "InjectedStoreFault", ...STORE_METHODS];

function leaks(messages: readonly BaseMessage[]): string[] {
  return messages.flatMap((message) => {
    const text = typeof message.content === "string" ? message.content : JSON.stringify(message.content);
    return LEAK_PATTERNS.filter((pattern) => text.includes(pattern)).map((pattern) => `${message.type}: ${pattern}`);
  });
}

function targetOutcome(messages: readonly BaseMessage[], callId: string): ToolOutcome | undefined {
  return messages.some((message) => ToolMessage.isInstance(message) && message.tool_call_id === callId) ? outcomeOf(messages, callId) : undefined;
}

/**
 * Runs one cell: the turn with `fault` on a fresh scope of `store`, then its retry on `store`
 * itself, and judges them.
 */
export async function runCell(
  storeName: string,
  store: GuardrailStore,
  turn: TurnKind,
  fault: Fault,
  claimIndex: number,
  faultIndex: number,
  cellId: string,
): Promise<Cell> {
  const input = turnInput({ scopeId: `doc-${cellId}`, turnId: `turn-${cellId}` });
  const setup = newSetup(input);
  const target = TARGET[turn];
  const plan = new FaultPlan(fault);
  const faulted = await runTurn(turn, setup, { admit: plan.store(store), agent: plan.store(store) }, plan.signal);
  await plan.drain();
  const violations: string[] = [];
  if (!plan.fired) violations.push("the fault never fired");

  const wroteFirst = effectsOf(turn, setup) > 0;
  const startsFirst = setup.bodies.starts;
  const key = turnKey(input);
  const trail = await store.readAudit({ turnKey: key });
  const claimKey = (event: (typeof trail)[number]) => (turn === "side-effect" ? event.effectKey : event.mutationKey);
  const recorded = trail.some((event) => event.decision === "executed" && event.toolCallId === target && claimKey(event) !== undefined);
  const recordedResult = wroteFirst ? (turn === "side-effect" ? NOTIFIED : setup.service.snapshot()) : undefined;

  const retried = await runTurn(turn, setup, { admit: store, agent: store }, undefined);
  const outcome = targetOutcome(retried.messages, target);
  const retry =
    retried.error !== undefined
      ? `failed: ${(retried.error as Error).name}`
      : outcome === undefined
        ? "no answer"
        : outcome.code ?? (outcome.status === "success" ? (recorded ? "replayed" : "executed") : "error");

  const writes = effectsOf(turn, setup);
  if (writes > 1) violations.push(`${String(writes)} writes`);
  if (setup.bodies.starts > 1) violations.push(`the write's body started ${String(setup.bodies.starts)} times`);
  if (retried.error !== undefined) violations.push(`the retry failed: ${(retried.error as Error).message}`);
  if (recorded) {
    const replayed = outcome?.status === "success" && outcome.content === recordedResult && setup.bodies.starts === startsFirst;
    const audited = (await store.readAudit({ turnKey: key })).some((event) => event.decision === "replayed" && event.toolCallId === target);
    if (!replayed || !audited) violations.push("a recorded result was not replayed");
  } else if (wroteFirst) {
    if (setup.bodies.starts !== startsFirst) violations.push("an unrecorded write was run again");
    if (outcome?.status !== "error") violations.push("an unrecorded write was not refused");
  }
  const leaked = [...faulted.seen.flat(), ...faulted.messages, ...retried.seen.flat(), ...retried.messages];
  for (const leak of new Set(leaks(leaked))) violations.push(`store detail reached the model (${leak})`);
  const slotLost = writes === 0;
  if (slotLost && faultIndex < claimIndex) violations.push("a fault before the claim lost the slot");
  else if (slotLost && !CLOSED_BY_CONTRACT.has(fault.method)) violations.push("a fault after the claim, before the body started, lost the slot");
  if (faulted.error !== undefined && UNTYPED_ERRORS.has((faulted.error as Error).name)) {
    violations.push(`a store answer crashed the run untyped (${(faulted.error as Error).name})`);
  }
  if (!wroteFirst && !slotLost && outcome?.status !== "success") violations.push("the retry's write did not succeed");

  return {
    store: storeName,
    turn,
    call: `${fault.method}#${String(fault.occurrence)}`,
    kind: fault.kind,
    faultRun: faulted.error === undefined ? "completed" : (faulted.error as Error).name,
    wroteFirst,
    recorded,
    retry,
    writes,
    slotLost,
    violations,
  };
}

/** Every cell of both turns on one store. `prefix` keeps scopes apart between stores sharing a database. */
export async function runMatrix(storeName: string, store: GuardrailStore, prefix: string): Promise<Cell[]> {
  const cells: Cell[] = [];
  for (const turn of TURN_KINDS) {
    const calls = await turnCalls(turn, store, turnInput({ scopeId: `doc-${prefix}-${turn}-healthy`, turnId: `turn-${prefix}-${turn}-healthy` }));
    const claimIndex = calls.indexOf(turn === "side-effect" ? "claimEffect#1" : "claimMutation#1");
    if (claimIndex < 0) throw new Error(`a healthy ${turn} turn made no claim: ${calls.join(", ")}`);
    for (const [index, call] of calls.entries()) {
      const [method, occurrence] = call.split("#") as [Fault["method"], string];
      for (const kind of FAULT_KINDS) {
        const fault: Fault = { method, occurrence: Number(occurrence), kind };
        cells.push(await runCell(storeName, store, turn, fault, claimIndex, index, `${prefix}-${turn}-${call}-${kind}`));
      }
    }
  }
  return cells;
}

/** The matrix as a Markdown table, with a summary line. */
export function renderMatrix(cells: readonly Cell[]): string {
  const header = "| store | turn | faulted call | fault | faulted run | wrote | recorded | retry's write | writes | slot lost | violations |";
  const rule = "|---|---|---|---|---|---|---|---|---|---|---|";
  const yes = (value: boolean) => (value ? "yes" : "no");
  const rows = cells.map(
    (cell) =>
      `| ${cell.store} | ${cell.turn} | ${cell.call} | ${cell.kind} | ${cell.faultRun} | ${yes(cell.wroteFirst)} | ${yes(cell.recorded)} | ${cell.retry} | ${String(cell.writes)} | ${yes(cell.slotLost)} | ${cell.violations.length === 0 ? "none" : cell.violations.join("; ")} |`,
  );
  return [header, rule, ...rows].join("\n");
}

export function summarize(cells: readonly Cell[]): string {
  const violations = cells.reduce((sum, cell) => sum + cell.violations.length, 0);
  const lost = cells.filter((cell) => cell.slotLost).length;
  return `${String(cells.length)} cells, ${String(violations)} violations, ${String(lost)} slots lost`;
}

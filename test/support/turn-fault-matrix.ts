/**
 * The turn service's rows of the store fault-injection matrix (issue 21): `createTurnService`
 * drives the real `createAgent` loop (test/turns/support.ts) while one call the service makes to a
 * turn-record method (`beginTurn`, `finishTurn`, `resumeTurn`, `getTurn`; `getMutation` for `get`;
 * `listTurns` for `recover`, which takes over a turn whose worker died once its lease expired)
 * throws before it reaches the store, or reaches it, commits, and answers malformed (the answer is
 * lost). The agent's guardrails use the healthy store: their own calls are the main matrix's rows.
 * Then a healthy worker, same store, notes and checkpointer, retries (`submit`, and `decide` while
 * the turn waits), moving the store's clock past the lease whenever the turn answers `running`.
 * Scenarios: a turn, a turn with an approval, `get` of a completed turn, and a turn whose model
 * fails after its write completed (`write-then-fail`: it ends `failed`, its claim `complete`).
 *
 * Each row is judged: the faulted call rejects with the store's own error or a `StoreContractError`
 * (nothing untyped) or answers an outcome without store detail; at most one write and one entry
 * into the write tool's body; the retry converges to the scenario's end (`completed`, or `failed`
 * for `write-then-fail`, which a further retry replays and `get` reads) with exactly one write;
 * the turn is never left `running` once the lease expired and someone retried.
 */
import { MemorySaver } from "@langchain/langgraph";
import { StoreContractError, turnKey, type GuardrailStore, type TurnAnswer } from "arkah-agent-guardrails";
import { NotesService } from "../security/support.js";
import { failsAfterWrite, serviceHarness, type TestClock, turnOf } from "../turns/support.js";
import { deferred } from "./fixtures.js";
import { FaultPlan, FAULT_MARKER, InjectedStoreFault, type Fault, type StoreMethod } from "./faults.js";

/** The turn-record methods the service calls; only these are faulted here. */
const TURN_METHODS: ReadonlySet<StoreMethod> = new Set(["beginTurn", "finishTurn", "resumeTurn", "getTurn", "getMutation", "listTurns"]);
/** Throw: before the call reaches the store. Malformed: after it committed, its answer lost. */
export const TURN_FAULT_KINDS = ["throw", "malformed"] as const;
export const TURN_SCENARIOS = ["submit", "approval", "get", "write-then-fail", "recover"] as const;
export type TurnScenario = (typeof TURN_SCENARIOS)[number];

/** How a scenario's turn ends once it converged. */
function endOf(scenario: TurnScenario): "completed" | "failed" {
  return scenario === "write-then-fail" ? "failed" : "completed";
}

/** The model of a scenario's workers: the default, or one that fails after the write. */
function responderOf(scenario: TurnScenario) {
  return scenario === "write-then-fail" ? { responder: failsAfterWrite() } : {};
}

const LEASE_MS = 1_000;

export interface TurnRow {
  readonly scenario: TurnScenario;
  readonly call: string;
  readonly kind: Fault["kind"];
  /** How the faulted operations ended: each answer's status, or the error's name. */
  readonly faulted: readonly string[];
  /** The retry's steps, in order (`running` steps moved the clock past the lease). */
  readonly retry: readonly string[];
  readonly writes: number;
  readonly violations: readonly string[];
}

interface Attempt {
  readonly outcomes: string[];
  readonly violations: string[];
}

/** Runs one operation of the faulted worker: its answer, or a typed rejection. */
async function attempt<T extends { status: string }>(into: Attempt, operation: () => Promise<T>): Promise<T | undefined> {
  try {
    const answer = await operation();
    into.outcomes.push(answer.status);
    if (JSON.stringify(answer).includes(FAULT_MARKER)) into.violations.push(`store detail in the ${answer.status} answer`);
    return answer;
  } catch (error) {
    const typed = error instanceof InjectedStoreFault || StoreContractError.isInstance(error);
    into.outcomes.push(error instanceof Error ? error.name : "non-error");
    if (!typed) into.violations.push(`untyped rejection: ${error instanceof Error ? error.name : String(error)}`);
    else if (StoreContractError.isInstance(error) && error.message.includes(FAULT_MARKER)) into.violations.push("store detail in a StoreContractError");
    return undefined;
  }
}

/**
 * A worker that dies mid-run: its run is aborted inside the read tool's body (the turn stays
 * `running`), and the store's clock moves past its lease.
 */
async function diedMidRun(store: GuardrailStore, clock: TestClock, notes: NotesService, checkpointer: MemorySaver, turn: ReturnType<typeof turnOf>) {
  const reading = deferred();
  const never = deferred();
  const dying = serviceHarness({
    store,
    notes,
    checkpointer,
    hooks: {
      beforeRead: async () => {
        reading.resolve();
        await never.promise;
      },
    },
    service: { leaseMs: LEASE_MS },
  });
  const controller = new AbortController();
  const abandoned = dying.service.submit({ turn, signal: controller.signal }).catch(() => undefined);
  await reading.promise;
  controller.abort(new Error("the worker went away"));
  await abandoned;
  clock.advance(LEASE_MS);
}

/** The faulted worker's work for a scenario: submit; then, for approvals, decide what it paused on; or read the turn; or recover it. */
async function faultedWork(scenario: TurnScenario, store: GuardrailStore, clock: TestClock, plan: FaultPlan, notes: NotesService, checkpointer: MemorySaver) {
  const into: Attempt = { outcomes: [], violations: [] };
  const worker = serviceHarness({
    store: plan.store(store),
    agentStore: store,
    notes,
    checkpointer,
    approvals: scenario === "approval",
    ...responderOf(scenario),
    service: {
      leaseMs: LEASE_MS,
      logger: {
        warn: (message, fields) => {
          if (JSON.stringify(fields ?? {}).includes(FAULT_MARKER)) into.violations.push(`store detail logged with "${message}"`);
        },
      },
    },
  });
  const turn = turnOf({ turnId: plan.fault === undefined ? `healthy-${scenario}` : `${scenario}-${plan.fault.method}-${String(plan.fault.occurrence)}-${plan.fault.kind}` });
  if (scenario === "get") {
    // The healthy store runs the turn; `get` reads it through the faulted view.
    await serviceHarness({ store, notes, checkpointer, service: { leaseMs: LEASE_MS } }).service.submit({ turn });
    await attempt(into, () => worker.service.get(turnKey(turn)));
    return { turn, into };
  }
  if (scenario === "recover") {
    await diedMidRun(store, clock, notes, checkpointer, turn);
    // Each turn recover looked at, as `status` (a turn whose recovery failed is `error`, logged).
    await attempt(into, async () => {
      const summary = await worker.service.recover();
      return { status: summary.turns.map((each) => each.status).join("+") || "none", summary };
    });
    return { turn, into };
  }
  const answer = await attempt(into, () => worker.service.submit({ turn }));
  if (scenario === "approval" && answer?.status === "awaiting_approval") {
    const approvalId = answer.approvals[0]?.approvalId ?? "";
    await attempt(into, () => worker.service.decide({ approvalId, principal: "alice", decision: { decision: "approve" } }));
  }
  return { turn, into };
}

/** The turn-record calls a healthy scenario makes through the service, in order. */
export async function turnServiceCalls(scenario: TurnScenario, store: GuardrailStore, clock: TestClock): Promise<string[]> {
  const plan = new FaultPlan(undefined);
  const notes = new NotesService();
  const { into } = await faultedWork(scenario, store, clock, plan, notes, new MemorySaver());
  await plan.drain();
  if (into.violations.length > 0 || notes.writes.length !== 1) throw new Error(`a healthy ${scenario} turn: ${into.outcomes.join(", ")}`);
  return plan.calls.filter((call) => TURN_METHODS.has(call.split("#")[0] as StoreMethod));
}

/** One row: the scenario with `fault`, then a healthy worker's retry until the turn converges. */
export async function runTurnRow(scenario: TurnScenario, store: GuardrailStore, clock: TestClock, fault: Fault): Promise<TurnRow> {
  const notes = new NotesService();
  const checkpointer = new MemorySaver();
  const plan = new FaultPlan(fault);
  const { turn, into } = await faultedWork(scenario, store, clock, plan, notes, checkpointer);
  await plan.drain();
  const violations = [...into.violations];
  if (!plan.fired) violations.push("the fault never fired");
  if (notes.writes.length > 1) violations.push(`${String(notes.writes.length)} writes after the faulted call`);

  const retrier = serviceHarness({ store, notes, checkpointer, approvals: scenario === "approval", ...responderOf(scenario), service: { leaseMs: LEASE_MS } });
  const end = endOf(scenario);
  const retry: string[] = [];
  let last: TurnAnswer | undefined;
  for (let step = 0; step < 6 && last?.status !== end; step++) {
    last = await retrier.service.submit({ turn });
    retry.push(last.status);
    // A turn whose holder failed stays running until its lease expires: then the retry takes it over.
    if (last.status === "running") clock.advance(LEASE_MS);
    if (last.status === "awaiting_approval") {
      const approvalId = last.approvals[0]?.approvalId ?? "";
      const decided = await retrier.service.decide({ approvalId, principal: "alice", decision: { decision: "approve" } });
      retry.push(`decide:${decided.status}`);
    }
  }
  if (last?.status !== end) violations.push(`the retry did not converge (${retry.join(", ")})`);
  if ((await store.getTurn(turnKey(turn)))?.state !== end) violations.push(`the turn is not stored ${end}`);
  if (notes.writes.length !== 1) violations.push(`${String(notes.writes.length)} writes`);
  const bodies = notes.entries.filter((entry) => entry === "edit_note").length;
  if (bodies !== 1) violations.push(`the write's body started ${String(bodies)} times`);
  if (scenario === "get" || scenario === "write-then-fail") {
    // Read back, as every later retry and `get` will: a stored outcome the store cannot read fails here.
    try {
      const view = await retrier.service.get(turnKey(turn));
      if (view.status !== "found" || view.state !== end || view.mutation?.state !== "complete") violations.push(`get does not read the ${end} turn`);
      const again = await retrier.service.submit({ turn });
      if (!("replayed" in again) || !again.replayed || again.status !== end) violations.push(`a further retry does not replay the ${end} turn`);
    } catch (error) {
      violations.push(`reading the ${end} turn back throws ${error instanceof Error ? error.name : String(error)}`);
    }
  }
  return {
    scenario,
    call: `${fault.method}#${String(fault.occurrence)}`,
    kind: fault.kind,
    faulted: into.outcomes,
    retry,
    writes: notes.writes.length,
    violations,
  };
}

/** Every row on one store: each turn-record call (`turnServiceCalls`) of each scenario, each fault kind. */
export async function runTurnMatrix(store: GuardrailStore, clock: TestClock, calls: Readonly<Record<TurnScenario, readonly string[]>>): Promise<TurnRow[]> {
  const rows: TurnRow[] = [];
  for (const scenario of TURN_SCENARIOS) {
    for (const call of calls[scenario]) {
      const [method, occurrence] = call.split("#") as [StoreMethod, string];
      for (const kind of TURN_FAULT_KINDS) rows.push(await runTurnRow(scenario, store, clock, { method, occurrence: Number(occurrence), kind }));
    }
  }
  return rows;
}

export function renderTurnMatrix(rows: readonly TurnRow[]): string {
  const header = "| scenario | faulted call | fault | faulted answers | retry | writes | violations |\n|---|---|---|---|---|---|---|";
  const lines = rows.map(
    (row) =>
      `| ${row.scenario} | ${row.call} | ${row.kind} | ${row.faulted.join(", ")} | ${row.retry.join(", ")} | ${String(row.writes)} | ${row.violations.length === 0 ? "none" : row.violations.join("; ")} |`,
  );
  return [header, ...lines].join("\n");
}

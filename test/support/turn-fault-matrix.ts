/**
 * The turn service's rows of the store fault-injection matrix (issue 21): `createTurnService`
 * drives the real `createAgent` loop (test/turns/support.ts) while one call the service makes to a
 * turn-record method (`beginTurn`, `finishTurn`, `resumeTurn`, `getTurn`; `getMutation` for `get`;
 * `readAudit` for a completed outcome's refusals; `listTurns` for `recover`, which takes over a turn whose worker died once its lease expired)
 * throws before it reaches the store, or reaches it, commits, and answers malformed (the answer is
 * lost). The agent's guardrails use the healthy store: their own calls are the main matrix's rows.
 * Then a healthy worker, same store, notes and checkpointer, retries (`submit`, and `decide` while
 * the turn waits), moving the store's clock past the lease whenever the turn answers `running`.
 * Scenarios: a turn, a turn with an approval, `get` of a completed turn, a turn whose model
 * fails after its write completed (`write-then-fail`: it ends `failed`, its claim `complete`),
 * `recover` of a turn whose worker died mid-run (`recover`) and of a decided pause whose decider
 * died before resuming (`recover-decided`), a turn whose second write of a step is refused
 * (`refusal`: its completed outcome reads the audit trail, `readAudit`, for that refusal), a run that spans two lease renewals (`renew`), and a
 * run whose renewal finds the turn taken over (`renew-lost`: its worker stalled past the lease,
 * another worker completed the turn; the stalled run is aborted and answers the taker's outcome).
 *
 * The `confirm` rows (`runConfirmRows`) are not store faults: a worker dies inside the write body
 * (after the write, or before it), its lease expires, and a worker whose edit tool has `confirm`
 * recovers the turn; `confirm` answers completed, no-effect, unknown, or throws. Each row is
 * judged by where the claim, the turn and the writes end.
 *
 * Each row is judged: the faulted call rejects with the store's own error or a `StoreContractError`
 * (nothing untyped) or answers an outcome without store detail; at most one write and one entry
 * into the write tool's body; the retry converges to the scenario's end (`completed`, or `failed`
 * for `write-then-fail`, which a further retry replays and `get` reads) with exactly one write;
 * the turn is never left `running` once the lease expired and someone retried; a completed
 * `refusal` turn is stored with its refused call's code (never without it).
 */
import { ToolMessage } from "@langchain/core/messages";
import { MemorySaver } from "@langchain/langgraph";
import { StoreContractError, turnKey, type ConfirmClaim, type GuardrailStore, type TurnAnswer } from "arkah-agent-guardrails";
import type { RenewTurnInput } from "arkah-agent-guardrails/store";
import { NOTE_POLICIES, NotesService } from "../security/support.js";
import type { ScriptResponder } from "arkah-agent-guardrails/testing";
import { failsAfterWrite, NEW_BODY, serviceHarness, type TestClock, turnOf } from "../turns/support.js";
import { deferred, ForwardingStore } from "./fixtures.js";
import { FaultPlan, FAULT_MARKER, InjectedStoreFault, type Fault, type StoreMethod } from "./faults.js";

/** The turn-record methods the service calls; only these are faulted here. */
const TURN_METHODS: ReadonlySet<StoreMethod> = new Set(["beginTurn", "finishTurn", "resumeTurn", "getTurn", "getMutation", "listTurns", "renewTurn", "readAudit"]);
/** Throw: before the call reaches the store. Malformed: after it committed, its answer lost. */
export const TURN_FAULT_KINDS = ["throw", "malformed"] as const;
export const TURN_SCENARIOS = ["submit", "approval", "get", "write-then-fail", "recover", "recover-decided", "renew", "renew-lost", "refusal"] as const;
export type TurnScenario = (typeof TURN_SCENARIOS)[number];

/**
 * The renewals a scenario's calls pin: the ones its run waits for. Renewals run on a real-time
 * interval, so any run may make more on a slow machine; those are not pinned (nor faulted).
 */
const PINNED_RENEWALS: Readonly<Partial<Record<TurnScenario, number>>> = { renew: 2, "renew-lost": 1 };

/** Whether a scenario's workers pause the write on an approval. */
const approvalsIn = (scenario: TurnScenario) => scenario === "approval" || scenario === "recover-decided";

/**
 * The faulted worker's store, outside the fault plan: counts settled renewals (`until`), and holds
 * renewals at a gate while `gate` is pending (the worker stalls: it renews nothing).
 */
class Renewals extends ForwardingStore {
  settled = 0;
  gate: Promise<void> = Promise.resolve();
  #waiters: { count: number; resolve: () => void }[] = [];
  override async renewTurn(input: RenewTurnInput): Promise<boolean> {
    await this.gate;
    try {
      return await super.renewTurn(input);
    } finally {
      this.settled += 1;
      this.#waiters = this.#waiters.filter((waiter) => {
        if (this.settled < waiter.count) return true;
        waiter.resolve();
        return false;
      });
    }
  }
  /** Resolves once `count` renewals have answered or failed. */
  until(count: number): Promise<void> {
    if (this.settled >= count) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push({ count, resolve }));
  }
}

/** How a scenario's turn ends once it converged. */
function endOf(scenario: TurnScenario): "completed" | "failed" {
  return scenario === "write-then-fail" ? "failed" : "completed";
}

/** The model of a scenario's workers: the default, one that fails after the write, or one that writes twice in a step. */
function responderOf(scenario: TurnScenario) {
  if (scenario === "write-then-fail") return { responder: failsAfterWrite() };
  return scenario === "refusal" ? { responder: twoWritesInAStep() } : {};
}

/** Reads the note, then writes it twice in one step (the second is refused `single_mutation`), then answers. */
function twoWritesInAStep(): ScriptResponder {
  return (messages) => {
    const done = new Set(messages.filter((message) => ToolMessage.isInstance(message)).map((message) => message.name));
    if (!done.has("read_note")) return { toolCalls: [{ id: "r1", name: "read_note", args: { noteId: "note-7" } }] };
    if (!done.has("edit_note")) {
      return {
        toolCalls: [
          { id: "w1", name: "edit_note", args: { noteId: "note-7", body: NEW_BODY } },
          { id: "w2", name: "edit_note", args: { noteId: "note-7", body: "Buy soy milk" } },
        ],
      };
    }
    return { content: "Done: the note says oat milk now." };
  };
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
  const renewals = new Renewals(plan.store(store));
  const reading = deferred();
  const stalled = deferred();
  const hooks =
    scenario === "renew"
      ? // The read returns once two renewals were made: the run spans them.
        { beforeRead: () => renewals.until(2) }
      : scenario === "renew-lost"
        ? {
            beforeRead: async () => {
              reading.resolve();
              await stalled.promise;
            },
          }
        : {};
  const worker = serviceHarness({
    store: renewals,
    agentStore: store,
    notes,
    checkpointer,
    approvals: approvalsIn(scenario),
    hooks,
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
  if (scenario === "recover" || scenario === "recover-decided") {
    if (scenario === "recover") await diedMidRun(store, clock, notes, checkpointer, turn);
    else await decidedNeverResumed(store, clock, notes, checkpointer, turn);
    // Each turn recover looked at, as `status` (a turn whose recovery failed is `error`, logged).
    await attempt(into, async () => {
      const summary = await worker.service.recover();
      return { status: summary.turns.map((each) => each.status).join("+") || "none", summary };
    });
    return { turn, into };
  }
  if (scenario === "renew-lost") {
    // The worker stalls inside the read, renewing nothing, past its lease; another worker takes
    // the turn over and completes it; then the stalled worker's renewal finds it taken over.
    const gate = deferred();
    renewals.gate = gate.promise;
    const holding = attempt(into, () => worker.service.submit({ turn }));
    const stage = await Promise.race([reading.promise.then(() => "reading" as const), holding.then(() => "ended" as const)]);
    if (stage === "reading") {
      clock.advance(LEASE_MS);
      const taken = await serviceHarness({ store, notes, checkpointer, service: { leaseMs: LEASE_MS } }).service.submit({ turn });
      if (taken.status !== "completed") into.violations.push(`the taker answered ${taken.status}`);
    }
    gate.resolve();
    await holding;
    return { turn, into };
  }
  const answer = await attempt(into, () => worker.service.submit({ turn }));
  if (scenario === "approval" && answer?.status === "awaiting_approval") {
    const approvalId = answer.approvals[0]?.approvalId ?? "";
    await attempt(into, () => worker.service.decide({ approvalId, principal: "alice", decision: { decision: "approve" } }));
  }
  return { turn, into };
}

/** A turn paused on its write's approval, whose decision was recorded by a decider that died before resuming. */
async function decidedNeverResumed(store: GuardrailStore, clock: TestClock, notes: NotesService, checkpointer: MemorySaver, turn: ReturnType<typeof turnOf>) {
  const paused = await serviceHarness({ store, notes, checkpointer, approvals: true, service: { leaseMs: LEASE_MS } }).service.submit({ turn });
  if (paused.status !== "awaiting_approval") throw new Error(`expected a pause, got ${paused.status}`);
  const approvalId = paused.approvals[0]?.approvalId ?? "";
  await store.decideApproval({ approvalId, decision: { decision: "approve" }, operatorRef: "alice", decidedAt: clock.now().toISOString() });
}

/** The turn-record calls a healthy scenario makes through the service, in order. */
export async function turnServiceCalls(scenario: TurnScenario, store: GuardrailStore, clock: TestClock): Promise<string[]> {
  const plan = new FaultPlan(undefined);
  const notes = new NotesService();
  const { into } = await faultedWork(scenario, store, clock, plan, notes, new MemorySaver());
  await plan.drain();
  if (into.violations.length > 0 || notes.writes.length !== 1) throw new Error(`a healthy ${scenario} turn: ${into.outcomes.join(", ")}`);
  return plan.calls.filter((call) => {
    const [method, occurrence] = call.split("#") as [StoreMethod, string];
    if (method === "renewTurn") return Number(occurrence) <= (PINNED_RENEWALS[scenario] ?? 0);
    return TURN_METHODS.has(method);
  });
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
  // A renewal that fails is logged and tried again: the run it keeps goes on to its outcome.
  if (fault.method === "renewTurn" && scenario === "renew" && into.outcomes.join() !== "completed") violations.push(`the run answered ${into.outcomes.join(", ")}, not completed`);
  if (notes.writes.length > 1) violations.push(`${String(notes.writes.length)} writes after the faulted call`);

  const retrier = serviceHarness({ store, notes, checkpointer, approvals: approvalsIn(scenario), ...responderOf(scenario), service: { leaseMs: LEASE_MS } });
  const end = endOf(scenario);
  const retry: string[] = [];
  let last: TurnAnswer | undefined;
  for (let step = 0; step < 6 && last?.status !== end; step++) {
    last = await retrier.service.submit({ turn });
    retry.push(last.status);
    // A turn whose holder failed stays running until its lease expires: then the retry takes it over.
    if (last.status === "running") clock.advance(LEASE_MS);
    if (last.status === "awaiting_approval" && last.approvals.length > 0) {
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
  if (scenario === "refusal") {
    // The outcome's refusals come from the audit trail: a trail read that failed never stores the turn without them.
    const outcome = (await store.getTurn(turnKey(turn)))?.outcome as { calls?: { callId: string; refusal?: string }[] } | undefined;
    const refusal = outcome?.calls?.find((each) => each.callId === "w2")?.refusal;
    if (refusal !== "single_mutation") violations.push(`the completed turn is stored with w2's refusal ${refusal ?? "missing"}`);
  }
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

/** What a recovering worker's `confirm` answers about the dead worker's claim. */
export const CONFIRM_ANSWERS = ["completed", "no-effect", "unknown", "throws"] as const;
export type ConfirmRowAnswer = (typeof CONFIRM_ANSWERS)[number];

export interface ConfirmRow {
  readonly answer: ConfirmRowAnswer;
  /** Where the dead worker died: after its write, or after the claim and before the write. */
  readonly died: "after the write" | "before the write";
  /** The claim's state once the dead worker's lease expired. */
  readonly claimBefore: string;
  /** `recover`'s status for the turn. */
  readonly recovered: string;
  /** The edit call in the recovered turn's outcome: its status, or its refusal code. */
  readonly call: string;
  /** The claim's state after the recovery. */
  readonly claimAfter: string;
  readonly writes: number;
  /** Entries into the write tool's body, the dead worker's included. */
  readonly bodies: number;
  /** Claims left for an operator (`listUnresolved`). */
  readonly unresolved: number;
  readonly violations: readonly string[];
}

/**
 * A worker dies inside the write body (its run aborted there, as a crash leaves it), its lease
 * expires, and another worker's `recover()` takes the turn over; its edit tool's `confirm` answers
 * `answer`. Truthful answers settle the claim (a `completed` write is replayed; `no-effect`, given
 * where nothing was written, reopens the slot and the write runs once); `unknown` and a throw
 * leave the claim as it was, the call refused, the turn completed and the claim listed for an
 * operator. Never a second write; a throw is logged with its class only.
 */
export async function runConfirmRow(store: GuardrailStore, clock: TestClock, answer: ConfirmRowAnswer): Promise<ConfirmRow> {
  const notes = new NotesService();
  const checkpointer = new MemorySaver();
  const turn = turnOf({ turnId: `confirm-${answer}` });
  const key = turnKey(turn);
  const died = answer === "no-effect" ? "before the write" : "after the write";
  const inWrite = deferred();
  const never = deferred();
  const block = async () => {
    inWrite.resolve();
    await never.promise;
  };
  const dying = serviceHarness({
    store,
    notes,
    checkpointer,
    hooks: died === "after the write" ? { afterWrite: block } : { beforeWrite: block },
    service: { leaseMs: LEASE_MS, logger: { warn: () => undefined } },
    guardrailLogger: { warn: () => undefined },
  });
  const controller = new AbortController();
  const abandoned = dying.service.submit({ turn, signal: controller.signal }).catch(() => undefined);
  await inWrite.promise;
  controller.abort(new Error("the worker went away"));
  await abandoned;
  clock.advance(LEASE_MS);
  const claimBefore = (await store.getMutation(key))?.state ?? "none";

  const violations: string[] = [];
  const warnings: string[] = [];
  const confirm: ConfirmClaim = (claim) => {
    switch (answer) {
      case "completed":
      case "no-effect":
        // From the write service's record: the notes service has the write, or it has none.
        return notes.writes.length > 0 ? { outcome: "completed", result: "Saved" } : { outcome: "no-effect" };
      case "unknown":
        return { outcome: "unknown" };
      case "throws":
        throw new Error(`${FAULT_MARKER} the write service is down (asked about ${claim.toolName})`);
    }
  };
  const recoverer = serviceHarness({
    store,
    notes,
    checkpointer,
    policies: { ...NOTE_POLICIES, edit_note: { kind: "mutation", confirm } },
    service: { leaseMs: LEASE_MS },
    guardrailLogger: {
      warn: (message, fields) => {
        warnings.push(message);
        if (JSON.stringify(fields ?? {}).includes(FAULT_MARKER)) violations.push(`confirm's error text logged with "${message}"`);
      },
    },
  });
  const summary = await recoverer.service.recover();
  const recovered = summary.turns.map((each) => each.status).join("+") || "none";
  const record = await store.getTurn(key);
  const outcome = record?.outcome as { calls?: { tool: string; status: string; refusal?: string }[] } | undefined;
  const edit = outcome?.calls?.find((each) => each.tool === "edit_note");
  const claimAfter = (await store.getMutation(key))?.state ?? "none";
  const unresolved = (await store.listUnresolved()).filter((each) => each.turnKey === key).length;
  const bodies = notes.entries.filter((entry) => entry === "edit_note").length;

  if (recovered !== "completed") violations.push(`recover answered ${recovered}`);
  if (notes.writes.length !== 1) violations.push(`${String(notes.writes.length)} writes`);
  const settles = answer === "completed" || answer === "no-effect";
  if (settles && (claimAfter !== "complete" || unresolved !== 0 || edit?.status !== "success")) violations.push("a truthful answer did not settle the claim");
  if (answer === "completed" && bodies !== 1) violations.push(`the write's body ran again (${String(bodies)} entries)`);
  if (answer === "no-effect" && bodies !== 2) violations.push(`the reopened write did not run once (${String(bodies)} entries)`);
  if (!settles && (claimAfter !== claimBefore || unresolved !== 1 || bodies !== 1)) violations.push("a confirm that does not know changed the claim or ran the write");
  if (answer === "throws" && !warnings.includes("confirm failed; the claim stays as it was")) violations.push("the failed confirm was not logged");
  never.resolve();
  return {
    answer,
    died,
    claimBefore,
    recovered,
    call: edit === undefined ? "none" : (edit.refusal ?? edit.status),
    claimAfter,
    writes: notes.writes.length,
    bodies,
    unresolved,
    violations,
  };
}

export async function runConfirmRows(store: GuardrailStore, clock: TestClock): Promise<ConfirmRow[]> {
  const rows: ConfirmRow[] = [];
  for (const answer of CONFIRM_ANSWERS) rows.push(await runConfirmRow(store, clock, answer));
  return rows;
}

export function renderConfirmRows(rows: readonly ConfirmRow[]): string {
  const header = "| confirm answers | worker died | claim before | recover | edit call | claim after | writes | body entries | left for an operator | violations |\n|---|---|---|---|---|---|---|---|---|---|";
  const lines = rows.map(
    (row) =>
      `| ${row.answer} | ${row.died} | ${row.claimBefore} | ${row.recovered} | ${row.call} | ${row.claimAfter} | ${String(row.writes)} | ${String(row.bodies)} | ${String(row.unresolved)} | ${row.violations.length === 0 ? "none" : row.violations.join("; ")} |`,
  );
  return [header, ...lines].join("\n");
}

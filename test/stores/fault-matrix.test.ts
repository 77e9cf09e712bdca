/**
 * The store fault-injection matrix (issue 12, item 1) on the memory, SQLite and PostgreSQL
 * stores. For each store call a guarded read-then-write turn makes (admission included), each
 * call of the same turn with an approval, and each call of a turn with one side effect, the call throws, hangs past the run's abort, or answers
 * malformed (test/support/faults.ts); the turn is then retried, same input and call ids, against
 * the healthy store. test/support/fault-matrix.ts runs and judges the cells; this file pins what
 * the matrix covers and prints it. docs/reliability.md has the figures.
 *
 * Run it alone with `pnpm vitest run test/stores/fault-matrix.test.ts`.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InMemoryGuardrailStore, type GuardrailStore } from "arkah-agent-guardrails";
import { PostgresGuardrailStore } from "arkah-agent-guardrails/postgres";
import { SqliteGuardrailStore } from "arkah-agent-guardrails/sqlite";
import { renderMatrix, runMatrix, summarize, turnCalls, type Cell } from "../support/fault-matrix.js";
import { FAULT_KINDS, FAULT_MARKER, FaultPlan, InjectedStoreFault } from "../support/faults.js";
import { admit, turnInput } from "../support/fixtures.js";
import { adminPool, describePostgres, dropSchema, freshSchema } from "../support/postgres.js";
import {
  CONFIRM_ANSWERS,
  renderConfirmRows,
  renderTurnMatrix,
  runConfirmRows,
  runTurnMatrix,
  turnServiceCalls,
  TURN_FAULT_KINDS,
} from "../support/turn-fault-matrix.js";
import { TestClock } from "../turns/support.js";

/** The calls a guarded read-then-write turn makes: admission (admitting server, then the worker's check), read, claim, settle. */
const READ_THEN_WRITE = ["getReceipt#1", "putReceiptIfAbsent#1", "getReceipt#2", "recordSuccessfulRead#1", "claimMutation#1", "settleMutation#1"];

/**
 * The same turn with `requireApproval` on the write: the verdict is recorded and audited, the
 * request stored, the run pauses; on resume the wrap chain re-runs (verdict read back, request
 * found), the decision is recorded, the claim taken, the approval applied, the claim settled.
 */
const APPROVAL = [
  "getReceipt#1",
  "putReceiptIfAbsent#1",
  "getReceipt#2",
  "recordSuccessfulRead#1",
  "getVerdict#1",
  "recordVerdict#1",
  "appendAudit#1",
  // Before a person is asked (and again on resume): the slot and the scope, read only.
  "getMutation#1",
  "listUnresolved#1",
  "requestApproval#1",
  "getVerdict#2",
  "getMutation#2",
  "listUnresolved#2",
  "requestApproval#2",
  "decideApproval#1",
  "claimMutation#1",
  "applyApproval#1",
  "settleMutation#1",
];

/** A turn with one side effect and no read: admission, the effect's claim, its settlement. */
const SIDE_EFFECT = ["getReceipt#1", "putReceiptIfAbsent#1", "getReceipt#2", "claimEffect#1", "settleEffect#1"];

/**
 * The only cells that may lose the slot: the claim landed and its answer was lost, so nobody holds
 * its token; the claim stays pending (closed) until an operator reconciles it.
 */
const SLOTS_LOST = [
  "read-then-write claimMutation#1 malformed",
  "approval claimMutation#1 malformed",
  // The same for a side effect: its claim landed, its answer was lost; closed until reconciled.
  "side-effect claimEffect#1 malformed",
];

const MATRIX_TIMEOUT_MS = 180_000;

async function checkMatrix(name: string, store: GuardrailStore, prefix: string): Promise<Cell[]> {
  expect(await turnCalls("read-then-write", store, turnInput({ scopeId: `doc-${prefix}-calls-1`, turnId: `turn-${prefix}-calls-1` }))).toEqual(READ_THEN_WRITE);
  expect(await turnCalls("approval", store, turnInput({ scopeId: `doc-${prefix}-calls-2`, turnId: `turn-${prefix}-calls-2` }))).toEqual(APPROVAL);
  expect(await turnCalls("side-effect", store, turnInput({ scopeId: `doc-${prefix}-calls-3`, turnId: `turn-${prefix}-calls-3` }))).toEqual(SIDE_EFFECT);

  const cells = await runMatrix(name, store, prefix);
  // The matrix in the test output: every cell, then the totals.
  console.log(`Store fault-injection matrix, ${name} store\n\n${renderMatrix(cells)}\n\n${name}: ${summarize(cells)}`);

  expect(cells).toHaveLength((READ_THEN_WRITE.length + APPROVAL.length + SIDE_EFFECT.length) * FAULT_KINDS.length);
  expect(cells.flatMap((cell) => cell.violations.map((violation) => `${cell.turn} ${cell.call} ${cell.kind}: ${violation}`))).toEqual([]);
  expect(cells.filter((cell) => cell.slotLost).map((cell) => `${cell.turn} ${cell.call} ${cell.kind}`)).toEqual(SLOTS_LOST);
  // Every outcome the assertions distinguish occurs, so none of them holds vacuously.
  const retries = new Set(cells.map((cell) => cell.retry));
  expect([...retries].sort()).toEqual(["effect_pending", "executed", "mutation_pending", "replayed"]);
  expect(cells.some((cell) => cell.wroteFirst && !cell.recorded)).toBe(true);
  // The same for the side effect: run once and recorded (replayed), run and not recorded (refused, never re-run).
  const effects = cells.filter((cell) => cell.turn === "side-effect");
  expect(effects.some((cell) => cell.wroteFirst && cell.recorded && cell.retry === "replayed")).toBe(true);
  expect(effects.some((cell) => cell.wroteFirst && !cell.recorded && cell.retry.startsWith("effect_"))).toBe(true);
  return cells;
}

/** The turn-record calls `createTurnService` makes: a plain turn, an approval turn (submit, then decide), `get`, a turn failing after its write, and `recover` of a dead worker's turn. */
const TURN_SERVICE_CALLS = {
  // A completed outcome carries the turn's mutation claim: read once before it is stored.
  submit: ["beginTurn#1", "getMutation#1", "finishTurn#1"],
  // Submit stores the pause; decide reads the turn, records the decision, reads it again, takes the resume, stores the outcome (with the claim).
  approval: ["beginTurn#1", "finishTurn#1", "getTurn#1", "getTurn#2", "resumeTurn#1", "getMutation#1", "finishTurn#2"],
  get: ["getTurn#1", "getMutation#1"],
  // The model fails after the write: the failure reads the claim (kept in the failed outcome), then stores it.
  "write-then-fail": ["beginTurn#1", "getMutation#1", "finishTurn#1"],
  // A worker died mid-run: recover lists the expired turns (then the decided pauses), takes the turn over and stores its outcome.
  recover: ["listTurns#1", "listTurns#2", "beginTurn#1", "getMutation#1", "finishTurn#1"],
  // A decider recorded the decision and died before resuming: recover lists the decided pause, takes the resume, stores the outcome.
  "recover-decided": ["listTurns#1", "listTurns#2", "beginTurn#1", "resumeTurn#1", "getMutation#1", "finishTurn#1"],
  // The run spans two renewals of its lease (a renewal that fails is logged and tried again).
  renew: ["beginTurn#1", "renewTurn#1", "renewTurn#2", "getMutation#1", "finishTurn#1"],
  // The worker stalled past its lease and another completed the turn: its renewal answers false, the run is aborted and answers the turn as it stands.
  "renew-lost": ["beginTurn#1", "renewTurn#1", "getTurn#1"],
  // The step's second write is refused: the completed outcome reads the turn's audit trail (one page) for its refusal, then the claim.
  refusal: ["beginTurn#1", "readAudit#1", "getMutation#1", "finishTurn#1"],
} as const;

/** The turn service's rows (test/support/turn-fault-matrix.ts) on a store whose clock is `clock`. */
async function checkTurnMatrix(name: string, store: GuardrailStore, clock: TestClock): Promise<void> {
  for (const [scenario, calls] of Object.entries(TURN_SERVICE_CALLS)) {
    expect(await turnServiceCalls(scenario as keyof typeof TURN_SERVICE_CALLS, store, clock)).toEqual(calls);
  }
  const rows = await runTurnMatrix(store, clock, TURN_SERVICE_CALLS);
  console.log(`Turn service fault-injection rows, ${name} store\n\n${renderTurnMatrix(rows)}`);
  expect(rows).toHaveLength(Object.values(TURN_SERVICE_CALLS).flat().length * TURN_FAULT_KINDS.length);
  expect(rows.flatMap((row) => row.violations.map((violation) => `${row.scenario} ${row.call} ${row.kind}: ${violation}`))).toEqual([]);
  // Both sides of the contract occur: faulted calls that reject, and retries that had to take an expired lease over.
  expect(rows.some((row) => row.faulted.includes("InjectedStoreFault"))).toBe(true);
  expect(rows.some((row) => row.faulted.includes("StoreContractError"))).toBe(true);
  expect(rows.some((row) => row.retry.includes("running"))).toBe(true);

  const confirmRows = await runConfirmRows(store, clock);
  console.log(`Turn service confirm rows, ${name} store\n\n${renderConfirmRows(confirmRows)}`);
  expect(confirmRows.map((row) => row.answer)).toEqual([...CONFIRM_ANSWERS]);
  expect(confirmRows.flatMap((row) => row.violations.map((violation) => `confirm ${row.answer}: ${violation}`))).toEqual([]);
  // Where each answer leaves the turn: settled and replayed, reopened and run once, or left for an operator.
  expect(confirmRows.map((row) => [row.answer, row.call, row.claimAfter, row.unresolved])).toEqual([
    ["completed", "success", "complete", 0],
    ["no-effect", "success", "complete", 0],
    ["unknown", "mutation_pending", "pending", 1],
    ["throws", "mutation_pending", "pending", 1],
  ]);
}

describe("the fault-injecting store", () => {
  it("throw: the call never reaches the store; later calls do", async () => {
    const store = new InMemoryGuardrailStore();
    const plan = new FaultPlan({ method: "getReceipt", occurrence: 1, kind: "throw" });
    const input = turnInput();
    await expect(admit(plan.store(store), input)).rejects.toBeInstanceOf(InjectedStoreFault);
    expect(await store.readAudit()).toEqual([]);
    expect((await admit(plan.store(store), input)).allowed).toBe(true);
    expect(plan.calls).toEqual(["getReceipt#1", "getReceipt#2", "putReceiptIfAbsent#1"]);
  });

  it("malformed: the store does the work, the caller gets an answer the contract rejects", async () => {
    const store = new InMemoryGuardrailStore();
    const plan = new FaultPlan({ method: "putReceiptIfAbsent", occurrence: 1, kind: "malformed" });
    const input = turnInput();
    await expect(admit(plan.store(store), input)).rejects.toThrow(/putReceiptIfAbsent answer/);
    expect((await admit(store, input)).allowed).toBe(true);
    expect(plan.fired).toBe(true);
  });

  it("hang: the run's signal is aborted, then the call lands late and answers", async () => {
    const store = new InMemoryGuardrailStore();
    const plan = new FaultPlan({ method: "putReceiptIfAbsent", occurrence: 1, kind: "hang" });
    const input = turnInput();
    const answer = await admit(plan.store(store), input);
    expect(plan.signal.aborted).toBe(true);
    expect(answer.allowed).toBe(true);
    await plan.drain();
    expect((await store.getReceipt(answer.turnKey))?.allowed).toBe(true);
  });

  it("is not a trusted store, and its errors carry the marker the matrix looks for", () => {
    const plan = new FaultPlan({ method: "claimMutation", occurrence: 1, kind: "throw" });
    const error = new InjectedStoreFault({ method: "claimMutation", occurrence: 1, kind: "throw" });
    expect(error.message).toContain(FAULT_MARKER);
    expect(plan.store(new InMemoryGuardrailStore())).not.toBeInstanceOf(InMemoryGuardrailStore);
  });
});

describe("store fault-injection matrix", () => {
  it(
    "on the in-memory store",
    async () => {
      await checkMatrix("memory", new InMemoryGuardrailStore(), "mem");
    },
    MATRIX_TIMEOUT_MS,
  );

  it(
    "on the SQLite store",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "arkah-fault-matrix-"));
      const store = SqliteGuardrailStore.open({ path: join(dir, "guardrails.sqlite") });
      try {
        await checkMatrix("SQLite", store, "sqlite");
      } finally {
        store.close();
        rmSync(dir, { recursive: true, force: true });
      }
    },
    MATRIX_TIMEOUT_MS,
  );
});

describe("turn service fault-injection rows", () => {
  it(
    "on the in-memory store",
    async () => {
      const clock = new TestClock();
      await checkTurnMatrix("memory", new InMemoryGuardrailStore({ now: clock.now }), clock);
    },
    MATRIX_TIMEOUT_MS,
  );

  it(
    "on the SQLite store",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "arkah-turn-faults-"));
      const clock = new TestClock();
      const store = SqliteGuardrailStore.open({ path: join(dir, "guardrails.sqlite"), now: clock.now });
      try {
        await checkTurnMatrix("SQLite", store, clock);
      } finally {
        store.close();
        rmSync(dir, { recursive: true, force: true });
      }
    },
    MATRIX_TIMEOUT_MS,
  );
});

describePostgres("store fault-injection matrix, on PostgreSQL", (url) => {
  let admin: pg.Pool;
  const schema = freshSchema("arkah_faults");
  beforeAll(() => {
    admin = adminPool();
  });
  afterAll(async () => {
    await dropSchema(admin, schema);
    await admin.end();
  });

  it(
    "on the PostgreSQL store",
    async () => {
      const store = await PostgresGuardrailStore.open({ connectionString: url }, { schema });
      try {
        await checkMatrix("PostgreSQL", store, "pg");
      } finally {
        await store.close();
      }
    },
    MATRIX_TIMEOUT_MS,
  );

  it(
    "turn service rows, on the PostgreSQL store",
    async () => {
      const clock = new TestClock();
      const turnSchema = freshSchema("arkah_turn_faults");
      const store = await PostgresGuardrailStore.open({ connectionString: url }, { schema: turnSchema, now: clock.now });
      try {
        await checkTurnMatrix("PostgreSQL", store, clock);
      } finally {
        await store.close();
        await dropSchema(admin, turnSchema);
      }
    },
    MATRIX_TIMEOUT_MS,
  );
});

/**
 * Random programs of store operations, as fast-check commands: a `Batch` is one to three
 * operations from different workers, run concurrently against the real store; a `Tick` moves the
 * shared clock. After every command the store's answers and its whole observable state must
 * match the reference model run in some order of the batch (the batch is linearizable).
 */
import { isDeepStrictEqual } from "node:util";
import fc from "fast-check";
import { expect } from "vitest";
import type { GuardrailStore } from "arkah-agent-guardrails";
import {
  applyOp,
  cloneModel,
  describeOp,
  emptyModel,
  observeModel,
  observeStore,
  opArbitrary,
  permutations,
  resolve,
  runOp,
  type Answer,
  type ModelState,
  type Op,
  type Resolved,
} from "./store-model.js";

/** A clock only the program moves; every store of a run reads it. */
export class ProgramClock {
  ms = Date.UTC(2031, 1, 3, 4, 5, 6, 789);
  readonly now = (): Date => new Date(this.ms);
}

export interface Real {
  readonly store: GuardrailStore;
  readonly clock: ProgramClock;
}

export interface Model {
  state: ModelState;
}

/** Drops `undefined` fields, so an absent optional and an undefined one compare equal. */
const plain = (value: Answer): unknown => (value === undefined ? undefined : JSON.parse(JSON.stringify(value)));

class Batch implements fc.AsyncCommand<Model, Real> {
  constructor(readonly ops: readonly Op[]) {}

  check(): boolean {
    return true;
  }

  async run(model: Model, real: Real): Promise<void> {
    const resolved: Resolved[] = this.ops.map((op) => resolve(model.state, op, real.clock.ms));
    // The workers' calls, all in flight at once.
    const outcomes = await Promise.all(resolved.map((entry) => runOp(real.store, entry)));
    const observed = await observeStore(real.store);
    const observedPlain = plain(observed);
    const orders = permutations(resolved.map((_, index) => index));
    for (const order of orders) {
      const candidate = cloneModel(model.state);
      const matches = order.every((index) => {
        const entry = resolved[index];
        const outcome = outcomes[index];
        if (entry === undefined || outcome === undefined) return false;
        return isDeepStrictEqual(plain(applyOp(candidate, entry, outcome.token)), plain(outcome.answer));
      });
      if (matches && isDeepStrictEqual(plain(observeModel(candidate)), observedPlain)) {
        model.state = candidate;
        return;
      }
    }
    // No order explains what the store did: show the first order's expectations against it.
    const expected = cloneModel(model.state);
    const answers = resolved.map((entry, index) => plain(applyOp(expected, entry, outcomes[index]?.token)));
    expect({ answers: outcomes.map((outcome) => plain(outcome.answer)), state: observedPlain }, `no order of [${this.toString()}] matches the model`).toEqual({
      answers,
      state: plain(observeModel(expected)),
    });
    throw new Error(`no order of [${this.toString()}] matches the model, though each answer and the state do in the first order`);
  }

  toString(): string {
    return this.ops.length === 1 ? this.ops.map(describeOp).join("") : `concurrently(${this.ops.map(describeOp).join(", ")})`;
  }
}

class Tick implements fc.AsyncCommand<Model, Real> {
  constructor(readonly ms: number) {}

  check(): boolean {
    return true;
  }

  run(_model: Model, real: Real): Promise<void> {
    real.clock.ms += this.ms;
    return Promise.resolve();
  }

  toString(): string {
    return `tick(${String(this.ms)})`;
  }
}

/** A batch of operations in flight at once (one: a sequential step), for a fixed program. */
export const batch = (...ops: Op[]): fc.AsyncCommand<Model, Real> => new Batch(ops);

/** A tick of the shared clock, for a fixed program. */
export const tick = (ms: number): fc.AsyncCommand<Model, Real> => new Tick(ms);

/** Programs: mostly single operations, some concurrent pairs and triples, and clock ticks. */
export function programArbitrary(maxCommands: number): fc.Arbitrary<Iterable<fc.AsyncCommand<Model, Real>>> {
  return fc.commands(
    [
      fc.array(opArbitrary, { minLength: 1, maxLength: 1 }).map((ops) => new Batch(ops)),
      // At most one approval request per batch: the contract does not say which of two concurrent
      // requests was "requested first" (docs/reliability.md, "Property tests"), so the model could not
      // predict listApprovals' tie order.
      fc
        .array(opArbitrary, { minLength: 2, maxLength: 3 })
        .filter((ops) => ops.filter((op) => op.op === "request").length <= 1)
        .map((ops) => new Batch(ops)),
      fc.constantFrom(1, 30_000, 60_000, 3_600_000).map((ms) => new Tick(ms)),
    ],
    // Long programs from the first run: the interesting states need a claim, a settlement, a tick and a prune first.
    { maxCommands, size: "max" },
  );
}

/** Runs one program against a fresh store from `open`, closed afterwards whatever happens. */
export async function runProgram<S extends GuardrailStore>(
  commands: Iterable<fc.AsyncCommand<Model, Real>>,
  open: (now: () => Date) => Promise<S> | S,
  close: (store: S) => Promise<void> | void,
): Promise<void> {
  const clock = new ProgramClock();
  const store = await open(clock.now);
  try {
    await fc.asyncModelRun(() => ({ model: { state: emptyModel() }, real: { store, clock } }), commands);
  } finally {
    await close(store);
  }
}

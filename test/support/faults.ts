/**
 * Store fault injection for tests: a `GuardrailStore` that forwards every call to a real store
 * and, for one chosen call (by method name and occurrence), throws, hangs past the run's abort,
 * or answers malformed. It is a plain forwarding view, not one of the shipped stores, so the
 * middleware does not trust it and validates its answers: that is what makes a malformed answer
 * detectable, as it would be for a third-party adapter.
 *
 * Every call through the store (and its `view()`s, which share one plan) is logged as
 * `method#occurrence`, so a healthy run lists exactly the calls a turn makes.
 */
import type { GuardrailStore } from "arkah-agent-guardrails";
import { ForwardingStore } from "./fixtures.js";

/** Every method of `GuardrailStore`; the `satisfies` clause fails to compile if one is missing. */
export const STORE_METHODS = [
  "getReceipt",
  "putReceiptIfAbsent",
  "recordSuccessfulRead",
  "hasSuccessfulRead",
  "claimMutation",
  "settleMutation",
  "releaseMutation",
  "recordVerdict",
  "getVerdict",
  "requestApproval",
  "getApproval",
  "decideApproval",
  "applyApproval",
  "listApprovals",
  "expireApprovals",
  "orphanApprovals",
  "appendAudit",
  "readAudit",
  "getAuditCursor",
  "advanceAuditCursor",
  "listUnresolved",
  "reconcileMutation",
  "prune",
  "getMutation",
  "beginTurn",
  "finishTurn",
  "resumeTurn",
  "renewTurn",
  "listTurns",
  "getTurn",
  "takePrunableTurn",
  "claimEffect",
  "settleEffect",
  "releaseEffect",
  "getEffect",
  "listUnresolvedEffects",
  "reconcileEffect",
] as const satisfies readonly (keyof GuardrailStore)[];
export type StoreMethod = (typeof STORE_METHODS)[number];
/** Compiles only while `STORE_METHODS` lists every method of the store interface. */
export type EveryMethodListed = [Exclude<keyof GuardrailStore, StoreMethod>] extends [never] ? true : never;
export const EVERY_METHOD_LISTED: EveryMethodListed = true;

/**
 * - `throw`: the call fails before it reaches the store (a refused connection): nothing changed.
 * - `hang`: the call does not answer until the run's abort signal fires (the fault fires it, as a
 *   deadline would, so no test waits on a clock); then it reaches the store and answers, late: a
 *   statement that commits after its client gave up.
 * - `malformed`: the call reaches the store, which does its work, and the answer is replaced by
 *   one the contract's schema rejects (a broken adapter or driver): the change happened, the
 *   caller cannot know it.
 */
export const FAULT_KINDS = ["throw", "hang", "malformed"] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface Fault {
  readonly method: StoreMethod;
  /** 1 for the method's first call through this plan. */
  readonly occurrence: number;
  readonly kind: FaultKind;
}

/**
 * Text carried by every injected error and malformed answer, with server-looking detail: it must
 * never reach the model. A transcript containing it leaked store detail.
 */
export const FAULT_MARKER = "ARKAH-FAULT-7c1e9b";
const FAULT_DETAIL = `${FAULT_MARKER} connection to db-primary.internal:5432 lost (user=guardrails password=s3cr3t)`;

/** The error a `throw` fault raises. */
export class InjectedStoreFault extends Error {
  constructor(readonly fault: Fault) {
    super(`${fault.method}#${String(fault.occurrence)}: ${FAULT_DETAIL}`);
    this.name = "InjectedStoreFault";
  }
}

/** The reason a `hang` fault aborts the run with: the deadline a host would have set. */
export class RunDeadlineExceeded extends Error {
  constructor(method: StoreMethod) {
    super(`the run's deadline passed while ${method} hung`);
    this.name = "RunDeadlineExceeded";
  }
}

/**
 * An answer the method's schema rejects. A claim's forged replay is the sharpest case: trusted,
 * it would hand the marker text to the model as a tool result.
 */
function malformedAnswer(method: StoreMethod): unknown {
  if (method === "claimMutation" || method === "claimEffect") return { status: "replay", result: { content: FAULT_DETAIL } };
  return { detail: FAULT_DETAIL };
}

const macrotask = () => new Promise<void>((resolve) => setImmediate(resolve));

/** One fault (or none) for one run, and the log of every call made through its stores. */
export class FaultPlan {
  readonly calls: string[] = [];
  /** Set once the fault fired. */
  fired = false;
  readonly #counts = new Map<StoreMethod, number>();
  readonly #inFlight = new Set<Promise<unknown>>();

  constructor(
    readonly fault: Fault | undefined,
    /** Aborted by a `hang` fault: the run's deadline. */
    readonly controller: AbortController = new AbortController(),
  ) {}

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** A store that forwards to `inner` through this plan. Views of one plan share its log and fault. */
  store(inner: GuardrailStore): GuardrailStore {
    const forwarding = new ForwardingStore(inner);
    return new Proxy(forwarding, {
      get: (target, property, receiver) => {
        const value: unknown = Reflect.get(target, property, receiver);
        if (typeof value !== "function" || !isStoreMethod(property)) return value;
        return (...args: unknown[]) => this.#call(property, () => (value as (...inner: unknown[]) => Promise<unknown>).apply(target, args));
      },
    });
  }

  /** Resolves once no call through the plan is in flight and none started meanwhile. */
  async drain(): Promise<void> {
    for (;;) {
      const started = this.calls.length;
      await Promise.allSettled([...this.#inFlight]);
      // Let whatever awaited those answers make its next call.
      for (let tick = 0; tick < 5; tick++) await macrotask();
      if (this.#inFlight.size === 0 && this.calls.length === started) return;
    }
  }

  #call(method: StoreMethod, forward: () => Promise<unknown>): Promise<unknown> {
    const occurrence = (this.#counts.get(method) ?? 0) + 1;
    this.#counts.set(method, occurrence);
    this.calls.push(`${method}#${String(occurrence)}`);
    const fault = this.fault;
    const chosen = fault !== undefined && !this.fired && fault.method === method && fault.occurrence === occurrence;
    const answer = chosen ? this.#inject(fault, forward) : forward();
    this.#inFlight.add(answer);
    const done = () => this.#inFlight.delete(answer);
    answer.then(done, done);
    return answer;
  }

  async #inject(fault: Fault, forward: () => Promise<unknown>): Promise<unknown> {
    this.fired = true;
    switch (fault.kind) {
      case "throw":
        throw new InjectedStoreFault(fault);
      case "malformed":
        await forward();
        return malformedAnswer(fault.method);
      case "hang":
        this.controller.abort(new RunDeadlineExceeded(fault.method));
        // The run sees its abort first; the call lands afterwards.
        await macrotask();
        return forward();
    }
  }
}

function isStoreMethod(property: string | symbol): property is StoreMethod {
  return typeof property === "string" && (STORE_METHODS as readonly string[]).includes(property);
}

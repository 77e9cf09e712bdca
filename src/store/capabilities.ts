/**
 * Store capabilities: the `GuardrailStore` contract split into a required core and optional
 * parts, so an adapter implements only what its deployment uses. The core is what the core rule
 * (one write per turn, after a read) needs; each part is needed only by the configuration that
 * calls it, and whoever takes a store checks that at build time (`requireStoreParts`).
 *
 * A store has a part when every method of it is a function; a part half present is a mistake
 * (`ConfigurationError` naming the missing methods), never a part.
 */
import type { GuardrailStore } from "../contracts/index.js";
import { ConfigurationError } from "../errors.js";

/** The methods every store has: admission receipts, read evidence, the mutation slot, the audit trail. */
export const CORE_STORE_METHODS = [
  "getReceipt",
  "putReceiptIfAbsent",
  "recordSuccessfulRead",
  "claimMutation",
  "settleMutation",
  "releaseMutation",
  "getMutation",
  "appendAudit",
  "readAudit",
] as const satisfies readonly (keyof GuardrailStore)[];

/** The optional parts, each with its methods, and who needs it. */
export const STORE_PARTS = {
  /** Guardrail verdicts and approval requests: needed when guardrails (beyond the schema guardrail) are configured. */
  approvals: [
    "recordVerdict",
    "getVerdict",
    "requestApproval",
    "getApproval",
    "decideApproval",
    "applyApproval",
    "listApprovals",
    "expireApprovals",
  ],
  /**
   * Retiring decided approval requests whose call was never carried out (`orphanApprovals`): needed
   * by the CLI's `orphan`. Apart from `approvals`, so a store written before it keeps that part.
   */
  approvalOrphans: ["orphanApprovals"],
  /** Per-sink delivery cursors: needed by `deliverAudit`. */
  auditDelivery: ["getAuditCursor", "advanceAuditCursor"],
  /** Operator work: needed by the CLI's `inspect` and `reconcile`, by hosts that prune, and by the turn service's `prune`. */
  operator: ["listUnresolved", "reconcileMutation", "prune"],
  /** Turn records: needed by `createTurnService`. */
  turns: ["beginTurn", "finishTurn", "resumeTurn", "renewTurn", "listTurns", "getTurn"],
  /**
   * Taking a finished turn out of the lifecycle before its checkpoint thread is deleted
   * (`takePrunableTurn`): needed by the turn service's `prune`. Apart from `turns`, so a store
   * written before it keeps that part.
   */
  turnPrune: ["takePrunableTurn"],
  /** Side-effect claims: needed when a `side-effect` tool is configured (and by the CLI for them). */
  effects: ["claimEffect", "settleEffect", "releaseEffect", "getEffect", "listUnresolvedEffects", "reconcileEffect"],
} as const satisfies Record<string, readonly (keyof GuardrailStore)[]>;

/** One optional part of the store contract: `approvals`, `approvalOrphans`, `auditDelivery`, `operator`, `turns`, `turnPrune` or `effects`. */
export type StorePart = keyof typeof STORE_PARTS;

/** The parts, in a fixed order (for messages and the conformance kit). */
export const STORE_PART_NAMES = Object.keys(STORE_PARTS) as readonly StorePart[];

/** The methods of one part, as `GuardrailStore` declares them. */
export type StorePartMethods<P extends StorePart> = Pick<GuardrailStore, (typeof STORE_PARTS)[P][number]>;

/** The required core of the contract: what a store must have to be a store at all. */
export type GuardrailStoreCore = Pick<GuardrailStore, (typeof CORE_STORE_METHODS)[number]>;

/**
 * What the middleware, the turn service, `deliverAudit` and the CLI accept: the core, with any of
 * the parts (each whole or absent; checked at build time) and, optionally, `hasSuccessfulRead`,
 * which nothing in this package calls. `GuardrailStore`, the full contract, is one.
 */
export type AnyGuardrailStore = GuardrailStoreCore & Partial<Omit<GuardrailStore, (typeof CORE_STORE_METHODS)[number]>>;

/** A store known to have the parts `P`. */
export type StoreWithParts<P extends StorePart> = AnyGuardrailStore & StorePartMethods<P>;

/** What `detectStoreParts` finds on a value. */
export interface StoreCapabilities {
  /** Core methods that are not functions: non-empty means the value is not a store. */
  readonly missingCore: readonly string[];
  /** The parts whose every method is a function, in {@link STORE_PART_NAMES} order. */
  readonly parts: readonly StorePart[];
  /** Parts with some methods but not all: each a mistake, with the methods that are missing. */
  readonly incomplete: readonly { readonly part: StorePart; readonly missing: readonly string[] }[];
}

const isMethod = (value: unknown, name: string): boolean =>
  typeof value === "object" && value !== null && typeof (value as Record<string, unknown>)[name] === "function";

/** The core methods missing, the parts present and the parts half present on `store`. Pure. */
export function detectStoreParts(store: unknown): StoreCapabilities {
  const missingCore = CORE_STORE_METHODS.filter((name) => !isMethod(store, name));
  const parts: StorePart[] = [];
  const incomplete: { part: StorePart; missing: string[] }[] = [];
  for (const part of STORE_PART_NAMES) {
    const methods: readonly string[] = STORE_PARTS[part];
    const missing = methods.filter((name) => !isMethod(store, name));
    if (missing.length === 0) parts.push(part);
    else if (missing.length < methods.length) incomplete.push({ part, missing });
  }
  return { missingCore, parts, incomplete };
}

/** Whether `store` has every method of `part` (a half part is not the part). */
export function hasStorePart<P extends StorePart>(store: AnyGuardrailStore, part: P): store is StoreWithParts<P> {
  return STORE_PARTS[part].every((name) => isMethod(store, name));
}

const described = (part: StorePart): string => `"${part}" (${STORE_PARTS[part].join(", ")})`;

/**
 * The problem with `store` for a configuration that needs `needed`, or undefined: missing core
 * methods, any half-present part, then the needed parts it lacks, each named with its methods.
 */
export function storePartsProblem(store: unknown, needed: readonly StorePart[], why?: string): string | undefined {
  const found = detectStoreParts(store);
  if (found.missingCore.length > 0) {
    return `the store lacks core methods of GuardrailStore: ${found.missingCore.join(", ")}`;
  }
  if (found.incomplete.length > 0) {
    return found.incomplete
      .map(({ part, missing }) => `the store has part of "${part}" but not ${missing.join(", ")}: implement all of ${described(part)} or none`)
      .join("; ");
  }
  const lacking = needed.filter((part, index) => needed.indexOf(part) === index && !found.parts.includes(part));
  if (lacking.length === 0) return undefined;
  const which = why === undefined ? "" : `, which ${why}`;
  return `the store lacks the part${lacking.length === 1 ? "" : "s"} ${lacking.map(described).join(" and ")}${which}`;
}

/**
 * Throws `ConfigurationError` (prefixed `who: `; `why` says what needs the lacking parts) unless `store` has the core, no half
 * part, and every part in `needed`. Call it where a store is taken, before anything is written.
 */
export function requireStoreParts<P extends StorePart>(
  store: AnyGuardrailStore,
  needed: readonly P[],
  who: string,
  why?: string,
): asserts store is StoreWithParts<P> {
  const problem = storePartsProblem(store, needed, why);
  if (problem !== undefined) throw new ConfigurationError(`${who}: ${problem}`);
}

/** `requireStoreParts`, answering the store typed with its parts (for closures, where an assertion does not narrow). */
export function withStoreParts<P extends StorePart>(store: AnyGuardrailStore, needed: readonly P[], who: string, why?: string): StoreWithParts<P> {
  requireStoreParts(store, needed, who, why);
  return store;
}

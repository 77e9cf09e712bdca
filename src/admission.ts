/**
 * Admission: a turn's input is moderated once, and the decision is stored as an immutable receipt
 * keyed by the turn. Retries of the same turn reuse the receipt instead of asking again.
 */
import { z } from "zod";
import {
  AdmissionReceiptSchema,
  TurnInputSchema,
  type AdmissionReceipt,
  type GuardrailStore,
  type Segment,
  type TurnInput,
} from "./contracts/index.js";
import { AdmissionError } from "./errors.js";
import { moderationDigest, turnKey } from "./keys.js";
import type { AnyGuardrailStore } from "./store/capabilities.js";
import { parseStoreValue } from "./store/validate.js";

/** What the moderation provider is asked to judge. */
export interface ModerationRequest {
  /** The document the turn may edit. */
  readonly scopeId: string;
  /** The server-issued id of the user request. */
  readonly turnId: string;
  /** The policy the provider should judge under; bound into the receipt. */
  readonly policyVersion: string;
  /** The exact ordered, labelled segments; a copy, so the provider cannot change the turn. */
  readonly segments: readonly Segment[];
  /** {@link moderationDigest} of the segments, for a provider that caches or logs decisions. */
  readonly moderationDigest: string;
  /** `admitTurn`'s `signal`: a provider that honours it stops when the caller gives up. */
  readonly signal: AbortSignal | undefined;
}

/** Answers literally `true` to allow the turn and `false` to deny it. Anything else is a failure. */
export type Moderate = (request: ModerationRequest) => boolean | Promise<boolean>;

/** `admitTurn`'s options. */
export interface AdmitTurnOptions {
  /** Where the receipt is stored; the middleware reads it from the same store. */
  readonly store: AnyGuardrailStore;
  /** The turn to admit, exactly as it will be passed to the agent. */
  readonly input: TurnInput;
  /** Your moderation provider, called once per turn (a stored receipt is reused). */
  readonly moderate: Moderate;
  /** Aborts a slow moderation call; nothing is stored then. */
  readonly signal?: AbortSignal;
  /** Clock for `decidedAt`; defaults to the system clock. */
  readonly now?: () => Date;
}

const StoreShape = z.custom<GuardrailStore>(
  (value) =>
    typeof value === "object" &&
    value !== null &&
    typeof (value as Partial<GuardrailStore>).getReceipt === "function" &&
    typeof (value as Partial<GuardrailStore>).putReceiptIfAbsent === "function",
  "store must implement GuardrailStore",
);

const AdmitTurnOptionsSchema = z.object({
  store: StoreShape,
  moderate: z.custom<Moderate>((value) => typeof value === "function", "moderate must be a function"),
  signal: z.custom<AbortSignal>((value) => value instanceof AbortSignal).optional(),
  now: z.custom<() => Date>((value) => typeof value === "function").optional(),
});

/** @internal A validated turn with its derived keys. */
export interface ResolvedTurn {
  readonly input: TurnInput;
  readonly turnKey: string;
  readonly moderationDigest: string;
}

/** Turn inputs already resolved, by object: `admitTurn` and the middleware share the work. */
const resolvedTurns = new WeakMap<object, ResolvedTurn>();

/**
 * @internal Validates untrusted turn input and derives its keys. The caller's object is frozen
 * (a turn is immutable), so resolving it once per object stays correct.
 */
export function resolveTurn(input: unknown): ResolvedTurn {
  const cached = typeof input === "object" && input !== null ? resolvedTurns.get(input) : undefined;
  if (cached !== undefined) return cached;
  const parsed = TurnInputSchema.safeParse(input);
  if (!parsed.success) {
    throw new AdmissionError("invalid_input", `invalid turn input: ${z.prettifyError(parsed.error)}`);
  }
  const turn: ResolvedTurn = {
    input: freezeTurn(parsed.data),
    turnKey: turnKey(parsed.data),
    moderationDigest: moderationDigest(parsed.data),
  };
  resolvedTurns.set(freezeTurn(input as TurnInput), turn);
  return turn;
}

function freezeTurn(input: TurnInput): TurnInput {
  for (const segment of input.segments) Object.freeze(segment);
  Object.freeze(input.segments);
  return Object.freeze(input);
}

/**
 * Allowed receipts this process has verified, per store. Receipts are immutable, so a verified
 * one stays valid: later checks of the same turn need no store round trip.
 */
const verifiedReceipts = new WeakMap<object, Map<string, AdmissionReceipt>>();
const VERIFIED_LIMIT = 4096;

function rememberAllowed(store: object, receipt: AdmissionReceipt): void {
  if (!receipt.allowed) return;
  let known = verifiedReceipts.get(store);
  if (known === undefined) {
    known = new Map();
    verifiedReceipts.set(store, known);
  }
  // Already remembered: nothing to add, so nothing to evict (a check of a known turn at the
  // limit used to push out the oldest other turn).
  if (known.has(receipt.turnKey)) return;
  if (known.size >= VERIFIED_LIMIT) {
    const oldest = known.keys().next();
    if (oldest.done !== true) known.delete(oldest.value);
  }
  known.set(receipt.turnKey, receipt);
}

/** The store's receipt for a turn key, validated: a store is trusted, not infallible. */
async function storedReceipt(
  store: Pick<GuardrailStore, "getReceipt">,
  key: string,
): Promise<AdmissionReceipt | undefined> {
  const answer = await store.getReceipt(key);
  return answer === undefined ? undefined : parseStoreValue(AdmissionReceiptSchema, answer, "getReceipt answer");
}

/** @internal Throws unless `receipt` was issued for exactly this turn input. */
export function checkReceiptMatches(receipt: AdmissionReceipt, turn: ResolvedTurn): void {
  if (
    receipt.turnKey !== turn.turnKey ||
    receipt.scopeId !== turn.input.scopeId ||
    receipt.turnId !== turn.input.turnId ||
    receipt.policyVersion !== turn.input.policyVersion ||
    receipt.moderationDigest !== turn.moderationDigest ||
    receipt.principal !== turn.input.principal
  ) {
    throw new AdmissionError(
      "input_mismatch",
      "this turn was admitted with other segments, another policy version or for another principal; " +
        "issue a new turn id for new input",
    );
  }
}

/**
 * Moderates a turn once and stores the decision as an immutable receipt. A turn that already has
 * a receipt (allowed or denied) reuses it without calling `moderate`; of concurrent first
 * admissions, one receipt wins and every caller gets it.
 *
 * Returns the receipt; pass the turn to `createDocumentGuardrails`, which refuses to run a turn
 * without an allowed receipt. Throws `AdmissionError` when the input is invalid, when a receipt
 * for the same turn binds other input, or when moderation fails or answers a non-boolean (nothing
 * is stored then, so the turn can be admitted once the provider works).
 */
export async function admitTurn(options: AdmitTurnOptions): Promise<AdmissionReceipt> {
  const parsedOptions = AdmitTurnOptionsSchema.safeParse(options);
  if (!parsedOptions.success) {
    throw new AdmissionError("invalid_input", `invalid admitTurn options: ${z.prettifyError(parsedOptions.error)}`);
  }
  const { store, moderate, signal, now } = parsedOptions.data;
  const turn = resolveTurn(options.input);

  const existing = await storedReceipt(store, turn.turnKey);
  if (existing !== undefined) {
    checkReceiptMatches(existing, turn);
    rememberAllowed(store, existing);
    return { ...existing };
  }

  signal?.throwIfAborted();
  let answer: unknown;
  try {
    answer = await moderate({
      scopeId: turn.input.scopeId,
      turnId: turn.input.turnId,
      policyVersion: turn.input.policyVersion,
      segments: turn.input.segments.map((segment) => ({ ...segment })),
      moderationDigest: turn.moderationDigest,
      signal,
    });
  } catch (error) {
    throw new AdmissionError("moderation_failed", "the moderation provider failed; the turn was not admitted", {
      cause: error,
    });
  }
  if (typeof answer !== "boolean") {
    throw new AdmissionError(
      "moderation_failed",
      `the moderation provider answered ${typeof answer}, not a boolean; the turn was not admitted`,
    );
  }
  signal?.throwIfAborted();

  const stored = await store.putReceiptIfAbsent({
    turnKey: turn.turnKey,
    scopeId: turn.input.scopeId,
    turnId: turn.input.turnId,
    policyVersion: turn.input.policyVersion,
    moderationDigest: turn.moderationDigest,
    allowed: answer,
    decidedAt: (now ?? (() => new Date()))().toISOString(),
    ...(turn.input.principal === undefined ? {} : { principal: turn.input.principal }),
  });
  const winner = parseStoreValue(AdmissionReceiptSchema, stored, "putReceiptIfAbsent answer");
  checkReceiptMatches(winner, turn);
  rememberAllowed(store, winner);
  return { ...winner };
}

/** `assertAdmitted`'s options. */
export interface AssertAdmittedOptions {
  /** Only `getReceipt` is needed: checking admission never writes. */
  readonly store: Pick<GuardrailStore, "getReceipt">;
  /** The turn, which must match its receipt exactly (segments, policy version, principal). */
  readonly input: TurnInput;
}

/**
 * Resolves to the turn's allowed receipt, or throws `AdmissionError` (`not_admitted`, `denied`,
 * `input_mismatch`, `invalid_input`). The middleware calls this before the first model or tool
 * call of a turn.
 */
export async function assertAdmitted(options: AssertAdmittedOptions): Promise<AdmissionReceipt> {
  return assertResolvedAdmitted(options.store, resolveTurn(options.input));
}

/**
 * @internal Whether this process already verified the turn's allowed receipt: then it is checked
 * against the turn here, synchronously (throws `AdmissionError` as `assertResolvedAdmitted` would),
 * and no store round trip, nor a promise, is needed. False: ask `assertResolvedAdmitted`.
 */
export function admittedBefore(store: object, turn: ResolvedTurn): boolean {
  const known = verifiedReceipts.get(store)?.get(turn.turnKey);
  if (known === undefined) return false;
  checkReceiptMatches(known, turn);
  return true;
}

/** @internal */
export async function assertResolvedAdmitted(
  store: Pick<GuardrailStore, "getReceipt">,
  turn: ResolvedTurn,
): Promise<AdmissionReceipt> {
  const known = verifiedReceipts.get(store)?.get(turn.turnKey);
  const receipt = known ?? (await storedReceipt(store, turn.turnKey));
  if (receipt === undefined) {
    throw new AdmissionError("not_admitted", "this turn has no admission receipt; call admitTurn first");
  }
  checkReceiptMatches(receipt, turn);
  if (!receipt.allowed) {
    throw new AdmissionError("denied", "this turn was denied by moderation");
  }
  rememberAllowed(store, receipt);
  return { ...receipt };
}

/**
 * An oracle of the decision table (design §3, docs/architecture.md "The decision for one tool
 * call"), for the document tools of test/support/fixtures.ts. Written from the table, not from
 * src/decision: it predicts, for each call of each model step, the refusal code or the result the
 * model must see, and the document the writes leave behind.
 */
import fc from "fast-check";
import type { ScriptedToolCall } from "arkah-agent-guardrails/testing";
import { duplicateEffectContent } from "../../../src/tool-messages.js";

// ---------------------------------------------------------------------------------------------
// Programs: invocations of turns, each a list of model steps, each a batch of calls.

/** Call ids the model picks from: few, so ids repeat within a step and across steps; and two malformed ones. */
const IDS = ["a", "b", "c", "d"] as const;
const MALFORMED_IDS = ["", "\uD800x"] as const;

const callId = fc.oneof({ arbitrary: fc.constantFrom(...IDS), weight: 12 }, { arbitrary: fc.constantFrom(...MALFORMED_IDS), weight: 1 });

/** `authorize` refuses a call whose arguments carry this value. */
export const FORBIDDEN = "forbidden";

/** The `no-drafts` guardrail denies a rename to this title, with its own code. */
export const DRAFT = "Draft";
export const DRAFT_CODE = "draft_title";

/** The `flaky` guardrail throws on a preference of this value: a deny, `guardrail_denied`. */
export const LOUD = "loud";

const readCall = fc.record({ id: callId, name: fc.constant("read_document"), args: fc.constantFrom({}, { ignored: 1 }) });
const searchCall = fc.record({
  id: callId,
  name: fc.constant("search_sources"),
  args: fc.constantFrom<Record<string, unknown>>({ query: "titles" }, { query: 3 }, {}),
});
const rememberCall = fc.record({
  id: callId,
  name: fc.constant("remember"),
  args: fc.constantFrom<Record<string, unknown>>({ preference: "short" }, { preference: FORBIDDEN }, { preference: LOUD }, { preference: null }),
});
const renameCall = fc.record({
  id: callId,
  name: fc.constant("rename_document"),
  args: fc.record(
    {
      // Mostly valid, so calls get past the argument checks to the mutation rules.
      title: fc.oneof({ arbitrary: fc.constantFrom("Field notes", "Notes"), weight: 6 }, fc.constantFrom<unknown>(DRAFT, "", FORBIDDEN, 7)),
      expectedRevision: fc.oneof({ arbitrary: fc.constantFrom(0, 1, 2), weight: 6 }, fc.constantFrom<unknown>(-1, 1.5, "0")),
    },
    // A missing revision is one more odd argument, now and then.
    { requiredKeys: ["title"] },
  ),
});
/** A side effect: notify someone. Few recipients, so effects repeat across steps, ids and turns. */
const notifyCall = fc.record({
  id: callId,
  name: fc.constant("notify"),
  args: fc.oneof(
    { arbitrary: fc.constantFrom<Record<string, unknown>>({ to: "ana" }, { to: "bo" }, { to: "cy" }), weight: 8 },
    fc.constantFrom<Record<string, unknown>>({ to: FORBIDDEN }, { to: 3 }),
  ),
});
const unknownCall = fc.record({
  id: callId,
  name: fc.constantFrom("delete_document", "read_document ", "Rename_document"),
  args: fc.constant({}),
});

export const callArbitrary: fc.Arbitrary<ScriptedToolCall> = fc.oneof(
  { arbitrary: readCall, weight: 4 },
  { arbitrary: renameCall, weight: 6 },
  { arbitrary: searchCall, weight: 1 },
  { arbitrary: rememberCall, weight: 1 },
  { arbitrary: notifyCall, weight: 3 },
  { arbitrary: unknownCall, weight: 1 },
);

/**
 * A model step. Two calls of one step asking for the same notification run concurrently, and which
 * of them gets the claim (and whether the other sees it pending or completed) is a race the table
 * does not decide; test/agent/side-effects.test.ts covers it. Here a step asks for each at most once.
 */
const stepArbitrary = fc.array(callArbitrary, { minLength: 1, maxLength: 4 }).map((calls) => {
  const asked = new Set<string>();
  return calls.filter((call) => {
    if (call.name !== "notify") return true;
    const effect = JSON.stringify(call.args);
    if (asked.has(effect)) return false;
    asked.add(effect);
    return true;
  });
});

export interface Invocation {
  /** Which turn (both in the same scope): a second invocation of a turn is a transport retry. */
  readonly turn: "t1" | "t2";
  readonly steps: readonly (readonly ScriptedToolCall[])[];
}

export const invocationArbitrary: fc.Arbitrary<Invocation> = fc.record({
  turn: fc.constantFrom("t1" as const, "t1" as const, "t2" as const),
  steps: fc.array(stepArbitrary, { minLength: 1, maxLength: 4 }),
});

export const programArbitrary = fc.array(invocationArbitrary, { minLength: 1, maxLength: 3 });

// ---------------------------------------------------------------------------------------------
// The oracle

/** What the model must see for one call: a refusal code, or a successful result's text. */
export type Expected = { readonly refused: string } | { readonly result: string };

interface Slot {
  readonly key: string;
  readonly state: "complete" | "unknown";
  readonly result: string;
}

const KIND: Readonly<Record<string, "document-read" | "source-read" | "mutation" | "side-effect" | "auxiliary">> = {
  read_document: "document-read",
  search_sources: "source-read",
  rename_document: "mutation",
  notify: "side-effect",
  remember: "auxiliary",
};

/** The side-effect tool's policy in the property test: at most this many distinct notifications per turn. */
export const NOTIFY_LIMIT = 2;

/** What the notify tool answers for a recipient. */
export const notified = (to: string): string => `notified ${to}`;

const SEARCH_RESULT = "source: style guide says short titles";
const REMEMBER_RESULT = "Preference saved";

/** Which calls the tools' own schemas accept (fixtures.ts declares them). */
function validArgs(call: ScriptedToolCall): boolean {
  const args = call.args;
  switch (call.name) {
    case "read_document":
      return true;
    case "search_sources":
      return typeof args.query === "string";
    case "remember":
      return typeof args.preference === "string";
    case "notify":
      return typeof args.to === "string";
    default: {
      const { title, expectedRevision } = args;
      return typeof title === "string" && title.length > 0 && Number.isInteger(expectedRevision) && (expectedRevision as number) >= 0;
    }
  }
}

const wellFormed = (id: string): boolean => id !== "" && !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(id);

export class DecisionOracle {
  title = "Untitled";
  revision = 0;
  writes = 0;
  /** The notifications sent, in order: the side effects the table allows. */
  readonly outbox: string[] = [];
  readonly #slots = new Map<string, Slot>();
  /**
   * Completed side effects by turn and recipient (the effect key: no call id), with the call that
   * made each (a replay to another call says so), and each turn's count.
   */
  readonly #effects = new Map<string, { readonly result: string; readonly callId: string }>();
  readonly #effectsPerTurn = new Map<string, number>();

  #snapshot(): string {
    return JSON.stringify({ title: this.title, revision: this.revision });
  }

  /** The outcomes of one invocation's steps, in call order, applying its writes. */
  invoke(invocation: Invocation): Expected[][] {
    let readSeen = false;
    return invocation.steps.map((step) => {
      const outcome = this.#step(invocation.turn, step, readSeen);
      readSeen ||= outcome.read;
      return outcome.expected;
    });
  }

  #step(turn: string, step: readonly ScriptedToolCall[], readBefore: boolean): { expected: Expected[]; read: boolean } {
    const ids = step.map((call) => call.id);
    const idsOk = ids.every(wellFormed) && new Set(ids).size === ids.length;
    const sharesRead = step.some((call) => KIND[call.name] === "document-read" || KIND[call.name] === "source-read");
    const firstMutation = step.find((call) => KIND[call.name] === "mutation")?.id;
    // Reads see the document as the step found it: a mutation never shares a step with a read.
    const before = this.#snapshot();
    let read = false;
    const expected = step.map((call): Expected => {
      const kind = KIND[call.name];
      if (kind === undefined) return { refused: "unregistered_tool" };
      if (!idsOk) return { refused: "duplicate_call_id" };
      if (!validArgs(call)) return { refused: "invalid_arguments" };
      if (Object.values(call.args).includes(FORBIDDEN)) return { refused: "unauthorized" };
      // The guardrails (tool-args), in order: the first deny wins; an observer lets the call on.
      if (call.name === "rename_document" && call.args.title === DRAFT) return { refused: DRAFT_CODE };
      if (call.name === "remember" && call.args.preference === LOUD) return { refused: "guardrail_denied" };
      if (kind === "document-read") {
        read = true;
        return { result: before };
      }
      if (kind === "source-read") return { result: SEARCH_RESULT };
      if (kind === "auxiliary") return { result: REMEMBER_RESULT };
      // A side effect: none of the mutation's step rules, no read; replayed by turn and arguments.
      if (kind === "side-effect") return this.#effect(turn, call.args.to as string, call.id);
      if (sharesRead) return { refused: "read_batch_deferred" };
      if (firstMutation !== call.id) return { refused: "single_mutation" };
      if (!readBefore) return { refused: "read_required" };
      return this.#claim(turn, call);
    });
    return { expected, read };
  }

  #effect(turn: string, to: string, callId: string): Expected {
    const key = JSON.stringify([turn, to]);
    const done = this.#effects.get(key);
    if (done !== undefined) return { result: done.callId === callId ? done.result : duplicateEffectContent(done.result, done.callId) };
    const count = this.#effectsPerTurn.get(turn) ?? 0;
    if (count >= NOTIFY_LIMIT) return { refused: "effect_limit" };
    this.#effectsPerTurn.set(turn, count + 1);
    this.outbox.push(to);
    const result = notified(to);
    this.#effects.set(key, { result, callId });
    return { result };
  }

  #claim(turn: string, call: ScriptedToolCall): Expected {
    const title = call.args.title as string;
    const expectedRevision = call.args.expectedRevision as number;
    const key = JSON.stringify([call.id, call.name, title, expectedRevision]);
    const slot = this.#slots.get(turn);
    if (slot !== undefined) {
      if (slot.key !== key) return { refused: "mutation_conflict" };
      return slot.state === "complete" ? { result: slot.result } : { refused: "mutation_unknown" };
    }
    // Both turns are in one scope: an unknown outcome in the other blocks this one.
    if ([...this.#slots.values()].some((other) => other.state === "unknown")) return { refused: "scope_unresolved" };
    if (expectedRevision !== this.revision) {
      // The write service threw: the outcome is unknown and stays so.
      this.#slots.set(turn, { key, state: "unknown", result: "" });
      return { refused: "mutation_unknown" };
    }
    this.writes += 1;
    this.title = title;
    this.revision += 1;
    const result = this.#snapshot();
    this.#slots.set(turn, { key, state: "complete", result });
    return { result };
  }
}

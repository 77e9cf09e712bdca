/**
 * How the conformance suites get a store: one fresh store per test, made by the adapter author's
 * initializer and handed a clock the test controls.
 */
import { it } from "vitest";
import type { GuardrailStore, JsonValue } from "../../contracts/index.js";
import { detectStoreParts, type AnyGuardrailStore, type StorePart } from "../../store/capabilities.js";
import { corruptionHook } from "./key-value.js";

/** What an adapter author passes to `validateGuardrailStore`. */
export interface GuardrailStoreTestInitializer<S extends AnyGuardrailStore = GuardrailStore> {
  /** Names the adapter in the test report. */
  storeName: string;
  /**
   * The optional parts of the contract the store implements (`approvals`, `auditDelivery`,
   * `operator`, `turns`, `effects`), and `"hasSuccessfulRead"` when it has that optional method. Given, only
   * their suites are registered, and every test first checks that the store has exactly these.
   * Omitted, the parts are detected on each fresh store and the tests of a part it lacks are
   * skipped (reported as skipped, with the part's name).
   */
  parts?: readonly ConformanceNeed[];
  /**
   * Writes a raw record into the backend, for the fail-closed suite: `invalid` makes the record
   * stored under `target.key` unparseable in the backend's own way (a truncated JSON column, a
   * wrong type, a missing field); `wrong_key` makes it a well-formed record that describes
   * another key (copy another key's record over it). The kit then checks that every read of that
   * record fails closed: a `StoreContractError`, nothing changed, a claim never reopened. Omitted,
   * that suite is not registered, unless `writeRaw` is given (a key-value adapter: the kit then
   * corrupts records itself).
   */
  corruptRecord?(store: S, target: CorruptionTarget): Promise<CorruptionApplied> | CorruptionApplied;
  /**
   * For an adapter on `KeyValueGuardrailStore` (`arkah-agent-guardrails/store`): stores `write`
   * under (collection, key) in the backend, bypassing the base, its steps and every check, as a
   * person with access to the storage could. `value`: stored as if the base had put it (your
   * adapter's own encoding); `unparseable: true`: store something your `get` and `scan` cannot
   * decode (truncated JSON, bytes that are not text). Given, the kit registers the `primitives`
   * suite (your `atomic`'s get, put, delete and scan, through the step machinery) and, unless
   * `corruptRecord` is given too, the `corruption` suite with a hook of its own that locates each
   * record by `KEY_VALUE_RECORD_KEYS`.
   */
  writeRaw?(store: S, write: KeyValueRawWrite): Promise<void> | void;
  /** Runs once before the suites, e.g. to start a database. */
  beforeAll?(): Promise<void> | void;
  /** Milliseconds `beforeAll` may take (default: vitest's `hookTimeout`). */
  beforeAllTimeout?: number;
  /** Runs once after the suites. */
  afterAll?(): Promise<void> | void;
  /**
   * A fresh, isolated, empty store, e.g. a new SQLite file or a new PostgreSQL schema. Called once
   * per test. The store must take every time it records (claim, settlement, reconciliation) from
   * `now`, never from the system or database clock: the suites move it to test ages, ordering and
   * retention.
   */
  createStore(options: { now: () => Date }): Promise<S> | S;
  /** Releases a store made by `createStore` (close the connection, drop the schema). */
  destroyStore?(store: S): Promise<void> | void;
}

/** A raw write into a key-value adapter's storage: what `writeRaw` stores under (collection, key). */
export type KeyValueRawWrite =
  | {
      /** The collection, as the base names it (`KEY_VALUE_COLLECTIONS`). */
      readonly collection: string;
      /** The key, as the base makes it (`KEY_VALUE_RECORD_KEYS`). */
      readonly key: string;
      /** Store this value, encoded as your adapter encodes what the base puts. */
      readonly value: JsonValue;
    }
  | {
      /** The collection, as the base names it (`KEY_VALUE_COLLECTIONS`). */
      readonly collection: string;
      /** The key, as the base makes it (`KEY_VALUE_RECORD_KEYS`). */
      readonly key: string;
      /** Store bytes your adapter cannot decode: its `get` and `scan` must then reject with `StoreContractError`. */
      readonly unparseable: true;
    };

/** The records the fail-closed suite asks `corruptRecord` to corrupt, with the key each is stored under. */
export type CorruptedRecord = "receipt" | "read" | "claim" | "verdict" | "approval" | "auditCursor" | "turn" | "effect";

/** What `corruptRecord` corrupts: the record of this kind stored under `key`, in this way. */
export interface CorruptionTarget {
  /** Which kind of record to corrupt. */
  readonly record: CorruptedRecord;
  /**
   * The record's key in the contract: the turn key (receipt, claim, turn), the effect key
   * (effect: a side effect's claim), the approval id, the sink name (audit cursor),
   * `${turnKey}:${evidenceDigest}` (read: one piece of evidence; the key-value base keeps a turn's
   * evidence in one record under the turn key), or, for a verdict, `verdictStorageKey(key)` from
   * `arkah-agent-guardrails/store` (JSON of the `VerdictKey`'s fields in contract order). On the
   * key-value base every one of these but a read's is the key the record is stored under
   * (`KEY_VALUE_RECORD_KEYS`).
   */
  readonly key: string;
  /** `invalid`: make the record unparseable; `wrong_key`: make it describe `otherKey`. */
  readonly mode: "invalid" | "wrong_key";
  /** For `wrong_key`: the key of another record of the same kind, already stored, whose record to put under `key`. */
  readonly otherKey: string;
}

/**
 * `corruptRecord`'s answer: `"unsupported"` when the backend cannot hold that corruption (e.g. a
 * row keyed by its own column cannot describe another key), and the test ends there; anything
 * else means the record was corrupted.
 */
// void: a hook written `async () => { ... }` (nothing returned) means it corrupted the record.
// eslint-disable-next-line @typescript-eslint/no-invalid-void-type
export type CorruptionApplied = void | "unsupported";

/** What a conformance test needs beyond the core: a part, or the optional `hasSuccessfulRead`. */
export type ConformanceNeed = StorePart | "hasSuccessfulRead";

/** A clock that only moves when a test moves it. Every reading is a new `Date`. */
export class ManualClock {
  #ms: number;

  constructor(start: number) {
    this.#ms = start;
  }

  /** Pass this to the store: an arrow, so it works unbound. */
  readonly now = (): Date => new Date(this.#ms);

  /** The current time in epoch milliseconds. */
  get ms(): number {
    return this.#ms;
  }

  /** The current time as an ISO-8601 string in UTC. */
  iso(): string {
    return new Date(this.#ms).toISOString();
  }

  advance(ms: number): void {
    this.#ms += ms;
  }
}

/** 2031-02-03T04:05:06.789Z: far from the real clock, with milliseconds, so both must be kept. */
export const CLOCK_START = Date.UTC(2031, 1, 3, 4, 5, 6, 789);

export interface StoreFixture {
  /**
   * The store, typed as the full contract: a test only calls the parts it declared it needs (the
   * suite's part and its own `needs`), and the core.
   */
  readonly store: GuardrailStore;
  readonly clock: ManualClock;
  /** The initializer's `corruptRecord`, bound to this store (the fail-closed suite only runs with one). */
  readonly corrupt: (target: CorruptionTarget) => Promise<boolean>;
  /** The initializer's `writeRaw`, bound to this store (the primitives suite only runs with one). */
  readonly writeRaw?: (write: KeyValueRawWrite) => Promise<void>;
}

/**
 * Registers a test that runs `body` against a fresh store, destroyed afterwards whatever happens.
 * `needs`: the parts (beyond the core) the test calls; it runs only on a store that has them.
 */
export type StoreTest = (name: string, body: (fixture: StoreFixture) => Promise<void>, needs?: readonly ConformanceNeed[]) => void;

/** The declared parts' problem with a store, or undefined: any mismatch with what is detected. */
function declarationProblem(declared: readonly ConformanceNeed[], store: object): string | undefined {
  const found = detectStoreParts(store);
  const read = declared.includes("hasSuccessfulRead");
  if (read !== has(store, "hasSuccessfulRead")) {
    return read ? "hasSuccessfulRead is declared but not a method" : "hasSuccessfulRead is implemented but not declared in parts";
  }
  if (found.missingCore.length > 0) return `the store lacks core methods: ${found.missingCore.join(", ")}`;
  const half = found.incomplete.map(({ part, missing }) => `part "${part}" lacks ${missing.join(", ")}`);
  const undeclared = found.parts.filter((part) => !declared.includes(part)).map((part) => `part "${part}" is implemented but not declared in parts`);
  const absent = declared.filter(
    (part): part is StorePart => part !== "hasSuccessfulRead" && !found.parts.includes(part) && !found.incomplete.some((entry) => entry.part === part),
  );
  const problems = [...half, ...undeclared, ...absent.map((part) => `part "${part}" is declared but none of its methods exist`)];
  return problems.length === 0 ? undefined : problems.join("; ");
}

function has(store: object, need: ConformanceNeed): boolean {
  if (need === "hasSuccessfulRead") return typeof (store as Partial<GuardrailStore>).hasSuccessfulRead === "function";
  return detectStoreParts(store).parts.includes(need);
}

export function storeTest<S extends AnyGuardrailStore>(initializer: GuardrailStoreTestInitializer<S>, suiteNeeds: readonly ConformanceNeed[] = []): StoreTest {
  const declared = initializer.parts;
  return (name, body, testNeeds = []) => {
    const needs = [...suiteNeeds, ...testNeeds];
    // Declared parts decide what is registered; a test of a part the store does not declare is left out.
    if (declared !== undefined && needs.some((need) => !declared.includes(need))) return;
    it(name, async (context) => {
      const clock = new ManualClock(CLOCK_START);
      const store = await initializer.createStore({ now: clock.now });
      let failure: { error: unknown } | undefined;
      try {
        const problem = declared === undefined ? undefined : declarationProblem(declared, store);
        if (problem !== undefined) throw new Error(`${initializer.storeName}: the store does not match its declared parts [${declared?.join(", ") ?? ""}]: ${problem}`);
        const lacking = needs.filter((need) => !has(store, need));
        if (lacking.length > 0) {
          context.skip(`the store has no ${lacking.join(", ")} (declare parts to leave these tests out)`);
          return;
        }
        const hook = corruptionHook(initializer);
        const corrupt = async (target: CorruptionTarget) => {
          if (hook === undefined) throw new Error("the fail-closed suite needs corruptRecord or writeRaw");
          return (await hook(store, target)) !== "unsupported";
        };
        const raw =
          initializer.writeRaw === undefined
            ? {}
            : {
                writeRaw: async (write: KeyValueRawWrite) => {
                  await initializer.writeRaw?.(store, write);
                },
              };
        await body({ store: store as unknown as GuardrailStore, clock, corrupt, ...raw });
      } catch (error) {
        failure = { error };
      }
      try {
        await initializer.destroyStore?.(store);
      } catch (error) {
        // The test's own failure is the one worth reporting; a teardown failure only if it passed.
        failure ??= { error };
      }
      if (failure !== undefined) throw failure.error;
    });
  };
}

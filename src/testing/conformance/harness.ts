/**
 * How the conformance suites get a store: one fresh store per test, made by the adapter author's
 * initializer and handed a clock the test controls.
 */
import { it } from "vitest";
import type { GuardrailStore } from "../../contracts.js";

/** What an adapter author passes to `validateGuardrailStore`. */
export interface GuardrailStoreTestInitializer<S extends GuardrailStore = GuardrailStore> {
  /** Names the adapter in the test report. */
  storeName: string;
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
  readonly store: GuardrailStore;
  readonly clock: ManualClock;
}

/** Registers a test that runs `body` against a fresh store, destroyed afterwards whatever happens. */
export type StoreTest = (name: string, body: (fixture: StoreFixture) => Promise<void>) => void;

export function storeTest<S extends GuardrailStore>(initializer: GuardrailStoreTestInitializer<S>): StoreTest {
  return (name, body) => {
    it(name, async () => {
      const clock = new ManualClock(CLOCK_START);
      const store = await initializer.createStore({ now: clock.now });
      let failure: { error: unknown } | undefined;
      try {
        await body({ store, clock });
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

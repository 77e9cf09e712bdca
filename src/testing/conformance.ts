/**
 * The `GuardrailStore` conformance kit: the single definition of a correct store. An adapter
 * author runs it from a vitest test file:
 *
 * ```ts
 * import { validateGuardrailStore } from "arkah-agent-guardrails/testing";
 *
 * await validateGuardrailStore({
 *   storeName: "sqlite",
 *   createStore: ({ now }) => SqliteGuardrailStore.open({ path: freshFile(), now }),
 *   destroyStore: (store) => store.close(),
 * });
 * ```
 *
 * Every test gets a fresh store from `createStore`, handed a clock the test moves, and destroys it
 * afterwards. The suites use `describe`/`it`/`expect` from "vitest" (no globals needed), loaded
 * only when the kit runs, from an ES module test file (top-level `await`).
 */
import type { AnyGuardrailStore } from "../store/capabilities.js";
import type { GuardrailStoreTestInitializer } from "./conformance/harness.js";
import { CONFORMANCE_SUITES, type ConformanceSuite } from "./conformance/suites.js";

export type { ConformanceNeed, CorruptedRecord, CorruptionApplied, CorruptionTarget, GuardrailStoreTestInitializer, KeyValueRawWrite } from "./conformance/harness.js";
export { CONFORMANCE_SUITES, type ConformanceSuite } from "./conformance/suites.js";

/**
 * Registers the conformance suites (all of them, or only `filters`) for the store that
 * `initializer` makes. `await` it at the top level of a vitest test file.
 *
 * @throws Error, at registration, for an unknown suite name in `filters`.
 */
export async function validateGuardrailStore<S extends AnyGuardrailStore>(
  initializer: GuardrailStoreTestInitializer<S>,
  filters?: readonly ConformanceSuite[],
): Promise<void> {
  const unknown = (filters ?? []).filter((name) => !(CONFORMANCE_SUITES as readonly string[]).includes(name));
  if (unknown.length > 0) {
    throw new Error(
      `validateGuardrailStore: unknown suite ${unknown.map((name) => JSON.stringify(name)).join(", ")}; ` +
        `the suites are ${CONFORMANCE_SUITES.join(", ")}`,
    );
  }
  const selected = CONFORMANCE_SUITES.filter((name) => filters === undefined || filters.length === 0 || filters.includes(name));
  // Loaded here, not at import: vitest is only needed by test files that run the kit.
  const { registerSuites } = await import("./conformance/register.js");
  registerSuites(initializer, selected);
}

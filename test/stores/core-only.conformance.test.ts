/**
 * A store with only the core of the contract (the in-memory store behind a wrapper exposing its
 * core methods) against the conformance kit: declared core-only, it passes the core suites, and
 * the kit registers no test of a part it lacks.
 */
import { InMemoryGuardrailStore, type GuardrailStoreCore } from "arkah-agent-guardrails";
import { validateGuardrailStore } from "arkah-agent-guardrails/testing";
import { CORE_STORE_METHODS } from "../../src/store/capabilities.js";

/** Only the core of a fresh in-memory store, bound to it. */
function coreOnly(now: () => Date): GuardrailStoreCore {
  const inner = new InMemoryGuardrailStore({ now });
  const methods = CORE_STORE_METHODS.map((name) => [name, (inner[name] as (...args: unknown[]) => unknown).bind(inner)] as const);
  return Object.fromEntries(methods) as unknown as GuardrailStoreCore;
}

await validateGuardrailStore({
  storeName: "memory, core only",
  parts: [],
  createStore: ({ now }) => coreOnly(now),
});

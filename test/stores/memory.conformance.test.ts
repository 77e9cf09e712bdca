/** The in-memory store against the conformance kit: the reference run every adapter's mirrors. */
import { InMemoryGuardrailStore } from "arkah-agent-guardrails";
import { validateGuardrailStore } from "arkah-agent-guardrails/testing";

await validateGuardrailStore({
  storeName: "memory",
  createStore: ({ now }) => new InMemoryGuardrailStore({ now }),
});

/**
 * Every public entry point loads and exports what its section of the docs uses. The imports run inside
 * the tests, not at the top of the file: a module that throws while loading (a schema built wrong,
 * a constant that fails) then fails a test here, where a top-level import would only stop the file
 * from loading, which vitest reports as "no tests" and Stryker as a surviving mutant.
 */
import { describe, expect, it } from "vitest";

const ENTRY_POINTS: Readonly<Record<string, { readonly load: () => Promise<Record<string, unknown>>; readonly functions: readonly string[] }>> = {
  "arkah-agent-guardrails": {
    load: () => import("arkah-agent-guardrails"),
    functions: [
      "createDocumentGuardrails",
      "createTurnService",
      "createToolGuardrails",
      "guardTools",
      "createSchemaGuardrail",
      "requireApproval",
      "admitTurn",
      "turnContext",
      "digest",
      "InMemoryGuardrailStore",
    ],
  },
  "arkah-agent-guardrails/testing": {
    load: () => import("arkah-agent-guardrails/testing"),
    functions: ["ScriptedModel", "validateGuardrailStore", "raceGuardrailStore", "StoreRaceError"],
  },
  "arkah-agent-guardrails/store": {
    load: () => import("arkah-agent-guardrails/store"),
    functions: ["KeyValueGuardrailStore", "parseIdentity", "approvalDecisionOutcome", "existingClaimAnswer", "beginTransition"],
  },
  "arkah-agent-guardrails/sqlite": {
    load: () => import("arkah-agent-guardrails/sqlite"),
    functions: ["SqliteGuardrailStore"],
  },
  "arkah-agent-guardrails/postgres": {
    load: () => import("arkah-agent-guardrails/postgres"),
    functions: ["PostgresGuardrailStore"],
  },
  "arkah-agent-guardrails/otel": {
    load: () => import("arkah-agent-guardrails/otel"),
    functions: ["openTelemetry"],
  },
};

describe("entry points", () => {
  for (const [name, { load, functions }] of Object.entries(ENTRY_POINTS)) {
    it(`${name} loads and exports ${functions.join(", ")}`, async () => {
      const module = await load();
      for (const exported of functions) expect(typeof module[exported], `${name} exports ${exported}`).toBe("function");
    });
  }
});

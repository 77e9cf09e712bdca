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
    functions: ["KeyValueGuardrailStore", "parseIdentity", "approvalDecisionOutcome", "existingClaimAnswer", "beginTransition", "toolFingerprint", "moderationDigest"],
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

/**
 * The root's runtime names, exactly. The root export is for app authors, so a name is on it only if
 * an app author's code calls it: an example app (examples/), the README, or a code block of a doc
 * written for app authors (getting-started, tools, composing, reference, operations, turns, ...).
 * What storage adapter authors and the store contract need is on `/store`, test helpers are on
 * `/testing`, and what nobody outside the package calls is not exported. Adding a name here is a
 * reviewed change: say which app author's code calls it. Types are not listed (they cost nothing at
 * run time); they follow the same rule.
 */
const ROOT_RUNTIME_NAMES = [
  "AdmissionError",
  "ApprovalDecisionSchema",
  "ApprovalError",
  "ConfigurationError",
  "DigestError",
  "DigestSchema",
  "GuardrailsError",
  "InMemoryGuardrailStore",
  "NoEffectError",
  "REFUSAL_CODES",
  "RetryableToolError",
  "SealError",
  "SettlementError",
  "StoreContractError",
  "TURN_CONTEXT_KEY",
  "TurnInputSchema",
  "TurnServiceError",
  "admitTurn",
  "admittedTurn",
  "allowAllCalls",
  "assertAdmitted",
  "canonicalJson",
  "createDocumentGuardrails",
  "createSchemaGuardrail",
  "createToolGuardrails",
  "createTurnService",
  "deliverAudit",
  "digest",
  "effectKey",
  "guardTools",
  "mutationKey",
  "parseToolManifest",
  "requireApproval",
  "runWithRetryBoundary",
  "turnContext",
  "turnHttpErrorReply",
  "turnHttpReply",
  "turnKey",
  "turnThreadId",
] as const;

describe("the root export", () => {
  it(`has exactly the ${String(ROOT_RUNTIME_NAMES.length)} runtime names an app author calls`, async () => {
    const root = await import("arkah-agent-guardrails");
    expect(Object.keys(root).sort()).toEqual([...ROOT_RUNTIME_NAMES]);
  });
});

/**
 * The seal's finding on a `NoEffectError` (src/decision/seal.ts), as a pure table: only the very
 * error the tool body threw, reaching the guardrails unchanged, asserts no effect.
 */
import { describe, expect, it } from "vitest";
import { NoEffectError } from "arkah-agent-guardrails";
import { sealFinding } from "../../src/decision/seal.js";

const ran = (outcome: { returned: unknown } | { threw: unknown }) => ({ started: true, outcome, violations: [] });

describe("sealFinding and NoEffectError", () => {
  it("the body's own NoEffectError, unchanged: no effect", () => {
    const error = new NoEffectError("stale revision");
    expect(sealFinding(ran({ threw: error }), { error })).toEqual({ ran: true, noEffect: true });
  });

  it("a NoEffectError other than the one the body threw (an inner middleware replaced it): the body ran", () => {
    const body = new Error("write timed out");
    expect(sealFinding(ran({ threw: body }), { error: new NoEffectError("nothing happened") })).toEqual({ ran: true, noEffect: false });
    expect(sealFinding(ran({ threw: new NoEffectError("a") }), { error: new NoEffectError("b") })).toEqual({ ran: true, noEffect: false });
  });

  it("a NoEffectError thrown after the body returned: the body ran", () => {
    expect(sealFinding(ran({ returned: "Saved" }), { error: new NoEffectError("after") })).toEqual({ ran: true, noEffect: false });
  });

  it("an error that only looks like one (same name and message, no brand): the body ran", () => {
    const lookalike = Object.assign(new Error("stale revision"), { name: "NoEffectError" });
    expect(sealFinding(ran({ threw: lookalike }), { error: lookalike })).toEqual({ ran: true, noEffect: false });
  });

  it("a body that never started is notStarted, whatever was thrown", () => {
    expect(sealFinding({ started: false, outcome: undefined, violations: [] }, { error: new NoEffectError("x") })).toEqual({ notStarted: true });
  });
});

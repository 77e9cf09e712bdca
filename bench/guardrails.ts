/**
 * The guardrail port's costs.
 *
 * 1. The schema guardrail's per-call check divided by calling @cfworker/json-schema directly with
 *    a cached validator on the same schema and arguments (target ≤ 1.2): what the port adds
 *    around the validator (context, issue collection, the verdict).
 * 2. The guarded loop with the schema guardrail (the default) against the same loop whose schema
 *    check is replaced by an allow-all guardrail: the schema check's share of a guarded tool call.
 *    The core loop's overhead ratio must not regress by more than 0.05 with it on.
 */
import { Validator, type Schema } from "@cfworker/json-schema";
import { createSchemaGuardrail, type Guardrail, type GuardrailContext } from "arkah-agent-guardrails";
import { benchGuardedLoop, type LoopOptions } from "./agent.js";
import { interleave, measure, per, roundOptions, type Interleaved, type RoundOptions } from "./harness.js";

/** An MCP-style tool input schema, as a JSON Schema tool carries it. */
const CREDIT_SCHEMA: Schema = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  type: "object",
  properties: {
    customerId: { type: "string", minLength: 1 },
    amount: { type: "number", exclusiveMinimum: 0, maximum: 500 },
    currency: { enum: ["EUR", "USD"] },
    note: { type: "string", maxLength: 200 },
  },
  required: ["customerId", "amount", "currency"],
  additionalProperties: false,
};

const ARGS = { customerId: "cus_123", amount: 42.5, currency: "EUR", note: "late delivery" };

export interface SchemaOptions extends RoundOptions {
  /** Checks per timed sample. */
  readonly checks: number;
}

export async function benchSchemaGuardrail(options: SchemaOptions): Promise<Interleaved> {
  const guardrail = createSchemaGuardrail();
  const context: GuardrailContext = {
    placement: "tool-args",
    toolCall: { id: "call-1", name: "issue-credit", args: ARGS, rawArgs: ARGS },
    tool: { name: "issue-credit", kind: "mutation", schema: CREDIT_SCHEMA },
    turn: { scopeId: "doc-1", turnId: "turn-1", turnKey: "0".repeat(64) },
    signal: new AbortController().signal,
  };
  const validator = new Validator(CREDIT_SCHEMA, "2020-12", false);
  // Both sides must agree the arguments are valid, or the comparison is meaningless.
  if (!validator.validate(ARGS).valid || (await guardrail.check(context)).action !== "allow") {
    throw new Error("bench: the schema guardrail and the validator disagree");
  }

  const subject = async () =>
    per(
      await measure(async () => {
        for (let i = 0; i < options.checks; i++) await guardrail.check(context);
      }),
      options.checks,
    );
  const baseline = async () =>
    per(
      await measure(async () => {
        // Awaited like the guardrail, so both sides pay the same promise turn per call.
        for (let i = 0; i < options.checks; i++) await Promise.resolve(validator.validate(ARGS));
      }),
      options.checks,
    );
  return interleave({ ...roundOptions(options), baseline, subject });
}

/** Allows everything but counts as the list's schema guardrail: the pipeline without the check. */
const allowAll: Guardrail = Object.assign(
  {
    name: "schema",
    placements: ["tool-args"] as const,
    check: () => ({ action: "allow" as const, outcome: "complete" as const, detections: [] }),
  },
  { [Symbol.for("arkah-agent-guardrails.schema-guardrail")]: true },
);

export function benchSchemaShareOfLoop(options: LoopOptions): Promise<Interleaved> {
  return benchGuardedLoop(options, { baseline: { guardrails: [allowAll] }, subject: {} });
}

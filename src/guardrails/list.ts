import { ConfigurationError } from "../errors.js";
import type { Guardrail } from "./port.js";
import { createSchemaGuardrail, SCHEMA_GUARDRAIL } from "./schema.js";

/**
 * The guardrails a middleware runs: the given ones, in order, with a schema guardrail first
 * unless the list has one (the port's default member: arguments are always checked against the
 * tool's schema before anything runs). Names must be unique: verdicts are recorded under them.
 */
export function resolveGuardrails(given: readonly Guardrail[] = []): readonly Guardrail[] {
  const hasSchemaGuardrail = given.some((guardrail) => SCHEMA_GUARDRAIL in guardrail);
  const guardrails = hasSchemaGuardrail ? [...given] : [createSchemaGuardrail(), ...given];
  const seen = new Set<string>();
  for (const { name } of guardrails) {
    if (seen.has(name)) {
      throw new ConfigurationError(`two guardrails are named "${name}"; give each a unique name`);
    }
    seen.add(name);
  }
  return guardrails;
}

// Runtime check for scripts/smoke.sh, run inside the consumer project: `@opentelemetry/api` is an
// optional peer that only `arkah-agent-guardrails/otel` loads.
//   node otel.mjs absent     the core loads without it; /otel fails naming the missing package
//   node otel.mjs installed  /otel loads in ESM and CJS and builds a telemetry backend
import assert from "node:assert/strict";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const NAME = "arkah-agent-guardrails";
const mode = process.argv[2];

const core = await import(NAME);
assert.equal(typeof core.createDocumentGuardrails, "function", "the core loads");

if (mode === "absent") {
  await assert.rejects(import(`${NAME}/otel`), (error) => String(error).includes("@opentelemetry/api"), "ESM /otel names the missing peer");
  assert.throws(() => require(`${NAME}/otel`), (error) => String(error).includes("@opentelemetry/api"), "CJS /otel names the missing peer");
  console.log("otel: the core loads without @opentelemetry/api; /otel names it when missing");
} else if (mode === "installed") {
  for (const otel of [await import(`${NAME}/otel`), require(`${NAME}/otel`)]) {
    const telemetry = otel.openTelemetry();
    assert.equal(typeof telemetry.observeCall, "function", "openTelemetry() is a telemetry backend");
    core.createToolGuardrails({ guardrails: [], tools: ["t"], telemetry });
  }
  console.log("otel: /otel loads in ESM and CJS with @opentelemetry/api installed");
} else {
  throw new Error(`usage: node otel.mjs absent|installed (got ${String(mode)})`);
}

// Runtime check for scripts/smoke.sh, run inside the consumer project: loads the ESM and the CJS
// build of the installed tarball in one Node process and checks that errors branded by one copy
// are recognised by the other (instanceof cannot do that; the Symbol.for brand must).
import assert from "node:assert/strict";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const NAME = "arkah-agent-guardrails";

const esmPath = import.meta.resolve(NAME);
const cjsPath = require.resolve(NAME);
assert.match(esmPath, /\/dist\/index\.js$/, `ESM entry resolved to ${esmPath}`);
assert.match(cjsPath, /\/dist\/index\.cjs$/, `CJS entry resolved to ${cjsPath}`);
assert.match(require.resolve(`${NAME}/testing`), /\/dist\/testing\/index\.cjs$/);

const esm = await import(NAME);
const cjs = require(NAME);
const esmTesting = await import(`${NAME}/testing`);
const cjsTesting = require(`${NAME}/testing`);

const names = ["createDocumentGuardrails", "admitTurn", "InMemoryGuardrailStore", "AdmissionError"];
for (const name of names) {
  assert.equal(typeof esm[name], "function", `ESM build exports ${name}`);
  assert.equal(typeof cjs[name], "function", `CJS build exports ${name}`);
}
assert.ok(esm.REFUSAL_CODES !== undefined && esm.REFUSAL_CODES !== null, "ESM exports REFUSAL_CODES");
assert.deepEqual(cjs.REFUSAL_CODES, esm.REFUSAL_CODES, "both builds export the same REFUSAL_CODES");
assert.equal(typeof esmTesting.ScriptedModel, "function", "ESM testing exports ScriptedModel");
assert.equal(typeof cjsTesting.ScriptedModel, "function", "CJS testing exports ScriptedModel");

// Two genuinely different copies, or the brand check below proves nothing.
assert.notEqual(esm.AdmissionError, cjs.AdmissionError, "ESM and CJS builds are separate copies");

const fromEsm = new esm.AdmissionError("denied", "from the ESM copy");
const fromCjs = new cjs.AdmissionError("denied", "from the CJS copy");
assert.ok(!(fromEsm instanceof cjs.AdmissionError), "instanceof does not cross copies");
assert.ok(cjs.AdmissionError.isInstance(fromEsm), "CJS AdmissionError.isInstance recognises an ESM error");
assert.ok(esm.AdmissionError.isInstance(fromCjs), "ESM AdmissionError.isInstance recognises a CJS error");
assert.ok(esm.AdmissionError.isInstance(fromEsm) && cjs.AdmissionError.isInstance(fromCjs));
assert.ok(!esm.AdmissionError.isInstance(new Error("plain")), "a plain Error is not an AdmissionError");
assert.equal(fromCjs.code, "denied");

console.log("dual package: ESM and CJS copies recognise each other's AdmissionError");

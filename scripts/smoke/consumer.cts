// CommonJS consumer, type-checked by scripts/smoke.sh against the declarations in the packed
// tarball (`require` condition -> dist/*.d.cts). Not part of the repo's own tsconfig.
import guardrails = require("arkah-agent-guardrails");
import testing = require("arkah-agent-guardrails/testing");

const { AdmissionError, InMemoryGuardrailStore, REFUSAL_CODES, admitTurn, createDocumentGuardrails } =
  guardrails;
const { ScriptedModel } = testing;

type NotAny<T> = 0 extends 1 & T ? never : T;
function use<T>(value: NotAny<T>): NotAny<T> {
  return value;
}

use(createDocumentGuardrails);
use(admitTurn);
use(InMemoryGuardrailStore);
use(REFUSAL_CODES);
use(ScriptedModel);

const functions: ((...args: never[]) => unknown)[] = [createDocumentGuardrails, admitTurn];
const classes: (abstract new (...args: never[]) => unknown)[] = [
  InMemoryGuardrailStore,
  ScriptedModel,
  AdmissionError,
];

const error: Error = new AdmissionError("not_admitted", "no receipt for this turn");
const caught: unknown = error;
if (AdmissionError.isInstance(caught)) {
  const code: string = caught.code;
  console.log(code, functions.length, classes.length);
}

export = { functions, classes };

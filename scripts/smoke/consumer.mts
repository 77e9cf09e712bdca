// ESM consumer, type-checked by scripts/smoke.sh against the declarations in the packed tarball
// (`import` condition -> dist/*.d.ts). Not part of the repo's own tsconfig.
import {
  AdmissionError,
  InMemoryGuardrailStore,
  REFUSAL_CODES,
  admitTurn,
  createDocumentGuardrails,
} from "arkah-agent-guardrails";
import { KeyValueGuardrailStore, MutationIdentitySchema } from "arkah-agent-guardrails/store";
import { ScriptedModel } from "arkah-agent-guardrails/testing";

/** Fails to compile when `T` is `any`, which is what a broken declaration chain tends to produce. */
type NotAny<T> = 0 extends 1 & T ? never : T;
function use<T>(value: NotAny<T>): NotAny<T> {
  return value;
}

use(createDocumentGuardrails);
use(admitTurn);
use(InMemoryGuardrailStore);
use(REFUSAL_CODES);
use(ScriptedModel);
use(KeyValueGuardrailStore);
use(MutationIdentitySchema);

const functions: ((...args: never[]) => unknown)[] = [createDocumentGuardrails, admitTurn];
const classes: (abstract new (...args: never[]) => unknown)[] = [
  InMemoryGuardrailStore,
  KeyValueGuardrailStore,
  ScriptedModel,
  AdmissionError,
];

const error: Error = new AdmissionError("denied", "moderation denied the turn");
const caught: unknown = error;
if (AdmissionError.isInstance(caught)) {
  const code: string = caught.code;
  console.log(code, functions.length, classes.length);
}
const found: AdmissionError | undefined = AdmissionError.find(new Error("wrapped", { cause: error }));
console.log(found?.message);

/**
 * The checks every governed call passes before anything runs or is claimed, in pipeline order.
 * Each answers `undefined` to go on, or the refusal the model gets (already recorded).
 */
import type { ToolMessage } from "@langchain/core/messages";
import type { EffectDiscriminator, JsonValue, ScopeOf, ToolKind } from "../contracts/index.js";
import { checkCall, type Refusal } from "../decision/plan.js";
import { copyJson } from "../digest.js";
import { isSealable, parseArguments, type ParsedArguments, type SealableTool } from "../execution/parse.js";
import { checkedCall, checks, evaluateGuardrails, type GuardrailEnvironment, type REPLAY_ONLY } from "../guardrails/evaluate.js";
import { hasCheckpointer } from "../guardrails/resume.js";
import { argumentIssueDetails, zodSchemaOf } from "../guardrails/schema.js";
import { discriminatorDigest, identifyTool } from "../keys.js";
import { isAuthorized } from "../options.js";
import type { GovernedCall } from "./call.js";

/** A call as the pipeline asks `authorize` about it (the middleware adds the turn). */
export interface AskedCall {
  readonly id: string;
  readonly name: string;
  readonly args: unknown;
  readonly kind: ToolKind | undefined;
}

/**
 * The tool is registered, exposed and sealable, and every call id of its step is present,
 * well-formed and unique (checked for the whole step, so no call of a bad step runs).
 */
export function checkStep(call: GovernedCall): Promise<ToolMessage> | undefined {
  const { request } = call;
  const checked = checkCall(request.toolCall, call.step, call.kind, request.tool !== undefined);
  if ("refuse" in checked) return call.refuse(checked.refuse);
  if (!isSealable(request.tool)) {
    call.governance.logger.warn("a governed tool is not a LangChain StructuredTool, so its calls cannot be sealed; refused", {
      toolName: call.name,
    });
    return call.refuse("unregistered_tool");
  }
  return adoptTool(call, request.tool);
}

/**
 * Takes the call's tool, once its identity is known: a tool without a fingerprint is refused
 * `unregistered_tool`; one whose fingerprint changed since it was first fingerprinted in this
 * process (its body, description, schema or declared configuration), or that does not match the
 * reviewed manifest, `tool_changed`, so it never runs under decisions made for another tool.
 */
export function adoptTool(call: GovernedCall, tool: SealableTool): Promise<ToolMessage> | undefined {
  let changed: boolean;
  try {
    ({ fingerprint: call.fingerprint, changed } = checkIdentity(call, tool));
  } catch (error) {
    call.governance.logger.warn("a governed tool has no fingerprint (a declared schema or identity field that cannot be fingerprinted, or a missing identity field); refused", {
      toolName: call.name,
      error,
    });
    return call.refuse("unregistered_tool");
  }
  if (changed) return call.refuse("tool_changed");
  call.tool = tool;
  return undefined;
}

/**
 * The tool's fingerprint, and whether it is not the tool decisions were made for: it changed since
 * its first fingerprint in this process, or the reviewed manifest pins another. Cheap when nothing
 * changed (`identifyTool` compares references). Throws when it has no fingerprint.
 */
export function checkIdentity(call: GovernedCall, tool: SealableTool): { readonly fingerprint: string; readonly changed: boolean } {
  const { identities } = call.governance;
  const { fingerprint, first } = identities?.identify(call.name, tool) ?? identifyTool(tool);
  return { fingerprint, changed: fingerprint !== first || identities?.admits(call.name, fingerprint) === false };
}

/**
 * Just before the tool runs: it is still the tool every stage decided on (an `authorize`, a
 * guardrail or an approval in between could have reconfigured it). Otherwise `tool_changed`.
 */
export function recheckTool(call: GovernedCall): Promise<ToolMessage> | undefined {
  let fingerprint: string | undefined;
  try {
    fingerprint = checkIdentity(call, sealable(call)).fingerprint;
  } catch {
    fingerprint = undefined; // it had one when it was adopted: whatever it is now, it is not that tool
  }
  return fingerprint === call.fingerprint ? undefined : call.refuse("tool_changed");
}

/**
 * Parses the arguments exactly as the tool will; every later stage sees the result. Synchronous
 * for a JSON Schema tool and a zod schema with nothing in it that could wait (see `parseArguments`).
 */
export function parse(call: GovernedCall): Promise<ToolMessage | undefined> | undefined {
  const parsed = parseSafely(call, call.request.toolCall.args);
  return parsed instanceof Promise ? parsed.then((settled) => adopt(call, settled)) : adopt(call, parsed);
}

function adopt(call: GovernedCall, parsed: ParsedArguments): Promise<ToolMessage> | undefined {
  if (!parsed.ok) return call.refuse("invalid_arguments", argumentIssueDetails(call.name, parsed.issues));
  call.arguments = parsed;
  return undefined;
}

/** The tool's parse; a schema that throws (a refinement with a bug) refuses the call, never the run. */
export function parseSafely(call: GovernedCall, raw: unknown): ParsedArguments | Promise<ParsedArguments> {
  const failed = (error: unknown): ParsedArguments => {
    call.governance.logger.warn("the tool's schema threw while parsing a call's arguments; the call is refused", {
      toolName: call.name,
      toolCallId: call.id,
      error,
    });
    return { ok: false, issues: [{ path: "", message: "the tool's schema could not parse these arguments" }] };
  };
  let parsed: ParsedArguments | Promise<ParsedArguments>;
  try {
    parsed = parseArguments(sealable(call), raw);
  } catch (error) {
    return failed(error);
  }
  return parsed instanceof Promise ? parsed.catch(failed) : parsed;
}

/** The document the call touches is the turn's, when the tool declares one. */
export function checkScope(call: GovernedCall, scopeOf: ScopeOf | undefined): Promise<ToolMessage> | undefined {
  return inScope(call, scopeOf, call.checked.args) ? undefined : call.refuse("out_of_scope");
}

/** Whether `args` (the call's, or an approver's edit of them) touch the turn's document; a scope function that throws says no. */
function inScope(call: GovernedCall, scopeOf: ScopeOf | undefined, args: Readonly<Record<string, JsonValue>>): boolean {
  if (scopeOf === undefined) return true;
  let declared: unknown;
  try {
    declared = scopeOf(copyJson(args));
  } catch (error) {
    call.governance.logger.warn("a tool's scope function threw; the call is refused out_of_scope", {
      toolName: call.name,
      toolCallId: call.id,
      error,
    });
  }
  return declared === call.turn.scopeId;
}

/** What a side effect's discriminator answered for the call: its digest for the key (none for `null`), or that it failed. */
export type Discrimination = { readonly ok: true; readonly digest: string | undefined } | { readonly ok: false };

const UNDISCRIMINATED: Discrimination = { ok: true, digest: undefined };

/**
 * Asks a `side-effect` tool's discriminator about the call as checked now (an approver may have
 * edited its arguments), with a copy of them. One that throws, or answers anything but plain JSON
 * within `MAX_DISCRIMINATOR_CHARS`, fails: the call is refused before anything is claimed, since
 * the effect it would be claimed as is unknown. Logged without the value.
 */
export function discriminate(call: GovernedCall, discriminator: EffectDiscriminator | undefined): Discrimination {
  if (discriminator === undefined) return UNDISCRIMINATED;
  try {
    return { ok: true, digest: discriminatorDigest(discriminator(copyJson(call.checked.args), { id: call.id, name: call.name })) };
  } catch (error) {
    call.governance.logger.warn(
      "a side-effect tool's discriminator threw, or answered a value that is not plain JSON within its bound; the call is refused effect_unidentified",
      { toolName: call.name, toolCallId: call.id, error },
    );
    return { ok: false };
  }
}

/** The host's authorization, asked about the parsed arguments; only literally `true` allows. */
export function authorizeCall(
  call: GovernedCall,
  ask: ((call: AskedCall) => unknown) | undefined,
): Promise<ToolMessage | undefined> | undefined {
  if (ask === undefined) return undefined;
  const allowed = isAuthorized((args) => ask({ id: call.id, name: call.name, args, kind: call.kind }), {
    id: call.id,
    name: call.name,
    args: call.checked.args,
  }, call.governance.logger);
  const answer = (ok: boolean) => (ok ? undefined : call.refuse("unauthorized"));
  return allowed instanceof Promise ? allowed.then(answer) : answer(allowed);
}

/**
 * The guardrails, in order; approvals pause here. An approver's edit is a new call: it replaces
 * the call's arguments after the stages before this one (the tool's parse, `scopeOf`, `authorize`)
 * and every guardrail accepted it.
 */
export function guard(
  call: GovernedCall,
  ask: ((call: AskedCall) => unknown) | undefined,
  scopeOf?: ScopeOf,
  beforeAsk?: () => Promise<Refusal | typeof REPLAY_ONLY | undefined>,
): Promise<ToolMessage | undefined> | undefined {
  // No guardrail checks this call (the usual case for a zod tool with the default list): it passes
  // as parsed, with no approval, as an evaluation would answer, without building one.
  const parsedByZod = zodSchemaOf(call.request.tool) !== undefined;
  if (!call.governance.guardrails.some((guardrail) => checks(guardrail, { name: call.name, parsedByZod }))) return undefined;
  return evaluated(call, ask, scopeOf, beforeAsk);
}

async function evaluated(
  call: GovernedCall,
  ask: ((call: AskedCall) => unknown) | undefined,
  scopeOf: ScopeOf | undefined,
  beforeAsk: (() => Promise<Refusal | typeof REPLAY_ONLY | undefined>) | undefined,
): Promise<ToolMessage | undefined> {
  const { governance } = call;
  const env: GuardrailEnvironment = {
    guardrails: governance.guardrails,
    store: governance.store,
    audit: governance.audit,
    logger: governance.logger,
    turn: call.turn,
    scopeId: call.turn.scopeId,
    signal: call.signal,
    siblings: (call.step ?? []).flatMap((sibling) => (sibling.id === undefined || sibling.id === call.id ? [] : [sibling.id])),
    // A claimed call replays once it completed, so the approval its execution used covers that.
    reuseApplied: call.kind === "mutation" || call.kind === "side-effect",
    checkpointed: hasCheckpointer(call.request.runtime.configurable),
    beforeAsk,
    approvalFormat: governance.approvalFormat,
  };
  const evaluation = await evaluateGuardrails(env, checkedCall(call.request.tool, call, call.checked), {
    parse: async (raw) => parseSafely(call, raw),
    inScope: (args) => inScope(call, scopeOf, args),
    authorize: async (edited) =>
      ask === undefined ||
      isAuthorized((args) => ask({ id: call.id, name: call.name, args, kind: call.kind }), edited, governance.logger),
  });
  if ("blocked" in evaluation) return call.refuse(evaluation.blocked.refuse, evaluation.blocked.details);
  if ("refusal" in evaluation) {
    const { code, guardrail, approvalId } = evaluation;
    await call.record({ decision: "refused", code, guardrail, ...(approvalId === undefined ? {} : { approvalId }) });
    return evaluation.refusal;
  }
  call.adopt(evaluation.pass, evaluation.approval, evaluation.replayOnly === true);
  return undefined;
}

function sealable(call: GovernedCall): SealableTool {
  if (call.tool === undefined) throw new Error("unreachable: the step check sets the tool");
  return call.tool;
}

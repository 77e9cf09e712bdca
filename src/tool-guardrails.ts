/**
 * `createToolGuardrails`: the guardrail port on its own, for agents that edit no document but
 * still want every tool call's arguments checked (schema, policies, observe mode, approvals)
 * before it runs. No admission, no mutation slot: step 5 of the pipeline, `tool_failed` for
 * tools that throw, and the audit trail.
 */
import type { ToolMessage } from "@langchain/core/messages";
import { createMiddleware } from "langchain";
import { z } from "zod";
import { resolveTurn } from "./admission.js";
import { AuditOptionsSchema, AuditTrail, type AuditOptions } from "./audit.js";
import type { GuardrailStore } from "./contracts.js";
import { isWellFormedId } from "./decision/plan.js";
import { isUserText } from "./decision/transcript.js";
import { ConfigurationError } from "./errors.js";
import { isSealable } from "./execution/parse.js";
import { resolveGuardrails } from "./guardrails/list.js";
import type { Guardrail } from "./guardrails/port.js";
import { turnKey } from "./keys.js";
import { resolveLogger, type GuardrailLogger } from "./logger.js";
import { GuardrailListSchema, isFunction, LoggerSchema, StoreShape } from "./options.js";
import { GovernedCall, type CallTurn, type Governance } from "./pipeline/call.js";
import { runRead } from "./pipeline/execute.js";
import { authorizeCall, guard, parse, type AskedCall } from "./pipeline/stages.js";
import { refusal } from "./tool-messages.js";
import { TURN_CONTEXT_KEY } from "./turn-gate.js";

export interface ToolGuardrailsOptions {
  /** In order. A schema guardrail is always first unless the list has one. */
  readonly guardrails: readonly Guardrail[];
  /**
   * Where verdicts, approvals and the audit trail are recorded. Without a store, checks run on
   * every attempt and a re-run approval asks again.
   */
  readonly store?: GuardrailStore;
  /** Allows a call only by returning literally `true`; asked again for approved edits. */
  readonly authorize?: (call: { readonly id: string; readonly name: string; readonly args: unknown }) =>
    | boolean
    | Promise<boolean>;
  readonly audit?: AuditOptions;
  /** Default: `console.warn`. */
  readonly logger?: GuardrailLogger;
}

const OptionsSchema = z.strictObject({
  guardrails: GuardrailListSchema,
  store: StoreShape.optional(),
  authorize: z.custom<NonNullable<ToolGuardrailsOptions["authorize"]>>(isFunction).optional(),
  audit: AuditOptionsSchema.optional(),
  logger: LoggerSchema.optional(),
});

/**
 * Builds the tool guardrails middleware. Calls are keyed to a turn for recording: the turn in
 * `context` (`turnContext(turn)`) when there is one, else the thread and its latest user message.
 *
 * Throws `ConfigurationError` for invalid options.
 */
export function createToolGuardrails(options: ToolGuardrailsOptions) {
  const parsed = OptionsSchema.safeParse(options);
  if (!parsed.success) {
    throw new ConfigurationError(`invalid createToolGuardrails options: ${z.prettifyError(parsed.error)}`);
  }
  const { store, authorize } = parsed.data;
  const logger = resolveLogger(parsed.data.logger); // sanitizes every warning's fields
  const guardrails = resolveGuardrails(parsed.data.guardrails);
  const audit = new AuditTrail(store, parsed.data.audit ?? {}, logger);

  const governance: Governance = { store, audit, logger, guardrails };
  const asked = authorize === undefined ? undefined : (call: AskedCall) => authorize({ id: call.id, name: call.name, args: call.args });

  return createMiddleware({
    name: "ToolGuardrails",
    wrapToolCall: async (request, handler) => {
      request.runtime.signal?.throwIfAborted();
      const { runtime } = request;
      const call = new GovernedCall(governance, request, callTurn(runtime.context, runtime.configurable, request.state.messages), undefined);
      const refused =
        checkTool(call) ?? // a call id, a sealable tool
        (await parse(call)) ?? // invalid_arguments
        (await authorizeCall(call, asked)) ?? // unauthorized
        (await guard(call, asked)); // the guardrails' codes, approval_rejected
      if (refused !== undefined) return refused;
      // Any wrapToolCall middleware makes a tool exception fatal to the run; a failed tool is a
      // result the model can act on instead. Interrupts and cancellations still propagate.
      return runRead(call, handler, { maxAttempts: 1, delayMs: 0, requireText: false });
    },
  });
}

/** Without a document policy: a present call id, and a tool the guardrails can seal. */
function checkTool(call: GovernedCall): Promise<ToolMessage> | undefined {
  const { request } = call;
  if (!isWellFormedId(request.toolCall.id)) return Promise.resolve(refusal(request.toolCall, "duplicate_call_id"));
  if (!isSealable(request.tool)) return Promise.resolve(refusal(request.toolCall, "unregistered_tool"));
  call.tool = request.tool;
  return undefined;
}

/** The turn a call is recorded under: the trusted one in context, else the thread's latest user message (`isUserText`). */
function callTurn(
  context: unknown,
  configurable: Readonly<Record<string, unknown>> | undefined,
  messages: readonly { readonly id?: string | undefined }[],
): CallTurn {
  const raw = typeof context === "object" && context !== null ? (context as Record<string, unknown>)[TURN_CONTEXT_KEY] : undefined;
  if (raw !== undefined) {
    const { input, turnKey: key } = resolveTurn(raw);
    return { scopeId: input.scopeId, turnId: input.turnId, turnKey: key };
  }
  const threadId = configurable?.thread_id;
  const scopeId = typeof threadId === "string" && threadId !== "" ? threadId : "default";
  let turnId = "none";
  for (let index = messages.length - 1; index >= 0; index--) {
    const message = messages[index];
    if (message !== undefined && isUserText(message)) {
      turnId = message.id ?? `message-${String(index)}`;
      break;
    }
  }
  return { scopeId, turnId, turnKey: turnKey({ scopeId, turnId }) };
}

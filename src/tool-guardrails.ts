/**
 * `createToolGuardrails`: the guardrail port on its own, for agents that edit no document but
 * still want every tool call's arguments checked (schema, policies, observe mode, approvals)
 * before it runs. No admission, no mutation slot: step 5 of the pipeline, `tool_failed` for
 * tools that throw, and the audit trail.
 */
import { isGraphBubbleUp } from "@langchain/langgraph";
import { createMiddleware } from "langchain";
import { z } from "zod";
import { resolveTurn } from "./admission.js";
import { AuditOptionsSchema, AuditTrail, type AuditOptions } from "./audit.js";
import type { GuardrailStore } from "./contracts.js";
import { isUserText } from "./decision/transcript.js";
import { digest } from "./digest.js";
import { ConfigurationError } from "./errors.js";
import { checkedCall, evaluateGuardrails, type GuardrailEnvironment } from "./guardrails/evaluate.js";
import { resolveGuardrails } from "./guardrails/list.js";
import type { Guardrail } from "./guardrails/port.js";
import { turnKey } from "./keys.js";
import { resolveLogger, type GuardrailLogger } from "./logger.js";
import { GuardrailListSchema, isAuthorized, isFunction, LoggerSchema, StoreShape } from "./options.js";
import { refusal, resultText, type ToolResult } from "./tool-messages.js";
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

  const authorized = (call: { readonly id: string; readonly name: string; readonly args: unknown }) =>
    authorize === undefined ? true : isAuthorized((args) => authorize({ ...call, args }), call, logger);

  return createMiddleware({
    name: "ToolGuardrails",
    wrapToolCall: async (request, handler) => {
      const { toolCall, runtime } = request;
      runtime.signal?.throwIfAborted();
      const id = toolCall.id;
      if (id === undefined || id === "") return refusal(toolCall, "duplicate_call_id");
      const turn = callTurn(runtime.context, runtime.configurable, request.state.messages);
      const call = { id, name: toolCall.name, args: toolCall.args };
      let argsDigest: string;
      try {
        argsDigest = digest(call.args);
      } catch {
        return refusal(call, "invalid_arguments", { tool: call.name });
      }
      if (!(await authorized(call))) {
        await audit.record({
          decision: "refused",
          code: "unauthorized",
          turnKey: turn.turnKey,
          scopeId: turn.scopeId,
          toolCallId: id,
          toolName: call.name,
          argsDigest,
        });
        return refusal(call, "unauthorized");
      }
      const env: GuardrailEnvironment = {
        guardrails,
        store,
        audit,
        logger,
        turn,
        scopeId: turn.scopeId,
        signal: runtime.signal,
      };
      const evaluation = await evaluateGuardrails(env, checkedCall(request.tool, call, argsDigest), {
        digest,
        authorize: async (edited) => authorized(edited),
      });
      const refused = { turnKey: turn.turnKey, scopeId: turn.scopeId, toolCallId: id, toolName: call.name, argsDigest } as const;
      if ("refusal" in evaluation) {
        await audit.record({ decision: "refused", ...refused, code: evaluation.code, guardrail: evaluation.guardrail });
        return evaluation.refusal;
      }
      const approved = evaluation.pass;
      const effective =
        approved.argsDigest === argsDigest ? request : { ...request, toolCall: { ...toolCall, args: approved.args } };
      const ran = { ...refused, argsDigest: approved.argsDigest };
      let result: ToolResult;
      try {
        result = await handler(effective);
      } catch (error) {
        // Any wrapToolCall middleware makes a tool exception fatal to the run; a failed tool is
        // a result the model can act on instead. Interrupts and cancellations still propagate.
        if (isGraphBubbleUp(error) || runtime.signal?.aborted === true) throw error;
        logger.warn("tool failed", { code: "tool_failed", toolName: call.name, toolCallId: id, error });
        await audit.record({ decision: "failed", ...ran, code: "tool_failed" });
        return refusal(call, "tool_failed");
      }
      const text = resultText(result);
      await audit.record({ decision: "executed", ...ran, args: approved.args, ...(text === undefined ? {} : { result: text.content }) });
      return result;
    },
  });
}

/** The turn a call is recorded under: the trusted one in context, else the thread's latest user message (`isUserText`). */
function callTurn(
  context: unknown,
  configurable: Readonly<Record<string, unknown>> | undefined,
  messages: readonly { readonly id?: string | undefined }[],
): GuardrailEnvironment["turn"] {
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

/**
 * `createToolGuardrails`: the guardrail port on its own, for agents that edit no document but
 * still want every tool call's arguments checked (schema, policies, observe mode, approvals)
 * before it runs. No admission, no mutation slot: step 5 of the pipeline, `tool_failed` for
 * tools that throw, each result bound to its call (a `Command` too, or `unsupported_result`), and
 * the audit trail.
 */
import type { ToolMessage } from "@langchain/core/messages";
import { createMiddleware } from "langchain";
import { z } from "zod";
import { resolveTurn } from "./admission.js";
import { AuditOptionsSchema, type AuditOptions } from "./audit.js";
import type { AnyGuardrailStore } from "./store/capabilities.js";
import { isWellFormedId } from "./decision/plan.js";
import { isUserText } from "./decision/transcript.js";
import { ConfigurationError } from "./errors.js";
import { isSealable } from "./execution/parse.js";
import { guardTool } from "./execution/seal.js";
import { checkApprovalsCanPause } from "./guardrails/approval.js";
import { appliesTo, type Guardrail } from "./guardrails/port.js";
import { turnKey } from "./keys.js";
import type { GuardrailLogger } from "./logger.js";
import { GuardrailListSchema, isFunction, LoggerSchema, StoreShape } from "./options.js";
import { contextOf, createGovernance, GovernedCall, type AuthorizeRuntime, type CallTurn } from "./pipeline/call.js";
import { ToolCoverage, type Coverage } from "./pipeline/coverage.js";
import { runRead } from "./pipeline/execute.js";
import { isTwin, markGoverned } from "./one-middleware.js";
import { observeCall } from "./pipeline/observe.js";
import { adoptTool, authorizeCall, guard, parse, type AskedCall } from "./pipeline/stages.js";
import { TelemetrySchema, type GuardrailTelemetry } from "./telemetry.js";
import { TURN_CONTEXT_KEY } from "./turn-gate.js";
import { ApprovalFormatSchema } from "./guardrails/langchain-format.js";

/** A call as `createToolGuardrails`' `authorize` sees it: a copy of its parsed arguments. */
export interface ToolAuthorizeCall {
  /** The call id the model gave. */
  readonly id: string;
  /** The tool the call is to. */
  readonly name: string;
  /** The arguments as the tool's schema parsed them: what the body will receive. */
  readonly args: unknown;
}

/** Allows a call only by returning literally `true`. Throwing or any other value refuses it. */
export type ToolAuthorize = (call: ToolAuthorizeCall, runtime: AuthorizeRuntime) => boolean | Promise<boolean>;

/**
 * The explicit decision to allow every call of the listed tools, for an agent whose tools need
 * no per-user check. Without an `authorize`, every call is refused.
 */
export const allowAllCalls: ToolAuthorize = () => true;

/** `createToolGuardrails`' options; validated when the middleware is built. */
export interface ToolGuardrailsOptions {
  /** In order. A schema guardrail is always first unless the list has one. */
  readonly guardrails: readonly Guardrail[];
  /** Every tool whose calls may run, by name. Calls to any other tool are refused `unregistered_tool`. */
  readonly tools: readonly string[];
  /**
   * Allows a call only by returning literally `true`; asked again for approved edits. Omitted,
   * every call is refused `unauthorized`: pass `allowAllCalls` to allow them all.
   */
  readonly authorize?: ToolAuthorize;
  /**
   * Where verdicts, approvals and the audit trail are recorded. Without a store, checks run on
   * every attempt and a re-run approval asks again.
   */
  readonly store?: AnyGuardrailStore;
  /** Where the audit trail goes; see {@link AuditOptions}. */
  readonly audit?: AuditOptions;
  /** Default: `console.warn`. */
  readonly logger?: GuardrailLogger;
  /** As for `createDocumentGuardrails`: `openTelemetry()` from `arkah-agent-guardrails/otel`. */
  readonly telemetry?: GuardrailTelemetry;
  /** As for `createDocumentGuardrails`: `refuse` (default) or `fail` on a tool `tools` does not list. */
  readonly unregisteredTools?: "refuse" | "fail";
  /**
   * The approval interrupt's payload and the resume value it takes: `"arkah"` (default, an
   * `ApprovalRequest`, answered `{ decision, approvalId? }`) or `"langchain"`, the format of
   * LangChain's `humanInTheLoopMiddleware` (a `HITLRequest` with one action request and the
   * stored request's `approvalId`, answered by an `HITLResponse` with exactly one decision), so a
   * client that answers LangChain's middleware answers it (Agent Inbox does not: docs/deploying.md).
   */
  readonly approvalFormat?: "arkah" | "langchain";
}

const OptionsSchema = z.strictObject({
  guardrails: GuardrailListSchema,
  tools: z.array(z.string().min(1)).min(1, "list at least one tool"),
  authorize: z.custom<ToolAuthorize>(isFunction, "authorize must be a function returning true to allow a call").optional(),
  store: StoreShape.optional(),
  audit: AuditOptionsSchema.optional(),
  logger: LoggerSchema.optional(),
  telemetry: TelemetrySchema.optional(),
  unregisteredTools: z.enum(["refuse", "fail"]).optional(),
  approvalFormat: ApprovalFormatSchema.optional(),
});

/** What `report()` says about one tool `createToolGuardrails` governs. */
export interface ToolGuardrailsToolReport {
  /** The tool's name, as listed in `tools`. */
  readonly name: string;
  /** `toolFingerprint` of the tool, once the agent's model was called (undefined before). */
  readonly fingerprint: string | undefined;
  /** The guardrails that check its calls, in order. */
  readonly guardrails: readonly string[];
}

/**
 * Builds the tool guardrails middleware. Calls are keyed to a turn for recording: the turn in
 * `context` (`turnContext(turn)`) when there is one, else the thread and its latest user message.
 * `report()` on the result lists what it governs.
 *
 * Throws `ConfigurationError` for invalid options.
 */
export function createToolGuardrails(options: ToolGuardrailsOptions) {
  const parsed = OptionsSchema.safeParse(options);
  if (!parsed.success) {
    throw new ConfigurationError(`invalid createToolGuardrails options: ${z.prettifyError(parsed.error)}`);
  }
  const { authorize, tools } = parsed.data;
  const governance = createGovernance(parsed.data, "createToolGuardrails");
  const { guardrails } = governance;
  const registered = new Set(tools);
  const coverage = new ToolCoverage(registered, parsed.data.unregisteredTools);
  // Fails closed: no authorize is no permission.
  const decide: ToolAuthorize = authorize ?? (() => false);

  const middleware = createMiddleware({
    name: "ToolGuardrails",
    wrapModelCall: (request, handler) => {
      const governed = markGoverned(request, "createToolGuardrails"); // one guardrails middleware per agent
      coverage.observe(request.tools);
      checkApprovalsCanPause(guardrails, request.runtime.configurable);
      // A listed tool's body is guarded before the model can call anything (src/execution/seal.ts).
      for (const tool of request.tools) {
        const { name } = tool as { name?: unknown };
        if (typeof name !== "string" || !registered.has(name)) continue;
        if (isTwin(tool)) throw twinError(name);
        if (isSealable(tool)) guardTool(tool);
      }
      return handler(governed);
    },
    wrapToolCall: async (request, handler) => {
      request.runtime.signal?.throwIfAborted();
      const { runtime } = request;
      const call = new GovernedCall(governance, request, callTurn(runtime.context, runtime.configurable, request.state.messages), undefined);
      const context = { context: contextOf(runtime.context), signal: runtime.signal };
      const asked = (subject: AskedCall) => decide({ id: subject.id, name: subject.name, args: subject.args }, context);
      return observeCall(call, registered.has(call.name), async () => {
        const refused =
          checkTool(call, registered) ?? // a registered, sealable tool; a call id
          (await parse(call)) ?? // invalid_arguments
          (await authorizeCall(call, asked)) ?? // unauthorized
          (await guard(call, asked)); // the guardrails' codes, approval_rejected
        if (refused !== undefined) return refused;
        // Any wrapToolCall middleware makes a tool exception fatal to the run; a failed tool is a
        // result the model can act on instead. Interrupts and cancellations still propagate.
        return runRead(call, handler, { maxAttempts: 1, delayMs: 0 }, { requireText: false });
      });
    },
  });

  /** Every listed tool and the guardrails that check it; the coverage once the agent has run. */
  const report = (): { readonly tools: readonly ToolGuardrailsToolReport[]; readonly coverage: Coverage | undefined } => ({
    coverage: coverage.report(),
    tools: tools.map((name) => ({
      name,
      fingerprint: coverage.fingerprint(name),
      guardrails: guardrails.filter((guardrail) => appliesTo(guardrail, name)).map((guardrail) => guardrail.name),
    })),
  });
  return Object.assign(middleware, { report });
}

function twinError(name: string): ConfigurationError {
  return new ConfigurationError(
    `tools: ${name} is already a governed twin (guardTools), which checks and audits each call itself; give the agent the original tool`,
  );
}

/** Without a document policy: a listed tool the guardrails can seal, and a well-formed call id. */
function checkTool(call: GovernedCall, registered: ReadonlySet<string>): Promise<ToolMessage> | undefined {
  const { request } = call;
  if (!registered.has(call.name) || !isSealable(request.tool)) return call.refuse("unregistered_tool");
  if (!isWellFormedId(request.toolCall.id)) return call.refuse("duplicate_call_id");
  return adoptTool(call, request.tool);
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

/**
 * `createDocumentGuardrails`: the `createAgent` shell around the decision table of design
 * section 3. It reads the transcript, asks the pure checks in `decision/` in order, and does the
 * I/O (store, `authorize`, the tool handler). The first refusal wins and reaches the model as an
 * error `ToolMessage`; nothing here retries, except the retry boundary a tool's policy asks for.
 */
import { ToolMessage } from "@langchain/core/messages";
import type { ClientTool, ServerTool } from "@langchain/core/tools";
import { interopSafeParseAsync, isInteropZodSchema } from "@langchain/core/utils/types";
import { isGraphBubbleUp, type Command } from "@langchain/langgraph";
import { createMiddleware } from "langchain";
import { z } from "zod";
import { resolveTurn, type ResolvedTurn } from "./admission.js";
import {
  ToolPolicySchema,
  type GuardrailStore,
  type MutationSettlement,
  type MutationResult,
  type RefusalCode,
  type ToolKind,
  type ToolPolicy,
  type TurnInput,
} from "./contracts.js";
import { checkCall, checkMutationStep, claimAction, REFUSAL_MESSAGES } from "./decision/plan.js";
import { findStep, readCandidates, textContent } from "./decision/transcript.js";
import { ConfigurationError, SettlementError } from "./errors.js";
import { mutationIdentity, readEvidenceDigest } from "./keys.js";
import { retryBoundary } from "./retry.js";
import { parseClaimResult, parseStoreValue, StoreBooleanSchema } from "./stores/validate.js";
import { TurnGate, userSegment, type AdmittedTurn } from "./turn-gate.js";

/** A tool call as `authorize` sees it: a copy, so changing it changes nothing. */
export interface AuthorizeCall {
  readonly id: string;
  readonly name: string;
  readonly args: unknown;
  readonly kind: ToolKind;
}

/** Allows a call only by returning literally `true`. Throwing or any other value refuses it. */
export type Authorize = (call: AuthorizeCall, input: TurnInput) => boolean | Promise<boolean>;

/** Receives warnings about failed tools and rejected settlements. Never given tool results. */
export interface GuardrailLogger {
  warn(message: string, fields: Readonly<Record<string, unknown>>): void;
}

export interface DocumentGuardrailsOptions {
  /**
   * The trusted turn, when the middleware is built for one turn. Omit it to build one middleware
   * for the whole server and pass each turn as `agent.invoke(..., { context: turnContext(turn) })`.
   */
  readonly input?: TurnInput;
  readonly store: GuardrailStore;
  /** The label of the segment holding the user's message, e.g. `"user"`. */
  readonly userMessageLabel: string;
  readonly authorize: Authorize;
  /** Every tool the agent exposes, by name. Calls to any other tool are refused. */
  readonly tools: Readonly<Record<string, ToolPolicy>>;
  /**
   * Refuse a mutation while another turn in its scope has an `unknown` outcome
   * (`scope_unresolved`), until an operator reconciles it. Default true.
   */
  readonly requireResolvedScope?: boolean;
  /** Default: `console.warn`. */
  readonly logger?: GuardrailLogger;
}

const isFunction = (value: unknown) => typeof value === "function";
const STORE_METHODS = [
  "getReceipt",
  "putReceiptIfAbsent",
  "recordSuccessfulRead",
  "hasSuccessfulRead",
  "claimMutation",
  "settleMutation",
] as const;

const OptionsSchema = z.strictObject({
  input: z.unknown().optional(),
  store: z.custom<GuardrailStore>(
    (value) =>
      typeof value === "object" &&
      value !== null &&
      STORE_METHODS.every((method) => isFunction((value as Record<string, unknown>)[method])),
    `store must implement GuardrailStore (${STORE_METHODS.join(", ")})`,
  ),
  userMessageLabel: z.string().min(1),
  authorize: z.custom<Authorize>(isFunction, "authorize must be a function returning true to allow a call"),
  tools: z
    .record(z.string().min(1), ToolPolicySchema)
    .refine((tools) => Object.keys(tools).length > 0, "register at least one tool"),
  requireResolvedScope: z.boolean().optional(),
  logger: z
    .custom<GuardrailLogger>(
      (value) => typeof value === "object" && value !== null && isFunction((value as { warn?: unknown }).warn),
      "logger must have a warn(message, fields) method",
    )
    .optional(),
});

/** A tool's policy with its defaults applied. */
interface ResolvedPolicy {
  readonly kind: ToolKind;
  readonly maxAttempts: number;
  readonly delayMs: number;
}

function resolvePolicy(name: string, policy: ToolPolicy): ResolvedPolicy {
  const { owner = "middleware", maxAttempts = 1, delayMs = 200, idempotent = false } = policy.retry ?? {};
  if (owner === "tool" && maxAttempts > 1) {
    throw new ConfigurationError(
      `tools.${name}.retry: owner "tool" means the tool retries itself, so the middleware makes one attempt; remove maxAttempts or set owner "middleware"`,
    );
  }
  if (policy.kind === "mutation" && maxAttempts > 1 && !idempotent) {
    throw new ConfigurationError(
      `tools.${name}.retry: a mutation gets one attempt unless its write service dedupes by mutationKey; set idempotent: true or remove maxAttempts`,
    );
  }
  return { kind: policy.kind, maxAttempts, delayMs };
}

const consoleLogger: GuardrailLogger = {
  warn: (message, fields) => {
    console.warn(`[arkah-agent-guardrails] ${message}`, fields);
  },
};

type ToolResult = ToolMessage | Command;

/**
 * Builds the document guardrails middleware. Place it first in `middleware` so it wraps every
 * other tool wrapper (and owns retries).
 *
 * Throws `ConfigurationError` for invalid options, naming the fix.
 */
export function createDocumentGuardrails(options: DocumentGuardrailsOptions) {
  const parsed = OptionsSchema.safeParse(options);
  if (!parsed.success) {
    throw new ConfigurationError(`invalid createDocumentGuardrails options: ${z.prettifyError(parsed.error)}`);
  }
  const { store, userMessageLabel, authorize, tools, requireResolvedScope = true } = parsed.data;
  const logger = parsed.data.logger ?? consoleLogger;
  const policies = new Map(Object.entries(tools).map(([name, policy]) => [name, resolvePolicy(name, policy)]));
  const kindOf = (toolName: string) => policies.get(toolName)?.kind;
  const gate = new TurnGate(store, userMessageLabel, fixedTurn(parsed.data.input, userMessageLabel));

  return createMiddleware({
    name: "DocumentGuardrails",

    // Admission before every model call, without adding a graph node.
    wrapModelCall: async (request, handler) => {
      await gate.admit(request.runtime.context, request.state.messages);
      return handler(request);
    },

    wrapToolCall: async (request, handler) => {
      const { toolCall, runtime } = request;
      const signal = runtime.signal;
      signal?.throwIfAborted(); // an aborted run executes nothing
      const messages = request.state.messages;
      const admitted = await gate.admit(runtime.context, messages);

      // 2-3: registered tool, unique call ids in the step.
      const checked = checkCall(
        toolCall,
        toolCall.id === undefined ? undefined : findStep(messages, toolCall.id),
        kindOf(toolCall.name),
        request.tool !== undefined,
      );
      if ("refuse" in checked) return refusal(toolCall, checked.refuse);
      const call = { id: checked.id, name: toolCall.name, args: toolCall.args, kind: checked.kind };
      const policy = policies.get(call.name) ?? unreachable();

      // 4: authorization, for every call, replays included.
      if (!(await isAuthorized(authorize, call, admitted.turn.input, logger))) {
        return refusal(call, "unauthorized");
      }
      // 5: the tool's own argument schema, before anything runs or is claimed.
      const issues = await argumentIssues(request.tool, call.args);
      if (issues !== undefined) {
        return refusal(call, "invalid_arguments", { tool: call.name, issues });
      }

      const run = () => retryBoundary(async () => handler(request), policy.maxAttempts, policy.delayMs, signal);

      // 6: reads and auxiliary calls run; a successful document read becomes evidence.
      if (call.kind !== "mutation") {
        let result: ToolResult;
        try {
          result = await run();
        } catch (error) {
          if (isGraphBubbleUp(error) || signal?.aborted === true) throw error;
          logger.warn("tool failed", { code: "tool_failed", toolName: call.name, toolCallId: call.id, error });
          return refusal(call, "tool_failed");
        }
        const text = resultText(result);
        if (text === undefined) return refusal(call, "unsupported_result");
        if (call.kind === "document-read" && text.status === "success") {
          await store.recordSuccessfulRead({
            turnKey: admitted.turn.turnKey,
            evidenceDigest: readEvidenceDigest(admitted.turn.turnKey, {
              toolCallId: call.id,
              toolName: call.name,
              content: text.content,
            }),
          });
        }
        return result;
      }

      // 7: mutations. Step rules first, then read evidence, then the atomic claim.
      const stepRefusal = checkMutationStep(call.id, findStep(messages, call.id) ?? [], kindOf);
      if (stepRefusal !== undefined) return refusal(call, stepRefusal.refuse);
      if (!(await hasTrustedRead(store, admitted, messages, kindOf))) return refusal(call, "read_required");

      signal?.throwIfAborted();
      const turn = admitted.turn;
      const identity = mutationIdentity({ scopeId: turn.input.scopeId, turnKey: turn.turnKey }, call);
      const action = claimAction(parseClaimResult(await store.claimMutation(identity, { requireResolvedScope })));
      if ("refuse" in action) return refusal(call, action.refuse);
      if ("replay" in action) return replayMessage(call, action.replay);

      // The slot is ours: run once, then settle. Anything but a text result settles `unknown`.
      const token = action.execute;
      const settle = async (outcome: { outcome: "unknown" } | { outcome: "complete"; result: MutationResult }) => {
        const settlement: MutationSettlement = { turnKey: turn.turnKey, token, ...outcome };
        let applied: boolean;
        try {
          applied = parseStoreValue(StoreBooleanSchema, await store.settleMutation(settlement), "settleMutation answer");
        } catch (error) {
          const failure = new SettlementError(
            { toolName: call.name, toolCallId: call.id, mutationKey: identity.mutationKey, outcome: outcome.outcome },
            { cause: error },
          );
          logger.warn(failure.message, { toolName: call.name, toolCallId: call.id, mutationKey: identity.mutationKey, error });
          throw failure;
        }
        if (!applied) {
          logger.warn("settlement rejected: the claim is no longer pending under this token", {
            toolName: call.name,
            toolCallId: call.id,
            mutationKey: identity.mutationKey,
          });
        }
      };
      const settleUnknown = () => settle({ outcome: "unknown" });
      let result: ToolResult;
      try {
        result = await run();
      } catch (error) {
        await settleUnknown();
        if (isGraphBubbleUp(error) || signal?.aborted === true) throw error;
        logger.warn("mutation failed; its outcome is unknown", {
          code: "mutation_unknown",
          toolName: call.name,
          toolCallId: call.id,
          error,
        });
        return refusal(call, "mutation_unknown");
      }
      const text = resultText(result);
      if (text === undefined) {
        await settleUnknown();
        return refusal(call, "unsupported_result");
      }
      await settle({ outcome: "complete", result: text });
      return result;
    },
  });
}

function fixedTurn(input: unknown, userMessageLabel: string): ResolvedTurn | undefined {
  if (input === undefined) return undefined;
  try {
    const turn = resolveTurn(input);
    userSegment(turn.input, userMessageLabel);
    return turn;
  } catch (error) {
    throw new ConfigurationError(`invalid createDocumentGuardrails input: ${(error as Error).message}`, {
      cause: error,
    });
  }
}

async function isAuthorized(
  authorize: Authorize,
  call: AuthorizeCall,
  input: TurnInput,
  logger: GuardrailLogger,
): Promise<boolean> {
  try {
    // Only literally `true`: a JavaScript caller can return anything.
    const answer: unknown = await authorize({ ...call, args: structuredClone(call.args) }, input);
    return answer === true;
  } catch (error) {
    if (isGraphBubbleUp(error)) throw error; // an approval interrupt pauses the run
    logger.warn("authorize threw; the call is refused", { toolName: call.name, toolCallId: call.id, error });
    return false;
  }
}

/** A problem with one argument, located by JSON Pointer (`""` is the whole argument object). */
export interface ArgumentIssue {
  readonly path: string;
  readonly message: string;
}

/** Every problem the tool's zod schema reports, or undefined when the arguments are valid. */
async function argumentIssues(tool: ClientTool | ServerTool | undefined, args: unknown) {
  const schema = (tool as { schema?: unknown } | undefined)?.schema;
  if (!isInteropZodSchema(schema)) return undefined;
  const parsed = await interopSafeParseAsync(schema, args);
  if (parsed.success) return undefined;
  return parsed.error.issues.map(
    (issue): ArgumentIssue => ({ path: jsonPointer(issue.path), message: issue.message }),
  );
}

function jsonPointer(path: readonly PropertyKey[]): string {
  return path.map((segment) => `/${String(segment).replaceAll("~", "~0").replaceAll("/", "~1")}`).join("");
}

/** Whether the store confirms a document read the transcript shows in this turn. */
async function hasTrustedRead(
  store: GuardrailStore,
  admitted: AdmittedTurn,
  messages: Parameters<typeof readCandidates>[0],
  kindOf: (toolName: string) => ToolKind | undefined,
): Promise<boolean> {
  const { turnKey } = admitted.turn;
  for (const read of readCandidates(messages, admitted.humanIndex, kindOf)) {
    const answer = await store.hasSuccessfulRead({ turnKey, evidenceDigest: readEvidenceDigest(turnKey, read) });
    if (parseStoreValue(StoreBooleanSchema, answer, "hasSuccessfulRead answer")) return true;
  }
  return false;
}

/** The text and status of a tool result, or undefined when it is not a text `ToolMessage`. */
function resultText(result: ToolResult): MutationResult | undefined {
  if (!ToolMessage.isInstance(result)) return undefined;
  const content = textContent(result);
  if (content === undefined) return undefined;
  return { content, status: result.status === "error" ? "error" : "success" };
}

function refusal(
  call: { readonly id?: string | undefined; readonly name: string },
  code: RefusalCode,
  details?: Readonly<Record<string, unknown>>,
): ToolMessage {
  return new ToolMessage({
    content: JSON.stringify({ guardrail: code, message: REFUSAL_MESSAGES[code], ...details }),
    tool_call_id: call.id ?? "",
    name: call.name,
    status: "error",
  });
}

function replayMessage(call: { readonly id: string; readonly name: string }, result: MutationResult): ToolMessage {
  return new ToolMessage({ content: result.content, status: result.status, tool_call_id: call.id, name: call.name });
}

function unreachable(): never {
  throw new Error("unreachable: a checked call has a policy");
}

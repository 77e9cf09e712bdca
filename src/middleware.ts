/**
 * `createDocumentGuardrails`: the `createAgent` shell around the decision table of design
 * section 3. It reads the transcript, asks the pure checks in `decision/` in order, and does the
 * I/O (store, `authorize`, guardrails, the tool handler). The first refusal wins and reaches the
 * model as an error `ToolMessage`; every decision is recorded in the audit trail.
 */
import { isGraphBubbleUp } from "@langchain/langgraph";
import { createMiddleware } from "langchain";
import { z } from "zod";
import { resolveTurn, type ResolvedTurn } from "./admission.js";
import { AuditOptionsSchema, AuditTrail, type AuditDraft, type AuditOptions } from "./audit.js";
import {
  ToolPolicySchema,
  type GuardrailStore,
  type JsonValue,
  type MutationResult,
  type MutationSettlement,
  type RefusalCode,
  type ToolKind,
  type ToolPolicy,
  type TurnInput,
} from "./contracts.js";
import { checkCall, checkMutationStep, claimAction } from "./decision/plan.js";
import { findStep, readCandidates } from "./decision/transcript.js";
import { digest } from "./digest.js";
import { ConfigurationError, SettlementError } from "./errors.js";
import { checkedCall, evaluateGuardrails, type GuardrailEnvironment } from "./guardrails/evaluate.js";
import type { Guardrail } from "./guardrails/port.js";
import { resolveGuardrails } from "./guardrails/list.js";
import { mutationIdentity, readEvidenceDigest } from "./keys.js";
import { resolveLogger, type GuardrailLogger } from "./logger.js";
import { GuardrailListSchema, isAuthorized, isFunction, LoggerSchema, StoreShape } from "./options.js";
import { retryBoundary } from "./retry.js";
import { parseClaimResult, parseStoreValue, StoreBooleanSchema } from "./stores/validate.js";
import { refusal, replayMessage, resultText, type ToolResult } from "./tool-messages.js";
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
   * Checks of each call's arguments, in order, after `authorize` and before anything runs or is
   * claimed. A schema guardrail (`createSchemaGuardrail()`) is always the first member unless the
   * list has one of its own.
   */
  readonly guardrails?: readonly Guardrail[];
  /**
   * Refuse a mutation while another turn in its scope has an `unknown` outcome
   * (`scope_unresolved`), until an operator reconciles it. Default true.
   */
  readonly requireResolvedScope?: boolean;
  /** Every decision is appended to the store's audit trail; this adds a sink and value capture. */
  readonly audit?: AuditOptions;
  /** Default: `console.warn`. */
  readonly logger?: GuardrailLogger;
}

/** What `report()` says about one governed tool. */
export interface ToolReport {
  readonly name: string;
  readonly kind: ToolKind;
  readonly retry: { readonly owner: "tool" | "middleware"; readonly maxAttempts: number; readonly idempotent: boolean };
  /** The guardrails that check its calls, in order. */
  readonly guardrails: readonly string[];
}

const OptionsSchema = z.strictObject({
  input: z.unknown().optional(),
  store: StoreShape,
  userMessageLabel: z.string().min(1),
  authorize: z.custom<Authorize>(isFunction, "authorize must be a function returning true to allow a call"),
  tools: z
    .record(z.string().min(1), ToolPolicySchema)
    .refine((tools) => Object.keys(tools).length > 0, "register at least one tool"),
  guardrails: GuardrailListSchema.optional(),
  requireResolvedScope: z.boolean().optional(),
  audit: AuditOptionsSchema.optional(),
  logger: LoggerSchema.optional(),
});

/** A tool's policy with its defaults applied. */
interface ResolvedPolicy {
  readonly kind: ToolKind;
  readonly owner: "tool" | "middleware";
  readonly maxAttempts: number;
  readonly delayMs: number;
  readonly idempotent: boolean;
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
  return { kind: policy.kind, owner, maxAttempts, delayMs, idempotent };
}

/**
 * Builds the document guardrails middleware. Place it first in `middleware` so it wraps every
 * other tool wrapper (and owns retries). `report()` on the result lists what it governs.
 *
 * Throws `ConfigurationError` for invalid options, naming the fix.
 */
export function createDocumentGuardrails(options: DocumentGuardrailsOptions) {
  const parsed = OptionsSchema.safeParse(options);
  if (!parsed.success) {
    throw new ConfigurationError(`invalid createDocumentGuardrails options: ${z.prettifyError(parsed.error)}`);
  }
  const { store, userMessageLabel, authorize, tools, requireResolvedScope = true } = parsed.data;
  const logger = resolveLogger(parsed.data.logger); // sanitizes every warning's fields
  const policies = new Map(Object.entries(tools).map(([name, policy]) => [name, resolvePolicy(name, policy)]));
  const kindOf = (toolName: string) => policies.get(toolName)?.kind;
  const guardrails = resolveGuardrails(parsed.data.guardrails);
  const audit = new AuditTrail(store, parsed.data.audit ?? {}, logger);
  const gate = new TurnGate(store, userMessageLabel, fixedTurn(parsed.data.input, userMessageLabel));

  const middleware = createMiddleware({
    name: "DocumentGuardrails",

    // 1: admission before every model call, without adding a graph node.
    wrapModelCall: async (request, handler) => {
      await gate.admit(request.runtime.context, request.state.messages);
      return handler(request);
    },

    wrapToolCall: async (request, handler) => {
      const { toolCall, runtime } = request;
      const signal = runtime.signal;
      signal?.throwIfAborted(); // an aborted run executes nothing
      const messages = request.state.messages;
      // 1: admission before every tool call.
      const admitted = await gate.admit(runtime.context, messages);
      const { turn } = admitted;
      const record = (draft: Omit<AuditDraft, "turnKey" | "scopeId" | "toolName">) =>
        audit.record({ turnKey: turn.turnKey, scopeId: turn.input.scopeId, toolName: toolCall.name, ...draft });
      // The argument digest binds verdicts, approvals, claims and audit events to these arguments.
      const argsDigest = digestOrUndefined(toolCall.args);
      const refuse = async (code: RefusalCode, details?: Readonly<Record<string, JsonValue>>) => {
        const kind = kindOf(toolCall.name);
        await record({
          decision: code === "read_batch_deferred" ? "deferred" : "refused",
          code,
          ...(toolCall.id === undefined || toolCall.id === "" ? {} : { toolCallId: toolCall.id }),
          ...(kind === undefined ? {} : { kind }),
          ...(argsDigest === undefined ? {} : { argsDigest }),
        });
        return refusal(toolCall, code, details);
      };

      // 2-3: a registered tool the agent exposes; present, unique call ids in the step.
      const step = toolCall.id === undefined ? undefined : findStep(messages, toolCall.id);
      const checked = checkCall(toolCall, step, kindOf(toolCall.name), request.tool !== undefined);
      if ("refuse" in checked) return refuse(checked.refuse);
      const policy = policies.get(toolCall.name) ?? unreachable();
      const call = { id: checked.id, name: toolCall.name, args: toolCall.args, kind: checked.kind };

      // 4: authorization, for every call, replays included.
      const ask = (args: unknown) => authorize({ ...call, args }, turn.input);
      if (!(await isAuthorized(ask, call, logger))) return refuse("unauthorized");

      // 5: guardrails, in order, before anything runs or is claimed; approvals pause here.
      if (argsDigest === undefined) return refuse("invalid_arguments", { tool: call.name });
      const env: GuardrailEnvironment = {
        guardrails,
        store,
        audit,
        logger,
        turn: { scopeId: turn.input.scopeId, turnId: turn.input.turnId, turnKey: turn.turnKey },
        scopeId: turn.input.scopeId,
        signal,
      };
      const evaluation = await evaluateGuardrails(env, checkedCall(request.tool, call, argsDigest), {
        digest,
        authorize: (edited) => isAuthorized(ask, edited, logger),
      });
      if ("refusal" in evaluation) {
        const { code, guardrail } = evaluation;
        await record({ decision: "refused", toolCallId: call.id, kind: call.kind, argsDigest, code, guardrail });
        return evaluation.refusal;
      }
      const approved = evaluation.pass;
      const effective =
        approved.argsDigest === argsDigest ? request : { ...request, toolCall: { ...toolCall, args: approved.args } };
      const ran = { toolCallId: call.id, kind: call.kind, argsDigest: approved.argsDigest } as const;
      const run = () => {
        const attempt = async () => handler(effective);
        return policy.maxAttempts === 1 ? attempt() : retryBoundary(attempt, policy.maxAttempts, policy.delayMs, signal);
      };

      // 6: reads and auxiliary calls run; a successful document read becomes evidence.
      if (call.kind !== "mutation") {
        let result: ToolResult;
        try {
          result = await run();
        } catch (error) {
          if (isGraphBubbleUp(error) || signal?.aborted === true) throw error;
          logger.warn("tool failed", { code: "tool_failed", toolName: call.name, toolCallId: call.id, error });
          await record({ decision: "failed", ...ran, code: "tool_failed" });
          return refusal(call, "tool_failed");
        }
        const text = resultText(result);
        if (text === undefined) {
          await record({ decision: "failed", ...ran, code: "unsupported_result" });
          return refusal(call, "unsupported_result");
        }
        if (call.kind === "document-read" && text.status === "success") {
          await store.recordSuccessfulRead({
            turnKey: turn.turnKey,
            evidenceDigest: readEvidenceDigest(turn.turnKey, { toolCallId: call.id, toolName: call.name, content: text.content }),
          });
        }
        await record({ decision: "executed", ...ran, args: approved.args, result: text.content });
        return result;
      }

      // 7: mutations. Step rules first, then read evidence, then the atomic claim.
      const stepRefusal = checkMutationStep(call.id, step ?? [], kindOf);
      if (stepRefusal !== undefined) return refuse(stepRefusal.refuse);
      if (!(await hasTrustedRead(store, admitted, messages, kindOf))) return refuse("read_required");

      signal?.throwIfAborted();
      const identity = mutationIdentity(
        { scopeId: turn.input.scopeId, turnKey: turn.turnKey },
        { id: call.id, name: call.name, argsDigest: approved.argsDigest },
      );
      const action = claimAction(parseClaimResult(await store.claimMutation(identity, { requireResolvedScope })));
      if ("refuse" in action) return refuse(action.refuse);
      const mutationEvent = { ...ran, mutationKey: identity.mutationKey } as const;
      if ("replay" in action) {
        await record({ decision: "replayed", ...mutationEvent, result: action.replay.content });
        return replayMessage(call, action.replay);
      }

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
      const settleUnknown = async (code: RefusalCode) => {
        await settle({ outcome: "unknown" });
        await record({ decision: "failed", ...mutationEvent, code });
      };
      let result: ToolResult;
      try {
        result = await run();
      } catch (error) {
        await settleUnknown("mutation_unknown");
        if (isGraphBubbleUp(error) || signal?.aborted === true) throw error;
        logger.warn("mutation failed; its outcome is unknown", {
          code: "mutation_unknown",
          toolName: call.name,
          toolCallId: call.id,
          mutationKey: identity.mutationKey,
          error,
        });
        return refusal(call, "mutation_unknown");
      }
      const text = resultText(result);
      if (text === undefined) {
        await settleUnknown("unsupported_result");
        return refusal(call, "unsupported_result");
      }
      await settle({ outcome: "complete", result: text });
      await record({ decision: "executed", ...mutationEvent, args: approved.args, result: text.content });
      return result;
    },
  });

  /** Every registered tool, its kind, retry owner and the guardrails that check it. */
  const report = (): { readonly tools: readonly ToolReport[] } => ({
    tools: [...policies].map(([name, policy]) => ({
      name,
      kind: policy.kind,
      retry: { owner: policy.owner, maxAttempts: policy.maxAttempts, idempotent: policy.idempotent },
      guardrails: guardrails
        .filter((guardrail) => guardrail.placements.includes("tool-args") && (guardrail.tools?.includes(name) ?? true))
        .map((guardrail) => guardrail.name),
    })),
  });
  return Object.assign(middleware, { report });
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

/** The argument digest, or undefined for arguments that are not plain JSON. */
function digestOrUndefined(args: unknown): string | undefined {
  try {
    return digest(args);
  } catch {
    return undefined;
  }
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

function unreachable(): never {
  throw new Error("unreachable: a checked call has a policy");
}

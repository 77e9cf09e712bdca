/**
 * `createDocumentGuardrails`: the `createAgent` shell around the decision table of
 * docs/architecture.md. `wrapToolCall` is that table, one stage a line (src/pipeline/); the
 * first refusal wins and reaches the model as an error `ToolMessage`, and every decision is
 * recorded in the audit trail.
 */
import { createMiddleware, type AgentMiddleware, type ToolCallHandler, type ToolCallRequest } from "langchain";
import { z } from "zod";
import { resolveTurn, type ResolvedTurn } from "./admission.js";
import { AuditOptionsSchema, type AuditOptions } from "./audit.js";
import { ToolPolicySchema, type ConfirmClaim, type EffectDiscriminator, type ScopeOf, type ToolKind, type ToolPolicy, type TurnInput } from "./contracts/index.js";
import { ConfigurationError } from "./errors.js";
import { isSealable } from "./execution/parse.js";
import { guardTool } from "./execution/seal.js";
import { checkApprovalsCanPause } from "./guardrails/approval.js";
import { ApprovalFormatSchema } from "./guardrails/langchain-format.js";
import type { Guardrail } from "./guardrails/port.js";
import type { GuardrailLogger } from "./logger.js";
import { GuardrailListSchema, isFunction, LoggerSchema, StoreShape } from "./options.js";
import { contextOf, createGovernance, GovernedCall, type AuthorizeRuntime, type Governance } from "./pipeline/call.js";
import { ToolCoverage, ToolIdentities, type Coverage, type InventoryOptions } from "./pipeline/coverage.js";
import { ToolManifestSchema, type ToolManifest } from "./inventory.js";
import { runMutation, runRead, runSideEffect } from "./pipeline/execute.js";
import { isTwin, markGoverned } from "./one-middleware.js";
import { observeCall } from "./pipeline/observe.js";
import { effectPreflight, mutationPreflight } from "./pipeline/preflight.js";
import { authorizeCall, checkScope, checkStep, guard, parse, type AskedCall } from "./pipeline/stages.js";
import type { AnyGuardrailStore } from "./store/capabilities.js";
import { TelemetrySchema, type GuardrailTelemetry } from "./telemetry.js";
import type { ToolResult } from "./tool-messages.js";
import { TURN_CONTEXT_KEY, TurnGate, userSegment, type AdmittedTurn } from "./turn-gate.js";

/** A tool call as `authorize` sees it: a copy, so changing it changes nothing. */
export interface AuthorizeCall {
  /** The call id the model gave. */
  readonly id: string;
  /** The tool the call is to. */
  readonly name: string;
  /** The arguments as the tool's schema parsed them: what the body will receive. */
  readonly args: unknown;
  /** The tool's kind, from its policy. */
  readonly kind: ToolKind;
}

/** Allows a call only by returning literally `true`. Throwing or any other value refuses it. */
export type Authorize = (call: AuthorizeCall, input: TurnInput, runtime: AuthorizeRuntime) => boolean | Promise<boolean>;

/** `createDocumentGuardrails`' options; validated when the middleware is built. */
export interface DocumentGuardrailsOptions {
  /**
   * The trusted turn, when the middleware is built for one turn. Omit it to build one middleware
   * for the whole server and pass each turn as `agent.invoke(..., { context: turnContext(turn) })`.
   */
  readonly input?: TurnInput;
  /**
   * Where receipts, read evidence, claims, verdicts, approvals and the audit trail live; shared by
   * every worker. The core of the contract is enough for the core rule; guardrails beyond the
   * schema guardrail need its `approvals` part (checked here, at build).
   */
  readonly store: AnyGuardrailStore;
  /** The label of the segment holding the user's message, e.g. `"user"`. */
  readonly userMessageLabel: string;
  /** Your authorization check, asked for every call, replays included. */
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
  /**
   * A span and metrics per governed call: `openTelemetry()` from `arkah-agent-guardrails/otel`.
   * Absent, nothing is observed and nothing is loaded.
   */
  readonly telemetry?: GuardrailTelemetry;
  /**
   * A tool the agent exposes but `tools` does not list: `refuse` (default) refuses each of its
   * calls `unregistered_tool`; `fail` fails the run at its first model call with a
   * `ConfigurationError` naming every such tool.
   */
  readonly unregisteredTools?: "refuse" | "fail";
  /**
   * The approval interrupt's payload and the resume value it takes: `"arkah"` (default, an
   * `ApprovalRequest`, answered `{ decision, approvalId? }`) or `"langchain"`, the format of
   * LangChain's `humanInTheLoopMiddleware` (a `HITLRequest` with one action request and the
   * stored request's `approvalId`, answered by an `HITLResponse` with exactly one decision), so a
   * client that answers LangChain's middleware answers it (Agent Inbox does not: docs/deploying.md).
   */
  readonly approvalFormat?: "arkah" | "langchain";
  /**
   * The reviewed tool manifest (`report().manifest`, checked in) the running tools must match, and
   * what a drift does: `onDrift: "fail"` (default) fails the model call with a `ConfigurationError`
   * listing it; `"refuse"` refuses each drifting tool's calls `tool_changed`.
   */
  readonly inventory?: InventoryOptions;
}

/** What `report()` says about one governed tool. */
export interface ToolReport {
  /** The tool's name, as registered in `tools`. */
  readonly name: string;
  /** The tool's kind, from its policy. */
  readonly kind: ToolKind;
  /** `toolFingerprint` of the tool, once the agent's model was called (undefined before). */
  readonly fingerprint: string | undefined;
  /** Its retry policy with the defaults applied: who retries, how many attempts, whether the write dedupes. */
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
  telemetry: TelemetrySchema.optional(),
  unregisteredTools: z.enum(["refuse", "fail"]).optional(),
  approvalFormat: ApprovalFormatSchema.optional(),
  inventory: z.strictObject({ manifest: ToolManifestSchema, onDrift: z.enum(["fail", "refuse"]).optional() }).optional(),
});

/** A tool's policy with its defaults applied. */
export interface ResolvedPolicy {
  readonly kind: ToolKind;
  readonly scope: ScopeOf | undefined;
  readonly owner: "tool" | "middleware";
  readonly maxAttempts: number;
  readonly delayMs: number;
  readonly idempotent: boolean;
  /** A `side-effect` tool's limit of distinct effects per turn; undefined: none. */
  readonly maxPerTurn: number | undefined;
  /** What tells a `side-effect` tool's identical calls apart; undefined: nothing (they are one effect). */
  readonly discriminator: EffectDiscriminator | undefined;
  /** Each attempt's time limit; undefined: none. */
  readonly timeoutMs: number | undefined;
  /** A `mutation` or `side-effect` tool's `confirm`, if it has one. */
  readonly confirm: ConfirmClaim | undefined;
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
  if (policy.kind === "side-effect" && maxAttempts > 1 && !idempotent) {
    throw new ConfigurationError(
      `tools.${name}.retry: a side effect gets one attempt unless the service it acts on dedupes by effectKey; set idempotent: true or remove maxAttempts`,
    );
  }
  return {
    kind: policy.kind,
    scope: policy.scope,
    owner,
    maxAttempts,
    delayMs,
    idempotent,
    maxPerTurn: policy.maxPerTurn,
    discriminator: policy.discriminator,
    timeoutMs: policy.timeoutMs,
    confirm: policy.confirm,
  };
}

/**
 * Types the agent's invoke `context`. Built for one turn (`input`), the middleware needs nothing
 * in it; built for the whole server, the turn must be there (`turnContext(turn)`), so forgetting
 * it is a type error where LangChain's typing checks `context`. At run time both accept anything
 * and keep the host's own fields: the turn is validated by the middleware, with its own errors.
 */
type TurnContextSchema = z.ZodObject<{ [TURN_CONTEXT_KEY]: z.ZodCustom<TurnInput, TurnInput> }, z.core.$loose>;

/** What `report()` says: every registered tool, and once the agent has run, its coverage. */
export interface GuardrailsReport {
  /** Every tool registered in `tools`. */
  readonly tools: readonly ToolReport[];
  /** Undefined until the agent's model was first called (its request lists the agent's tools). */
  readonly coverage: Coverage | undefined;
  /**
   * The manifest of the governed tools the agent exposed at its model calls (undefined before the
   * first): check it in, and pass the reviewed one as `inventory.manifest`.
   */
  readonly manifest: ToolManifest | undefined;
}

/** The middleware `createDocumentGuardrails` builds, typed by where the turn comes from. */
export type DocumentGuardrails<TContext extends TurnContextSchema | undefined> = AgentMiddleware<
  undefined,
  TContext
> & {
  /** What the middleware governs, for a reviewer or a startup check. */
  report(): GuardrailsReport;
  /** The manifest of these tools (the agent's, as passed to `createAgent`) without running the agent. */
  manifest(tools: readonly unknown[]): ToolManifest;
  /** The `confirm` of the tool registered as `toolName`, if its policy has one (`reconcile --auto` asks it). */
  confirmOf(toolName: string): ConfirmClaim | undefined;
};

/**
 * Builds the document guardrails middleware. Place it first in `middleware` so it wraps every
 * other tool wrapper (and owns retries). `report()` on the result lists what it governs.
 *
 * Throws `ConfigurationError` for invalid options, naming the fix.
 */
export function createDocumentGuardrails(
  options: DocumentGuardrailsOptions & { readonly input: TurnInput },
): DocumentGuardrails<undefined>;
export function createDocumentGuardrails(options: DocumentGuardrailsOptions): DocumentGuardrails<TurnContextSchema>;
export function createDocumentGuardrails(
  options: DocumentGuardrailsOptions,
): DocumentGuardrails<TurnContextSchema> | DocumentGuardrails<undefined> {
  const core = documentCore(options, "createDocumentGuardrails");
  const { options: validated, policies, governance, gate, checkSealable } = core;
  const { guardrails } = governance;
  const coverage = new ToolCoverage(policies.keys(), validated.unregisteredTools, governance.identities);

  const middleware = createMiddleware({
    name: "DocumentGuardrails",

    // 1: admission before every model call, without adding a graph node.
    // Not async: once the turn is verified, nothing here waits, and every step pays for a promise.
    wrapModelCall: (request, handler) => {
      const governed = markGoverned(request, "createDocumentGuardrails"); // one guardrails middleware per agent
      const admitted = gate.admit(request.runtime.context, request.state.messages);
      const proceed = () => {
        coverage.observe(request.tools);
        for (const tool of request.tools) checkSealable(tool);
        checkApprovalsCanPause(guardrails, request.runtime.configurable);
        return handler(governed);
      };
      return admitted instanceof Promise ? admitted.then(proceed) : proceed();
    },

    // The decision table of docs/architecture.md (one core with guardTools' twins).
    wrapToolCall: (request, handler) => core.govern(request, handler),
  });

  /** Every registered tool, its kind, retry owner and the guardrails that check it; the coverage. */
  const report = (): GuardrailsReport => ({
    coverage: coverage.report(),
    manifest: coverage.manifest(),
    tools: [...policies].map(([name, policy]) => ({
      name,
      kind: policy.kind,
      fingerprint: coverage.fingerprint(name),
      retry: { owner: policy.owner, maxAttempts: policy.maxAttempts, idempotent: policy.idempotent },
      guardrails: guardrails
        .filter((guardrail) => guardrail.placements.includes("tool-args") && (guardrail.tools?.includes(name) ?? true))
        .map((guardrail) => guardrail.name),
    })),
  });
  // The overloads above give the context its type. No schema at run time: LangChain would parse
  // the context with it before every model call, and the turn gate validates the turn itself.
  const built = Object.assign(middleware as unknown as DocumentGuardrails<undefined>, {
    report,
    manifest: (agentTools: readonly unknown[]) => coverage.manifestOf(agentTools),
    confirmOf: (toolName: string) => policies.get(toolName)?.confirm,
  });
  labels.set(built, validated.userMessageLabel);
  return built;
}

/** The `userMessageLabel` of every middleware `createDocumentGuardrails` built, so the turn service reads it rather than being told it twice. */
const labels = new WeakMap<object, string>();

/**
 * The `userMessageLabel` of the `createDocumentGuardrails` middleware among `middleware` (an
 * agent's), if it has one: only a middleware this package built counts, whatever its name.
 */
export function documentGuardrailsLabel(middleware: unknown): string | undefined {
  if (!Array.isArray(middleware)) return undefined;
  for (const each of middleware as readonly unknown[]) {
    const label = typeof each === "object" && each !== null ? labels.get(each) : undefined;
    if (label !== undefined) return label;
  }
  return undefined;
}

/** What `createDocumentGuardrails` and `guardTools` share: one enforcement core. */
export interface DocumentCore {
  /** The options as validated. */
  readonly options: z.infer<typeof OptionsSchema>;
  readonly policies: ReadonlyMap<string, ResolvedPolicy>;
  readonly governance: Governance;
  readonly gate: TurnGate;
  /**
   * Fails at once (`ConfigurationError`) for a governed tool the guardrails could not seal, or one
   * that is already a governed twin; a sealable one has its body guarded from now on
   * (src/execution/seal.ts). Tools without a policy are left alone.
   */
  readonly checkSealable: (tool: unknown) => void;
  /**
   * The decision table of docs/architecture.md for one tool call, one stage a line; the first
   * refusal wins. `handler` runs the tool the request names, as LangChain's ToolNode does.
   */
  readonly govern: (request: ToolCallRequest, handler: ToolCallHandler) => Promise<ToolResult>;
}

/** Validates the options and builds the core; throws `ConfigurationError` naming `factory`. */
export function documentCore(options: DocumentGuardrailsOptions, factory: "createDocumentGuardrails" | "guardTools"): DocumentCore {
  const parsed = OptionsSchema.safeParse(options);
  if (!parsed.success) {
    throw new ConfigurationError(`invalid ${factory} options: ${z.prettifyError(parsed.error)}`);
  }
  const { userMessageLabel, authorize, tools, requireResolvedScope = true } = parsed.data;
  const policies = new Map(Object.entries(tools).map(([name, policy]) => [name, resolvePolicy(name, policy)]));
  const kindOf = (toolName: string) => policies.get(toolName)?.kind;
  const identities = new ToolIdentities(
    new Map(Object.entries(tools).flatMap(([name, policy]) => (policy.identity === undefined ? [] : [[name, policy.identity]]))),
    new Map([...policies].map(([name, policy]) => [name, policy.kind])),
    parsed.data.inventory,
  );
  const sideEffects = [...policies.values()].some((policy) => policy.kind === "side-effect");
  // A mutation's confirm settles its claim through the operator's path (`reconcileMutation`).
  const confirmsMutations = [...policies.values()].some((policy) => policy.kind === "mutation" && policy.confirm !== undefined);
  const governance: Governance = { ...createGovernance({ ...parsed.data, sideEffects, confirmsMutations }, factory), identities };
  const { logger, store } = governance; // the logger sanitizes every warning's fields
  const gate = new TurnGate(store ?? unreachable(), userMessageLabel, fixedTurn(parsed.data.input, userMessageLabel, factory));

  const sealable = new WeakSet<object>();
  const checkSealable = (tool: unknown) => {
    if (typeof tool !== "object" || tool === null || sealable.has(tool)) return;
    const { name } = tool as { name?: unknown };
    if (typeof name !== "string" || !policies.has(name)) return;
    if (isTwin(tool)) {
      throw new ConfigurationError(
        `tools.${name}: already a governed twin (guardTools), which checks, claims and audits each call itself; ` +
          "give createDocumentGuardrails' agent (or guardTools) the original tool",
      );
    }
    if (!isSealable(tool)) {
      throw new ConfigurationError(
        `tools.${name}: not a LangChain StructuredTool (what tool() builds) that the guardrails can guard (a frozen or ` +
          "non-extensible tool cannot be), so they cannot seal its calls; build it with tool() and do not freeze it",
      );
    }
    const claimed = policies.get(name)?.kind;
    if (returnsArtifacts(tool) && (claimed === "mutation" || claimed === "side-effect")) {
      // Allowed, because MCP tools (@langchain/mcp-adapters) all declare it and most return text with
      // an empty artifact; a result with a real artifact is refused at run time (src/pipeline/execute.ts).
      logger.warn(
        `a ${claimed} tool declares responseFormat "content_and_artifact": a result whose artifact is not empty is refused unsupported_result and its claim left unknown, since a replay returns text only`,
        { toolName: name },
      );
    }
    guardTool(tool);
    sealable.add(tool);
  };

  // Not async: once the turn is verified nothing before the stages waits, and every call pays for a
  // promise. What throws here (an aborted run, an admission error) rejects the promise all the same.
  const govern = (request: ToolCallRequest, handler: ToolCallHandler): Promise<ToolResult> => {
    try {
      request.runtime.signal?.throwIfAborted(); // an aborted run executes nothing
      const admitted = gate.admit(request.runtime.context, request.state.messages); // 1
      return admitted instanceof Promise ? admitted.then((turn) => decide(request, handler, turn)) : decide(request, handler, admitted);
    } catch (error) {
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- rejects with what was thrown, as an async function would
      return Promise.reject(error);
    }
  };

  const decide = (request: ToolCallRequest, handler: ToolCallHandler, { turn, humanIndex }: AdmittedTurn): Promise<ToolResult> => {
    const { messages } = request.state;
    const name = request.toolCall.name;
    const kind = kindOf(name);
    const callTurn = { scopeId: turn.input.scopeId, turnId: turn.input.turnId, turnKey: turn.turnKey };
    const call = new GovernedCall(governance, request, callTurn, kind);
    const policy = policies.get(name);
    const runtime = { context: contextOf(request.runtime.context), signal: request.runtime.signal };
    const mutation = kind === "mutation" ? { messages, humanIndex, kindOf, requireResolvedScope } : undefined;
    const confirmable = policy?.confirm !== undefined;
    const preflight =
      mutation !== undefined
        ? mutationPreflight(call, mutation, confirmable)
        : kind === "side-effect"
          ? effectPreflight(call, policy?.discriminator, confirmable)
          : undefined;
    const asked = (subject: AskedCall) => authorize({ ...subject, kind: subject.kind ?? unreachable() }, turn.input, runtime);
    return observeCall(call, policy !== undefined, async () => {
      // Stages answer synchronously when they need not wait: no promise on the common path.
      let refused: ToolResult | Promise<ToolResult> | undefined = checkStep(call); // 2-3: unregistered_tool, duplicate_call_id
      if (refused === undefined) {
        const parsed = parse(call); // 4: invalid_arguments
        refused = parsed instanceof Promise ? await parsed : parsed;
      }
      refused ??= checkScope(call, policy?.scope); // 5: out_of_scope
      if (refused === undefined) {
        const authorized = authorizeCall(call, asked); // 6: unauthorized
        refused = authorized instanceof Promise ? await authorized : authorized;
      }
      // 7: the guardrails' codes, approval_rejected; an edit passes 4-7 again; a mutation or a
      // side effect is refused what its claim would certainly refuse before a person is asked
      if (refused === undefined) {
        const guarded = guard(call, asked, policy?.scope, preflight);
        refused = guarded === undefined ? undefined : await guarded;
      }
      if (refused !== undefined) return refused;
      const attempts = policy ?? unreachable();
      if (kind === "side-effect") return runSideEffect(call, handler, attempts, attempts); // 10
      if (mutation === undefined) return runRead(call, handler, attempts, { requireText: true }); // 8
      return runMutation(call, handler, attempts, mutation, attempts.confirm); // 9
    });
  };

  return { options: parsed.data, policies, governance, gate, checkSealable, govern };
}

/** The turn given as `input` (a graph or middleware built for one turn), checked; `ConfigurationError` naming `factory`. */
export function fixedTurn(input: unknown, userMessageLabel: string, factory: string): ResolvedTurn | undefined {
  if (input === undefined) return undefined;
  try {
    const turn = resolveTurn(input);
    userSegment(turn.input, userMessageLabel);
    return turn;
  } catch (error) {
    throw new ConfigurationError(`invalid ${factory} input: ${(error as Error).message}`, {
      cause: error,
    });
  }
}

/** A tool whose results carry an artifact beside their content (LangChain's `responseFormat`). */
function returnsArtifacts(tool: object): boolean {
  return (tool as { responseFormat?: unknown }).responseFormat === "content_and_artifact";
}

function unreachable(): never {
  throw new Error("unreachable: a checked call has a policy");
}

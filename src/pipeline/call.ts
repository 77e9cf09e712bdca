/**
 * One tool call on its way through the pipeline, and what every stage shares: the store, the audit
 * trail, the logger and the guardrails. Stages fill in what they establish (the checked id, the
 * sealable tool, the parsed arguments); each refusal is recorded and answered the same way.
 */
import { randomUUID } from "node:crypto";
import type { ToolMessage } from "@langchain/core/messages";
import type { ToolCallRequest } from "langchain";
import { AuditTrail, type AuditDraft, type AuditOptions } from "../audit.js";
import type { AuditEvent, GuardrailStore, JsonValue, RefusalCode, ToolKind } from "../contracts/index.js";
import { findStep, type StepCall } from "../decision/transcript.js";
import type { ParsedArguments, SealableTool } from "../execution/parse.js";
import type { Approved, CheckedCall } from "../guardrails/evaluate.js";
import type { ApprovalFormat } from "../guardrails/langchain-format.js";
import { resolveGuardrails } from "../guardrails/list.js";
import { governedStore } from "../options.js";
import type { AnyGuardrailStore } from "../store/capabilities.js";
import type { Guardrail } from "../guardrails/port.js";
import { resolveLogger, type GuardrailLogger } from "../logger.js";
import type { ToolIdentities } from "./coverage.js";
import type { GuardrailTelemetry, TelemetryCallObserver, TelemetryStep } from "../telemetry.js";
import { refusal } from "../tool-messages.js";

/** What `authorize` knows of the run besides the call: the host's own invocation context. */
export interface AuthorizeRuntime {
  /** The `context` passed to `agent.invoke` (the host's fields, e.g. the user id), as it is. */
  readonly context: Readonly<Record<string, unknown>>;
  /** Aborted when the run is cancelled. */
  readonly signal: AbortSignal | undefined;
}

/** The host's invocation context as `authorize` gets it: `{}` when there is none. */
export function contextOf(context: unknown): Readonly<Record<string, unknown>> {
  return typeof context === "object" && context !== null ? (context as Readonly<Record<string, unknown>>) : {};
}

/** The turn a call is decided and recorded under. */
export interface CallTurn {
  readonly scopeId: string;
  readonly turnId: string;
  readonly turnKey: string;
}

/** What every stage of one middleware shares. */
export interface Governance {
  readonly store: GuardrailStore | undefined;
  readonly audit: AuditTrail;
  readonly logger: GuardrailLogger;
  readonly guardrails: readonly Guardrail[];
  /** The host's telemetry backend, if any (`telemetry` option). */
  readonly telemetry: GuardrailTelemetry | undefined;
  /** The approval interrupt's payload and resume value (`approvalFormat` option). */
  readonly approvalFormat: ApprovalFormat;
  /** The governed tools' declared identity fields and the reviewed manifest, when there are any. */
  readonly identities?: ToolIdentities | undefined;
}

/** The validated options every guardrails factory turns into its `Governance`. */
export interface GovernanceOptions {
  readonly store?: AnyGuardrailStore | undefined;
  readonly guardrails?: readonly Guardrail[] | undefined;
  readonly audit?: AuditOptions | undefined;
  readonly logger?: GuardrailLogger | undefined;
  readonly telemetry?: GuardrailTelemetry | undefined;
  readonly approvalFormat?: ApprovalFormat | undefined;
  /** A `side-effect` tool is configured: the store needs its `effects` part. */
  readonly sideEffects?: boolean | undefined;
  /** A `mutation` tool has `confirm`: the store needs its `operator` part (`reconcileMutation`). */
  readonly confirmsMutations?: boolean | undefined;
}

/**
 * What every stage shares, with the defaults applied: the schema guardrail first, a logger that
 * sanitizes every warning's fields, the audit trail on the store. Throws `ConfigurationError`,
 * naming `who`, for a guardrail list with two of one name or a store without the parts the
 * configuration needs (src/options.ts `governedStore`).
 */
export function createGovernance(options: GovernanceOptions, who: string): Governance {
  const logger = resolveLogger(options.logger);
  const guardrails = resolveGuardrails(options.guardrails);
  const store = options.store === undefined ? undefined : governedStore(
          options.store,
          { guardrails, audit: options.audit, sideEffects: options.sideEffects === true, confirmsMutations: options.confirmsMutations === true },
          who,
        );
  return {
    store,
    audit: new AuditTrail(store, options.audit ?? {}, logger),
    logger,
    guardrails,
    telemetry: options.telemetry,
    approvalFormat: options.approvalFormat ?? "arkah",
  };
}

/** The arguments a call is decided on: as written (by the model or an approver) and as parsed. */
export type CallArguments = Omit<Extract<ParsedArguments, { readonly ok: true }>, "ok">;

export class GovernedCall {
  readonly governance: Governance;
  readonly request: ToolCallRequest;
  readonly turn: CallTurn;
  /** The tool's kind under the document guardrails; undefined for unregistered tools. */
  readonly kind: ToolKind | undefined;
  /** The tool calls of the model step that proposed this one, as the transcript shows it. */
  readonly step: readonly StepCall[] | undefined;
  /** Set by the step check: the tool and its `toolFingerprint`. */
  tool: SealableTool | undefined;
  fingerprint: string | undefined;
  /** Set by the parse stage; replaced by an approver's edit. */
  arguments: CallArguments | undefined;
  /** Set by the guardrails when a person approved the call: this execution must apply it. */
  approval: Approved | undefined;
  /** Set by the guardrails when nobody was asked because the call's claim can only replay. */
  replayOnly = false;
  /** The telemetry observer of this call, while a backend observes it (src/pipeline/observe.ts). */
  observer: TelemetryCallObserver | undefined;
  /** The audit event recorded last for this call: how it ended, for telemetry. */
  last: AuditEvent | undefined;
  /**
   * This execution of the call (one per time the middleware takes it): on every event recorded for
   * it and on the result it answers (`stampedResult`), so the turn service finds the event that
   * ended it exactly, however many times the call id recurs or the trail is long.
   */
  readonly executionId: string = randomUUID();

  constructor(governance: Governance, request: ToolCallRequest, turn: CallTurn, kind: ToolKind | undefined) {
    this.governance = governance;
    this.request = request;
    this.turn = turn;
    this.kind = kind;
    const { id } = request.toolCall;
    this.step = id === undefined ? undefined : findStep(request.state.messages, id);
  }

  /** Takes the arguments (and approval) an evaluation let through: an approver may have edited them. */
  adopt(pass: CheckedCall, approval: Approved | undefined, replayOnly = false): void {
    const current = this.checked;
    if (pass.argsDigest !== current.argsDigest || pass.rawDigest !== current.rawDigest) {
      this.arguments = { raw: pass.rawArgs, rawDigest: pass.rawDigest, args: pass.args, argsDigest: pass.argsDigest };
    }
    this.approval = approval;
    this.replayOnly = replayOnly;
  }

  get name(): string {
    return this.request.toolCall.name;
  }

  /** The call id as the model wrote it; the step check refuses calls without a valid one. */
  get id(): string {
    return this.request.toolCall.id ?? "";
  }

  get signal(): AbortSignal | undefined {
    return this.request.runtime.signal;
  }

  /** The parsed arguments; only after the parse stage accepted them. */
  get checked(): CallArguments {
    if (this.arguments === undefined) throw new Error("unreachable: the call's arguments were not parsed");
    return this.arguments;
  }

  /** Appends an audit event for this call (the turn, tool, id, kind and argument digest filled in). */
  async record(draft: Omit<AuditDraft, "turnKey" | "scopeId" | "toolName">): Promise<void> {
    this.last = await this.governance.audit.record(this.#draft(draft));
  }

  /**
   * After a store call appended `event` with its decision: delivers it, and notes it as the call's
   * latest. Nothing to wait for (undefined) without an audit sink.
   */
  appended(event: AuditEvent): Promise<void> | undefined {
    const delivering = this.governance.audit.appended(event);
    if (delivering === undefined) {
      this.last = event;
      return undefined;
    }
    return delivering.then(() => {
      this.last = event;
    });
  }

  /** Tells the call's telemetry observer, if any, a step of its way; a backend that throws is logged. */
  note(step: TelemetryStep): void {
    const { observer } = this;
    if (observer === undefined) return;
    try {
      observer.step(step);
    } catch (error) {
      this.governance.logger.warn("telemetry failed", { toolName: this.name, toolCallId: this.id, error });
    }
  }

  /** The audit event for this call, for a store call that appends it with its decision. */
  event(draft: Omit<AuditDraft, "turnKey" | "scopeId" | "toolName">): AuditEvent {
    return this.governance.audit.event(this.#draft(draft));
  }

  #draft(draft: Omit<AuditDraft, "turnKey" | "scopeId" | "toolName">): AuditDraft {
    const id = this.request.toolCall.id;
    return {
      turnKey: this.turn.turnKey,
      scopeId: this.turn.scopeId,
      toolName: this.name,
      executionId: this.executionId,
      ...(id === undefined || id === "" ? {} : { toolCallId: id }),
      ...(this.kind === undefined ? {} : { kind: this.kind }),
      ...(this.fingerprint === undefined ? {} : { toolFingerprint: this.fingerprint }),
      ...(this.arguments === undefined ? {} : { argsDigest: this.arguments.argsDigest }),
      ...draft,
    };
  }

  /** Records the refusal and returns the model's answer for it. */
  async refuse(
    code: RefusalCode,
    details?: Readonly<Record<string, JsonValue>>,
    extra?: Pick<AuditDraft, "guardrail">,
  ): Promise<ToolMessage> {
    await this.record({ decision: code === "read_batch_deferred" ? "deferred" : "refused", code, ...extra });
    return refusal(this.request.toolCall, code, details);
  }
}

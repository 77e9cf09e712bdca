/**
 * The telemetry port: what the guardrails tell an observability backend about each governed tool
 * call. The core never imports a tracing library; `arkah-agent-guardrails/otel` implements this
 * port with `@opentelemetry/api` (an optional peer), and a host may implement it for another one.
 */
import { z } from "zod";
import type { ApprovalDecision, AuditEvent, ClaimStatus, EffectClaimResult, ToolKind, TurnState } from "./contracts/index.js";
import type { LoggedError } from "./logger.js";

/** The call a telemetry backend is told about when it starts: names, ids and digests, never values. */
export interface TelemetryCall {
  /** The tool name as the model wrote it (bounded only when `governed`). */
  readonly toolName: string;
  /** The call id as the model wrote it, when it has one. */
  readonly toolCallId: string | undefined;
  /** The tool's kind under `createDocumentGuardrails`; undefined for `createToolGuardrails` and unregistered tools. */
  readonly kind: ToolKind | undefined;
  /** `turnKey` of the turn the call is decided under (a digest). */
  readonly turnKey: string;
  /** The tool is registered with the middleware: its name is one of the host's, not free model output. */
  readonly governed: boolean;
}

/**
 * Which claim a step is about: a mutation's (`mutationKey`) or a `side-effect` call's
 * (`effectKey`); exactly one of the two.
 */
export type TelemetryClaimKey =
  | { readonly mutationKey: string; readonly effectKey?: undefined }
  | { readonly effectKey: string; readonly mutationKey?: undefined };

/** What happens to a mutation's or a side effect's claim on the way, in order. */
export type TelemetryStep =
  /** The store answered the claim (a side effect's may also answer `limit_reached`). */
  | ({ readonly type: "claim"; readonly status: ClaimStatus | EffectClaimResult["status"] } & TelemetryClaimKey)
  /**
   * The claim was settled `complete` or `unknown`, or `released` (the body provably never started,
   * or asserted no effect). `applied` is false when the store no longer held the claim under this
   * call's token.
   */
  | ({
      readonly type: "settle";
      readonly outcome: "complete" | "unknown" | "released";
      readonly applied: boolean;
    } & TelemetryClaimKey)
  /** A completed mutation's or side effect's stored result was returned without running the tool. */
  | ({ readonly type: "replay" } & TelemetryClaimKey)
  /** The tool threw `RetryableToolError` and its retry policy runs it again. */
  | { readonly type: "retry"; readonly attempt: number };

/**
 * How a governed call ended.
 *
 * `decision` is the audit decision recorded last for the call (`executed`, `replayed`, `refused`,
 * `deferred`, `failed`), or, when the wrapper did not answer: `approval_wait` (paused for a person),
 * `interrupted` (another LangGraph interrupt), `error` (the run fails with `errorType`).
 */
export interface TelemetryCallEnd {
  /** How the call ended (see above). */
  readonly decision: AuditEvent["decision"] | "approval_wait" | "interrupted" | "error";
  /** The code recorded with the decision: a refusal code, a guardrail's code, `retried`, `seal_broken`. */
  readonly code: string | undefined;
  /** The refusal code the model was answered with, when its answer is a refusal. */
  readonly refusal: string | undefined;
  /** The guardrail that decided a denial. */
  readonly guardrail: string | undefined;
  /** `mutationKey` of a mutation once it was claimed (a digest). */
  readonly mutationKey: string | undefined;
  /** `effectKey` of a side effect once it was claimed (a digest). */
  readonly effectKey?: string | undefined;
  /** The class name of the error that fails the run (`SealError`, `SettlementError`, ...), when one does. */
  readonly errorType: string | undefined;
  /** The call's arguments (parsed when they parsed, else as the model wrote them): only with `includeValues`. */
  readonly args?: unknown;
  /** The text the call was answered with: only with `includeValues`. */
  readonly result?: string;
}

/** Receives one governed call's steps, then its end, exactly once. */
export interface TelemetryCallObserver {
  /** A step of a mutation's or side effect's way (claim, settlement, replay) or a retry, as it happens. */
  step(step: TelemetryStep): void;
  /** How the call ended; nothing follows it. */
  end(end: TelemetryCallEnd): void;
}

/**
 * A telemetry backend for `createDocumentGuardrails` and `createToolGuardrails` (`telemetry`).
 * `openTelemetry()` from `arkah-agent-guardrails/otel` is the shipped one.
 *
 * A backend that throws is logged and ignored: telemetry never changes a decision.
 */
export interface GuardrailTelemetry {
  /** Put argument values and results in `end`. Default false: the backend never receives them. */
  readonly includeValues?: boolean;
  /**
   * Runs one governed call. The backend calls `run` once, with the observer for this call, and
   * returns what it returns (it may run it inside its own context, so spans the tool opens are
   * children of the call's).
   */
  observeCall<T>(call: TelemetryCall, run: (observer: TelemetryCallObserver) => Promise<T>): Promise<T>;
  /**
   * Runs one operation of the turn service (`createTurnService({ telemetry })`): a `submit` or a
   * `decide`. As for `observeCall`: call `run` once and return what it returns, inside your own
   * context, so the spans of the tool calls the run makes are the operation's children. Optional:
   * a backend without it traces tool calls only.
   */
  observeTurn?<T>(turn: TelemetryTurn, run: (observer: TelemetryTurnObserver) => Promise<T>): Promise<T>;
}

/** The turn-service operation a backend is told about when it starts. */
export interface TelemetryTurn {
  /** `submit` (run or replay a turn) or `decide` (decide an approval request, and resume the turn once its pause is answered). */
  readonly operation: "submit" | "decide";
}

/** One approval request's wait, told when the turn service resumes a run with its decision. */
export interface TelemetryApprovalWait {
  /** The tool the person was asked about (a registered tool: approval requests are made only for those). */
  readonly toolName: string;
  /** The decision the run resumes with, or `expired` (resumed as a rejection). */
  readonly decision: ApprovalDecision["decision"] | "expired";
  /** From the request's `requestedAt` to its `decidedAt` (or `expiredAt`), in milliseconds; never negative. */
  readonly waitMs: number;
}

/**
 * How a turn operation ended: identifiers, a status and codes, never the user's text, the model's
 * answer or argument values.
 */
export interface TelemetryTurnEnd {
  /** `turnKey` of the turn (a digest), once known: absent for invalid input or an unknown approval request. */
  readonly turnKey: string | undefined;
  /**
   * The answer's `status` (`completed`, `awaiting_approval`, `refused`, `failed`, `running`; for
   * `decide` also `not_found`, `forbidden`, `not_pending`), or `error` when the operation threw.
   */
  readonly status: string;
  /** The answer's code: a refusal's (`denied`, `input_mismatch`) or a failure's (`run_failed`, ...). */
  readonly code: string | undefined;
  /** The stored outcome was answered and nothing ran (a retry of a finished or paused turn). */
  readonly replayed: boolean;
  /** The turn's state as the operation left it, when the service knows it. */
  readonly state: TurnState | undefined;
  /**
   * The class name of the error the operation threw (`TurnServiceError`, a store's error), or that
   * failed its run (the answer is `failed`).
   */
  readonly errorType: string | undefined;
  /**
   * That error as the logger gets it (class, code, a message only when this package wrote it, the
   * causes): for the span's exception event. Never argument values or tool results.
   */
  readonly exception?: LoggedError;
}

/** Receives one turn operation's approval waits, then its end, exactly once. */
export interface TelemetryTurnObserver {
  /** An approval request's decision is resumed with: how long the person took. */
  approvalWait(wait: TelemetryApprovalWait): void;
  /** How the operation ended; nothing follows it. */
  end(end: TelemetryTurnEnd): void;
}

export const TelemetrySchema = z.custom<GuardrailTelemetry>(
  (value) =>
    typeof value === "object" &&
    value !== null &&
    typeof (value as Partial<GuardrailTelemetry>).observeCall === "function" &&
    ["undefined", "boolean"].includes(typeof (value as Partial<GuardrailTelemetry>).includeValues) &&
    ["undefined", "function"].includes(typeof (value as Partial<GuardrailTelemetry>).observeTurn),
  "telemetry must implement GuardrailTelemetry (observeCall), e.g. openTelemetry() from arkah-agent-guardrails/otel",
);

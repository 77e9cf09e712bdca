/**
 * The telemetry port: what the guardrails tell an observability backend about each governed tool
 * call. The core never imports a tracing library; `arkah-agent-guardrails/otel` implements this
 * port with `@opentelemetry/api` (an optional peer), and a host may implement it for another one.
 */
import { z } from "zod";
import type { AuditEvent, ClaimStatus, ToolKind } from "./contracts.js";

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

/** What happens to a mutation's claim on the way, in order. */
export type TelemetryStep =
  /** The store answered the mutation's atomic claim. */
  | { readonly type: "claim"; readonly status: ClaimStatus; readonly mutationKey: string }
  /**
   * The claim was settled `complete` or `unknown`, or `released` (the body provably never started).
   * `applied` is false when the store no longer held the claim under this call's token.
   */
  | {
      readonly type: "settle";
      readonly outcome: "complete" | "unknown" | "released";
      readonly applied: boolean;
      readonly mutationKey: string;
    }
  /** A completed mutation's stored result was returned without running the tool. */
  | { readonly type: "replay"; readonly mutationKey: string }
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
  /** The class name of the error that fails the run (`SealError`, `SettlementError`, ...), when one does. */
  readonly errorType: string | undefined;
  /** The call's arguments (parsed when they parsed, else as the model wrote them): only with `includeValues`. */
  readonly args?: unknown;
  /** The text the call was answered with: only with `includeValues`. */
  readonly result?: string;
}

/** Receives one governed call's steps, then its end, exactly once. */
export interface TelemetryCallObserver {
  /** A step of a mutation's way (claim, settlement, replay) or a retry, as it happens. */
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
}

export const TelemetrySchema = z.custom<GuardrailTelemetry>(
  (value) =>
    typeof value === "object" &&
    value !== null &&
    typeof (value as Partial<GuardrailTelemetry>).observeCall === "function" &&
    ["undefined", "boolean"].includes(typeof (value as Partial<GuardrailTelemetry>).includeValues),
  "telemetry must implement GuardrailTelemetry (observeCall), e.g. openTelemetry() from arkah-agent-guardrails/otel",
);

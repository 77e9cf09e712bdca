/**
 * The audit trail: one event per decision, appended to the store and handed to the host's sink.
 * Argument values and tool results stay out of events unless the host opts in.
 */
import { z } from "zod";
import type { AuditEvent, GuardrailStore, JsonValue } from "./contracts.js";
import type { GuardrailLogger } from "./logger.js";

export interface AuditOptions {
  /** Receives every event once the store has it. A sink that throws is logged, never fatal. */
  readonly sink?: (event: AuditEvent) => void | Promise<void>;
  /** Put argument values and tool results in events. Default false. */
  readonly includeValues?: boolean;
}

export const AuditOptionsSchema = z.strictObject({
  sink: z.custom<NonNullable<AuditOptions["sink"]>>((value) => typeof value === "function").optional(),
  includeValues: z.boolean().optional(),
});

/** An event as the pipeline reports it; the trail adds the time and drops values unless opted in. */
export type AuditDraft = Omit<AuditEvent, "at" | "args" | "result"> & {
  readonly args?: unknown;
  readonly result?: string;
};

export class AuditTrail {
  readonly #store: GuardrailStore | undefined;
  readonly #options: AuditOptions;
  readonly #logger: GuardrailLogger;

  constructor(store: GuardrailStore | undefined, options: AuditOptions, logger: GuardrailLogger) {
    this.#store = store;
    this.#options = options;
    this.#logger = logger;
  }

  /** Appends the event to the store (a store failure propagates) and then to the sink. */
  async record(draft: AuditDraft): Promise<void> {
    const { args, result, ...fields } = draft;
    const event: AuditEvent = { at: new Date().toISOString(), ...fields };
    if (this.#options.includeValues === true) {
      if (args !== undefined) event.args = args as JsonValue;
      if (result !== undefined) event.result = result;
    }
    await this.#store?.appendAudit(event);
    const { sink } = this.#options;
    if (sink === undefined) return;
    try {
      await sink(event);
    } catch (error) {
      this.#logger.warn("audit sink failed", { decision: event.decision, toolCallId: event.toolCallId, error });
    }
  }
}

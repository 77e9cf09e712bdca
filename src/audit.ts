/**
 * The audit trail: one event per decision, appended to the store, and delivered to the host's sink
 * from the store, in `seq` order, at least once: a durable cursor per sink name says how far it has
 * been delivered. Argument values and tool results stay out of events unless the host opts in.
 */
import { z } from "zod";
import {
  AuditCursorSchema,
  AuditSinkNameSchema,
  StoredAuditEventSchema,
  type AuditEvent,
  type GuardrailStore,
  type JsonValue,
  type StoredAuditEvent,
} from "./contracts/index.js";
import { ConfigurationError, StoreContractError } from "./errors.js";
import type { GuardrailLogger } from "./logger.js";
import { StoreShape } from "./options.js";
import { requireStoreParts, type AnyGuardrailStore } from "./store/capabilities.js";
import { parseStoreValue, StoreBooleanSchema } from "./store/validate.js";

/**
 * What an audit sink receives: with a store, each event as the store numbered it (`seq`); without
 * one (`createToolGuardrails` with no `store`), the event alone.
 */
export type AuditSinkEvent = AuditEvent & { readonly seq?: number };

/** The `audit` option: where the audit trail goes, and whether it carries values. */
export interface AuditOptions {
  /**
   * Receives the store's audit trail, in `seq` order, at least once: after each event the
   * middleware appends, the events its cursor has not passed yet are delivered, and a sink that
   * throws gets the event again on the next delivery (logged, never fatal). Without a store, it
   * gets each event once, best effort.
   */
  readonly sink?: (event: AuditSinkEvent) => void | Promise<void>;
  /** Names the sink's delivery cursor in the store. Default `"default"`. */
  readonly sinkName?: string;
  /** Put argument values and tool results in events. Default false. */
  readonly includeValues?: boolean;
}

export const AuditOptionsSchema = z.strictObject({
  sink: z.custom<NonNullable<AuditOptions["sink"]>>((value) => typeof value === "function").optional(),
  sinkName: AuditSinkNameSchema.optional(),
  includeValues: z.boolean().optional(),
});

/** The cursor name a trail delivers under when `sinkName` is not given. */
export const DEFAULT_SINK_NAME = "default";

// ---------------------------------------------------------------------------------------------
// Delivery

/** `deliverAudit`'s options. */
export interface DeliverAuditOptions {
  /** The store whose audit trail is delivered, and which keeps the sink's cursor: it needs the `auditDelivery` part. */
  readonly store: AnyGuardrailStore;
  /** Receives each event, in `seq` order. A sink that throws stops the delivery at that event. */
  readonly sink: (event: StoredAuditEvent) => void | Promise<void>;
  /** The cursor's name: one per destination (a SIEM, a log shipper). */
  readonly sinkName: string;
  /**
   * Deliver the events after this `seq` instead of after the cursor: a replay. The cursor still
   * only moves forward, so replaying events it has passed leaves it where it is.
   */
  readonly afterSeq?: number;
  /** Deliver at most this many events. Default: every event there is. */
  readonly limit?: number;
}

/** How a delivery went. */
export interface AuditDelivery {
  /** Events the sink accepted, in this delivery. */
  readonly delivered: number;
  /** The `seq` of the last event the sink accepted, or where the delivery started if none. */
  readonly lastSeq: number;
  /** What the sink threw: delivery stopped at that event, the one after `lastSeq`, which the next delivery sends again. */
  readonly error?: unknown;
}

const DeliverAuditOptionsSchema = z.strictObject({
  store: StoreShape,
  sink: z.custom<DeliverAuditOptions["sink"]>((value) => typeof value === "function", "sink must be a function"),
  sinkName: AuditSinkNameSchema,
  afterSeq: z.int().min(0).optional(),
  limit: z.int().min(1).optional(),
});

/** Events read from the store per page. */
const PAGE = 1000;

const StoredEventsSchema = z.array(StoredAuditEventSchema);

/**
 * Delivers the audit trail to `sink` from where its cursor `sinkName` stands (or after `afterSeq`),
 * one event at a time in `seq` order, moving the cursor forward after each event the sink accepts.
 * A sink that throws stops the delivery there: the error is returned (not thrown), the cursor stays
 * at the last event delivered, and the next delivery sends the missed events again, in order. So
 * delivery is at least once: an event can reach the sink twice (the cursor could not be moved
 * after the sink took it, or two deliveries for one sink name ran at the same time), never zero
 * times. When another delivery for the same sink name moved the cursor past the event just
 * delivered, this one goes on after that cursor instead of sending those events again.
 *
 * Rejects with `ConfigurationError` for invalid options (a store without the `auditDelivery` part among them), and with the store's error when the store
 * fails (the cursor is where the last successful advance left it).
 */
export async function deliverAudit(options: DeliverAuditOptions): Promise<AuditDelivery> {
  const parsed = DeliverAuditOptionsSchema.safeParse(options);
  if (!parsed.success) throw new ConfigurationError(`invalid deliverAudit options: ${z.prettifyError(parsed.error)}`);
  const { store, sink, sinkName, afterSeq, limit = Number.POSITIVE_INFINITY } = parsed.data;
  requireStoreParts(store, ["auditDelivery"], "deliverAudit", "deliverAudit needs (the sink's cursor is kept in the store)");
  const cursor = async () =>
    parseStoreValue(AuditCursorSchema, await store.getAuditCursor(sinkName), "getAuditCursor answer");
  const replay = afterSeq !== undefined;
  let position = afterSeq ?? (await cursor());
  let lastSeq = position;
  let delivered = 0;
  for (;;) {
    const page = parseStoreValue(
      StoredEventsSchema,
      await store.readAudit({ afterSeq: position, limit: Math.min(PAGE, limit - delivered) }),
      "readAudit answer",
    );
    if (page.length === 0) break;
    for (const event of page) {
      if (event.seq <= position) {
        throw new StoreContractError(`readAudit answered event ${String(event.seq)} to a query for events after ${String(position)}`);
      }
      try {
        await sink(event);
      } catch (error) {
        return { delivered, lastSeq, error };
      }
      delivered++;
      lastSeq = event.seq;
      position = event.seq;
      const moved = parseStoreValue(
        StoreBooleanSchema,
        await store.advanceAuditCursor({ sink: sinkName, seq: event.seq }),
        "advanceAuditCursor answer",
      );
      if (!moved && !replay) {
        // Another delivery for this sink name is ahead: go on from its cursor.
        const ahead = await cursor();
        if (ahead > position) {
          position = ahead;
          break;
        }
      }
      if (delivered >= limit) return { delivered, lastSeq };
    }
  }
  return { delivered, lastSeq };
}

// ---------------------------------------------------------------------------------------------
// The middleware's trail

/** An event as the pipeline reports it; the trail adds the time and drops values unless opted in. */
export type AuditDraft = Omit<AuditEvent, "at" | "args" | "result"> & {
  readonly args?: unknown;
  readonly result?: string;
};

export class AuditTrail {
  readonly #store: GuardrailStore | undefined;
  readonly #options: AuditOptions;
  readonly #logger: GuardrailLogger;
  readonly #sinkName: string;
  /** The last delivery scheduled: deliveries of one trail run one after the other. */
  #tail: Promise<void> = Promise.resolve();
  /** A delivery scheduled that has not started: it will deliver every event appended before it starts. */
  #queued: Promise<void> | undefined;

  constructor(store: GuardrailStore | undefined, options: AuditOptions, logger: GuardrailLogger) {
    this.#store = store;
    this.#options = options;
    this.#logger = logger;
    this.#sinkName = options.sinkName ?? DEFAULT_SINK_NAME;
  }

  /**
   * Appends the event to the store (a store failure propagates), then delivers the trail to the
   * sink from its cursor; a delivery that fails is logged, never thrown. Without a store, the
   * sink gets the event directly. Answers the event as recorded.
   */
  async record(draft: AuditDraft): Promise<AuditEvent> {
    const event = this.event(draft);
    await this.#store?.appendAudit(event);
    await this.appended(event);
    return event;
  }

  /** The event for a draft: stamped now, values only if the host opted in. */
  event(draft: AuditDraft): AuditEvent {
    const at = new Date().toISOString();
    // Most drafts carry no values: one copy of them, no rest pattern (which costs a call of its own).
    if (draft.args === undefined && draft.result === undefined) return { at, ...draft } as AuditEvent;
    const { args, result, ...fields } = draft;
    const event: AuditEvent = { at, ...fields };
    if (this.#options.includeValues === true) {
      if (args !== undefined) event.args = args as JsonValue;
      if (result !== undefined) event.result = result;
    }
    return event;
  }

  /**
   * After a store call appended `event` (with the decision it records, in one transaction):
   * delivers the trail to the sink from its cursor, or, without a store, hands it the event.
   * Nothing to wait for (undefined) without a sink.
   */
  appended(event: AuditEvent): Promise<void> | undefined {
    const { sink } = this.#options;
    if (sink === undefined) return undefined;
    return this.#store === undefined ? this.#direct(sink, event) : this.#deliver(this.#store, sink);
  }

  async #direct(sink: NonNullable<AuditOptions["sink"]>, event: AuditEvent): Promise<void> {
    try {
      await sink(event);
    } catch (error) {
      this.#logger.warn("audit sink failed", { decision: event.decision, toolCallId: event.toolCallId, error });
    }
  }

  /**
   * Schedules a delivery after the one running, or joins one scheduled and not started yet: that
   * one reads the store when it starts, after this event was appended.
   */
  #deliver(store: GuardrailStore, sink: NonNullable<AuditOptions["sink"]>): Promise<void> {
    if (this.#queued !== undefined) return this.#queued;
    const run = this.#tail.then(async () => {
      this.#queued = undefined;
      await this.#deliverOnce(store, sink);
    });
    this.#queued = run;
    this.#tail = run;
    return run;
  }

  async #deliverOnce(store: GuardrailStore, sink: NonNullable<AuditOptions["sink"]>): Promise<void> {
    const sinkName = this.#sinkName;
    try {
      const delivery = await deliverAudit({ store, sink, sinkName });
      if (delivery.error !== undefined) {
        this.#logger.warn("audit sink failed", { sinkName, afterSeq: delivery.lastSeq, error: delivery.error });
      }
    } catch (error) {
      this.#logger.warn("audit delivery failed", { sinkName, error });
    }
  }
}

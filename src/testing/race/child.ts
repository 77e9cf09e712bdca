/**
 * The child process of `raceGuardrailStore`: opens the adapter author's store from their module
 * (named `openStore`, else the default export, called with the run's JSON options) and runs the
 * parent's requests against it, each answered by id. Ships in the package (dist/testing/race-child.js).
 */
import { pathToFileURL } from "node:url";
import { isAbsolute } from "node:path";
import { detectStoreParts, hasStorePart, type AnyGuardrailStore, type StorePart, type StoreWithParts } from "../../store/capabilities.js";
import { RACE_TIME, raceApproval, type RaceAnswer, type RaceMessage, type RaceRequest, type RaceValue } from "./protocol.js";

type Opener = (options: unknown) => unknown;

let store: AnyGuardrailStore | undefined;

const send = (answer: RaceAnswer) => {
  process.send?.(answer);
};

async function open(storeModule: string, options: unknown): Promise<RaceValue> {
  const specifier = isAbsolute(storeModule) ? pathToFileURL(storeModule).href : storeModule;
  const module = (await import(specifier)) as { openStore?: unknown; default?: unknown };
  const opener = typeof module.openStore === "function" ? module.openStore : module.default;
  if (typeof opener !== "function") {
    throw new Error(`${storeModule} exports neither a function openStore nor a default function that opens the store`);
  }
  const opened: unknown = await (opener as Opener)(options);
  const found = detectStoreParts(opened);
  if (found.missingCore.length > 0) {
    throw new Error(`what ${storeModule} opened is not a GuardrailStore: it lacks ${found.missingCore.join(", ")}`);
  }
  store = opened as AnyGuardrailStore;
  return { type: "opened", parts: found.parts };
}

const opened = (): AnyGuardrailStore => {
  if (store === undefined) throw new Error("the store is not open");
  return store;
};
/** The store, as having `part` (the parent asks only for the parts the child detected). */
const withPart = <P extends StorePart>(part: P): StoreWithParts<P> => {
  const current = opened();
  if (!hasStorePart(current, part)) throw new Error(`the store lacks the part ${part}`);
  return current;
};

async function handle(request: RaceRequest): Promise<RaceValue> {
  switch (request.type) {
    case "open":
      return open(request.storeModule, request.options);
    case "claim":
      return { type: "claimed", result: await opened().claimMutation(request.identity) };
    case "settle":
      return {
        type: "settled",
        applied: await opened().settleMutation({
          turnKey: request.turnKey,
          token: request.token,
          outcome: "complete",
          result: { content: request.content, status: "success" },
        }),
      };
    case "append":
      // One after another: each process's own appends must come back in this order.
      for (const event of request.events) await opened().appendAudit(event);
      return { type: "appended" };
    case "read-audit": {
      const events: { seq: number; toolCallId?: string }[] = [];
      for (;;) {
        const last = events.at(-1)?.seq ?? 0;
        const page = await opened().readAudit({ scopeId: request.scopeId, afterSeq: last, limit: 1000 });
        for (const event of page) events.push({ seq: event.seq, ...(event.toolCallId === undefined ? {} : { toolCallId: event.toolCallId }) });
        if (page.length < 1000) return { type: "audit", events };
      }
    }
    case "request-approval":
      await withPart("approvals").requestApproval(raceApproval(request.runId, request.round));
      return { type: "requested" };
    case "decide":
      return {
        type: "decided",
        result: await withPart("approvals").decideApproval({
          approvalId: request.approvalId,
          decision: request.approve ? { decision: "approve" } : { decision: "reject", message: "race" },
          operatorRef: request.operatorRef,
          decidedAt: RACE_TIME,
        }),
      };
    case "begin-turn":
      return { type: "begun", result: await withPart("turns").beginTurn({ turn: request.turn, leaseMs: 600_000 }) };
    case "claim-effect": {
      const effects = withPart("effects");
      return {
        type: "effect-claimed",
        result: request.maxPerTurn === undefined ? await effects.claimEffect(request.identity) : await effects.claimEffect(request.identity, { maxPerTurn: request.maxPerTurn }),
      };
    }
  }
}

async function exit(): Promise<void> {
  const closing = store as { close?: () => unknown } | undefined;
  try {
    if (typeof closing?.close === "function") await closing.close();
  } finally {
    process.disconnect();
  }
}

process.on("message", (message: RaceMessage) => {
  if ("type" in message) {
    void exit();
    return;
  }
  handle(message.request).then(
    (value) => {
      send({ id: message.id, ok: true, value });
    },
    (error: unknown) => {
      send({ id: message.id, ok: false, error: error instanceof Error ? `${error.name}: ${error.message}` : String(error) });
    },
  );
});

// Listening: the parent may send.
process.send?.({ type: "ready" });

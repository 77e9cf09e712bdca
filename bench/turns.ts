/**
 * What a replayed turn costs against a run one, through `createTurnService` (issue 21): the same
 * read-then-write turn, submitted once (admission, model, read, claim, write, settle, the turn
 * record) and submitted again after it finished (the stored outcome, nothing called).
 *
 * Baseline: `submit` of fresh turns. Subject: `submit` of the same turns again. Both on one
 * compiled agent with a `MemorySaver` and the in-memory store, the service built before the timed
 * region. Also reported, untimed: the store calls each kind of submit makes (a counting proxy), the
 * round trips a durable store would make.
 */
import { randomUUID } from "node:crypto";
import { MemorySaver } from "@langchain/langgraph";
import { createAgent } from "langchain";
import {
  createDocumentGuardrails,
  createTurnService,
  InMemoryGuardrailStore,
  type GuardrailStore,
  type TurnInput,
} from "arkah-agent-guardrails";
import { ScriptedModel } from "arkah-agent-guardrails/testing";
import { readWriteScript, TOOLS, USER_MESSAGE } from "./agent.js";
import { interleave, log, measure, per, roundOptions, type Interleaved, type RoundOptions } from "./harness.js";

export interface ReplayOptions extends RoundOptions {
  /** Turns per timed sample. */
  readonly turnsPerSample: number;
}

export interface ReplayResult extends Interleaved {
  /** Store calls of one first submit and of one replayed submit, by method. */
  readonly storeCalls: { readonly run: ReadonlyMap<string, number>; readonly replay: ReadonlyMap<string, number> };
}

function turnInput(): TurnInput {
  return {
    scopeId: "doc-1",
    turnId: randomUUID(),
    policyVersion: "bench-1",
    principal: "bench-user",
    segments: [{ label: "user", content: USER_MESSAGE }],
  };
}

/** A turn service over `store`, on an agent whose model plays `turns` read-then-write turns in order. */
function buildService(store: GuardrailStore, turns: number) {
  const script = Array.from({ length: turns }, (_, turn) => readWriteScript(turn)).flat();
  const guardrails = createDocumentGuardrails({
    store,
    userMessageLabel: "user",
    authorize: (_call, turn) => turn.scopeId === "doc-1",
    tools: { read_document: { kind: "document-read" }, rename_document: { kind: "mutation" } },
  });
  const agent = createAgent({ model: new ScriptedModel(script), tools: TOOLS, middleware: [guardrails], checkpointer: new MemorySaver() });
  return createTurnService({ agent, store, moderate: () => true, allowInMemoryCheckpointer: true });
}

type Service = ReturnType<typeof buildService>;

async function submitAll(service: Service, inputs: readonly TurnInput[], replayed: boolean): Promise<void> {
  for (const turn of inputs) {
    const answer = await service.submit({ turn });
    // A refused or failed turn would fake a speed-up.
    if (answer.status !== "completed" || answer.replayed !== replayed) {
      throw new Error(`bench: expected a ${replayed ? "replayed" : "run"} completed turn, got ${answer.status} (replayed ${String("replayed" in answer && answer.replayed)})`);
    }
  }
}

/** Forwards every method of `store` and counts its calls by name. */
function countingStore(store: GuardrailStore, calls: Map<string, number>): GuardrailStore {
  return new Proxy(store, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== "function") return value;
      return (...args: unknown[]): unknown => {
        calls.set(String(property), (calls.get(String(property)) ?? 0) + 1);
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

/** The store calls of one first submit and of its replay. */
async function countStoreCalls(): Promise<ReplayResult["storeCalls"]> {
  const counted = new Map<string, number>();
  const service = buildService(countingStore(new InMemoryGuardrailStore(), counted), 1);
  const input = turnInput();
  await submitAll(service, [input], false);
  const run = new Map(counted);
  counted.clear();
  await submitAll(service, [input], true);
  return { run, replay: new Map(counted) };
}

export async function benchReplayedTurn(options: ReplayOptions): Promise<ReplayResult> {
  const turns = options.turnsPerSample;
  const run = async () => {
    const service = buildService(new InMemoryGuardrailStore(), turns);
    const inputs = Array.from({ length: turns }, turnInput);
    return per(await measure(() => submitAll(service, inputs, false)), turns);
  };
  const replay = async () => {
    const service = buildService(new InMemoryGuardrailStore(), turns);
    const inputs = Array.from({ length: turns }, turnInput);
    await submitAll(service, inputs, false); // untimed: the turns finish first
    return per(await measure(() => submitAll(service, inputs, true)), turns);
  };
  const result = await interleave({
    ...roundOptions(options),
    baseline: run,
    subject: replay,
    onRound: (round) => {
      if ((round + 1) % 10 === 0) log(`  replayed turn: round ${String(round + 1)}/${String(options.rounds)}`);
    },
  });
  return { ...result, storeCalls: await countStoreCalls() };
}

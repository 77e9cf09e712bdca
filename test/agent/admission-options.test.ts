/**
 * admitTurn and assertAdmitted at their edges: the options they accept, what each failure says,
 * a store that answers a receipt for another turn, and the bounded cache of verified receipts.
 * Most of these were surviving mutants of src/admission.ts (docs/reliability.md, "Mutation score").
 */
import { HumanMessage } from "@langchain/core/messages";
import { describe, expect, it } from "vitest";
import {
  admitTurn,
  AdmissionError,
  assertAdmitted,
  InMemoryGuardrailStore,
  StoreContractError,
  turnKey,
  type AdmissionErrorCode,
  type AdmissionReceipt,
  type GuardrailStore,
  type Moderate,
  type TurnInput,
} from "arkah-agent-guardrails";
import { admit, guardedAgent, outcomeOf, read, rejection, rename, turnInput, userText } from "../support/fixtures.js";

async function expectAdmissionError(promise: Promise<unknown>, code: AdmissionErrorCode, message: RegExp) {
  const error = AdmissionError.find(await rejection(promise));
  expect(error?.code).toBe(code);
  expect(error?.message).toMatch(message);
}

/** The in-memory store, counting `getReceipt` calls. */
function countingStore() {
  const store = new InMemoryGuardrailStore();
  const counter = { reads: 0 };
  const getReceipt = store.getReceipt.bind(store);
  store.getReceipt = (key) => {
    counter.reads += 1;
    return getReceipt(key);
  };
  return { store, counter };
}

describe("admitTurn's options", () => {
  const input = turnInput();
  const methods = { getReceipt: async () => undefined, putReceiptIfAbsent: async () => undefined };
  const notStores: [string, unknown][] = [
    ["null", null],
    ["a string", "store"],
    ["an object without putReceiptIfAbsent", { getReceipt: methods.getReceipt }],
    ["an object without getReceipt", { putReceiptIfAbsent: methods.putReceiptIfAbsent }],
    ["an object whose getReceipt is not a function", { ...methods, getReceipt: "yes" }],
    ["a function carrying both methods", Object.assign(() => undefined, methods)],
  ];

  it.each(notStores)("a store that is %s: invalid_input naming the store, and moderation is not asked", async (_name, store) => {
    let asked = 0;
    await expectAdmissionError(
      admitTurn({ store: store as GuardrailStore, input, moderate: () => ++asked > 0 }),
      "invalid_input",
      /^invalid admitTurn options: .*store must implement GuardrailStore/s,
    );
    expect(asked).toBe(0);
  });

  it("moderate that is not a function: invalid_input saying so", async () => {
    await expectAdmissionError(
      admitTurn({ store: new InMemoryGuardrailStore(), input, moderate: true as unknown as Moderate }),
      "invalid_input",
      /moderate must be a function/,
    );
  });

  it.each<[string, Record<string, unknown>]>([
    ["a signal that is not an AbortSignal", { signal: { aborted: false } }],
    ["a clock that is not a function", { now: new Date() }],
  ])("%s: invalid_input, nothing stored", async (_name, extra) => {
    const store = new InMemoryGuardrailStore();
    await expectAdmissionError(admitTurn({ store, input, moderate: () => true, ...extra }), "invalid_input", /^invalid admitTurn options/);
    expect(await store.getReceipt(turnKey(input))).toBeUndefined();
  });

  it("`now` dates the receipt", async () => {
    const receipt = await admitTurn({
      store: new InMemoryGuardrailStore(),
      input,
      moderate: () => true,
      now: () => new Date("2026-01-02T03:04:05.678Z"),
    });
    expect(receipt.decidedAt).toBe("2026-01-02T03:04:05.678Z");
  });

  it("a live signal reaches the provider and the turn is admitted; an aborted one stores nothing and asks no one", async () => {
    const store = new InMemoryGuardrailStore();
    const live = new AbortController();
    const seen: (AbortSignal | undefined)[] = [];
    const receipt = await admitTurn({
      store,
      input,
      signal: live.signal,
      moderate: ({ signal }) => {
        seen.push(signal);
        return true;
      },
    });
    expect(seen).toEqual([live.signal]);
    expect(receipt.allowed).toBe(true);

    const other = turnInput({ turnId: "turn-aborted" });
    const aborted = new AbortController();
    aborted.abort(new Error("caller gave up"));
    let asked = 0;
    const error = await rejection(admitTurn({ store, input: other, signal: aborted.signal, moderate: () => ++asked > 0 }));
    expect((error as Error).message).toBe("caller gave up");
    expect(asked).toBe(0);
    expect(await store.getReceipt(turnKey(other))).toBeUndefined();
  });

  it("a signal aborted while moderation runs: the answer is dropped, nothing stored", async () => {
    const store = new InMemoryGuardrailStore();
    const controller = new AbortController();
    const error = await rejection(
      admitTurn({
        store,
        input,
        signal: controller.signal,
        moderate: () => {
          controller.abort(new Error("too slow"));
          return true;
        },
      }),
    );
    expect((error as Error).message).toBe("too slow");
    expect(await store.getReceipt(turnKey(input))).toBeUndefined();
  });
});

describe("what each admission failure says", () => {
  it("not_admitted tells the caller to admit the turn; denied says moderation denied it", async () => {
    const store = new InMemoryGuardrailStore();
    const input = turnInput();
    await expectAdmissionError(assertAdmitted({ store, input }), "not_admitted", /no admission receipt; call admitTurn first/);
    await admit(store, input, false);
    await expectAdmissionError(assertAdmitted({ store, input }), "denied", /denied by moderation/);
  });

  it("input_mismatch says to issue a new turn id", async () => {
    const store = new InMemoryGuardrailStore();
    await admit(store, turnInput());
    await expectAdmissionError(
      admitTurn({ store, input: turnInput({ policyVersion: "v2" }), moderate: () => true }),
      "input_mismatch",
      /admitted with other segments, another policy version or for another principal; issue a new turn id/,
    );
  });

  it("a failing provider: moderation_failed says the turn was not admitted", async () => {
    await expectAdmissionError(
      admitTurn({
        store: new InMemoryGuardrailStore(),
        input: turnInput(),
        moderate: () => {
          throw new Error("down");
        },
      }),
      "moderation_failed",
      /^the moderation provider failed; the turn was not admitted$/,
    );
  });

  it.each<[string, Partial<GuardrailStore>, RegExp]>([
    ["getReceipt", { getReceipt: async () => ({ allowed: "yes" }) as unknown as AdmissionReceipt }, /invalid getReceipt answer/],
    [
      "putReceiptIfAbsent",
      { putReceiptIfAbsent: async () => ({ allowed: "yes" }) as unknown as AdmissionReceipt },
      /invalid putReceiptIfAbsent answer/,
    ],
  ])("a malformed %s answer is a StoreContractError naming the call", async (_name, override, message) => {
    const store = Object.assign(new InMemoryGuardrailStore(), override);
    const error = await rejection(admitTurn({ store, input: turnInput(), moderate: () => true }));
    expect(StoreContractError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(message);
  });
});

describe("a store that answers another turn's receipt admits nothing", () => {
  const input = turnInput();
  const variants: [string, (receipt: AdmissionReceipt) => AdmissionReceipt][] = [
    ["another turn key", (receipt) => ({ ...receipt, turnKey: turnKey(turnInput({ turnId: "turn-9" })) })],
    ["another scope", (receipt) => ({ ...receipt, scopeId: "doc-9" })],
    ["another turn id", (receipt) => ({ ...receipt, turnId: "turn-9" })],
  ];

  it.each(variants)("a receipt for %s: assertAdmitted, admitTurn and the agent refuse with input_mismatch", async (_name, forge) => {
    const genuine = await admit(new InMemoryGuardrailStore(), input);
    const forged = forge(genuine);
    // A buggy adapter: every key answers the same (forged) allowed receipt.
    const store = Object.assign(new InMemoryGuardrailStore(), { getReceipt: async () => ({ ...forged }) });
    await expectAdmissionError(assertAdmitted({ store, input }), "input_mismatch", /issue a new turn id/);
    await expectAdmissionError(admitTurn({ store, input, moderate: () => true }), "input_mismatch", /issue a new turn id/);
    const { agent, service, model } = guardedAgent({
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      store,
      input,
    });
    const error = await rejection(agent.invoke({ messages: [new HumanMessage(userText(input))] }));
    expect(AdmissionError.find(error)?.code).toBe("input_mismatch");
    expect(model.calls).toBe(0);
    expect(service.reads + service.writes).toBe(0);
  });
});

describe("verified receipts are remembered, within a bound", () => {
  /** `VERIFIED_LIMIT` in src/admission.ts: allowed receipts remembered per store. */
  const LIMIT = 4096;
  const nth = (index: number): TurnInput => turnInput({ turnId: `turn-${index}` });

  it("an allowed receipt, once verified, is not read again; other turns' admissions do not evict it", async () => {
    const { store, counter } = countingStore();
    await admit(store, nth(1));
    await admit(store, nth(2));
    const reads = counter.reads;
    await assertAdmitted({ store, input: nth(1) });
    await assertAdmitted({ store, input: nth(2) });
    expect(counter.reads).toBe(reads);
  });

  it(`at most ${LIMIT} are remembered per store: the oldest is forgotten first, and still admitted from the store`, async () => {
    const { store, counter } = countingStore();
    for (let index = 0; index <= LIMIT; index++) await admit(store, nth(index));
    let reads = counter.reads;
    await assertAdmitted({ store, input: nth(1) }); // the second oldest is still remembered
    expect(counter.reads).toBe(reads);
    await assertAdmitted({ store, input: nth(0) }); // the oldest was forgotten: one store read
    expect(counter.reads).toBe(reads + 1);
    reads = counter.reads;
    await assertAdmitted({ store, input: nth(0) }); // and is remembered again
    expect(counter.reads).toBe(reads);
  });

  it("checking a remembered turn at the limit forgets no other turn", async () => {
    const { store, counter } = countingStore();
    for (let index = 0; index < LIMIT; index++) await admit(store, nth(index));
    const reads = counter.reads;
    await assertAdmitted({ store, input: nth(5) }); // remembered: no read, and nothing to evict
    await assertAdmitted({ store, input: nth(0) }); // the oldest is still there
    expect(counter.reads).toBe(reads);
  });

  it("a remembered turn still runs through the agent with one write", async () => {
    const { store } = countingStore();
    const input = nth(7);
    await admit(store, input);
    const { agent, service } = guardedAgent({
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
      store,
      input,
    });
    const result = await agent.invoke({ messages: [new HumanMessage(userText(input))] });
    expect(outcomeOf(result.messages, "w1").status).toBe("success");
    expect(service.writes).toBe(1);
  });
});

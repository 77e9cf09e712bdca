import { describe, expect, it } from "vitest";
import { REFUSAL_CODES, type RefusalCode, type ToolKind } from "arkah-agent-guardrails";
import { TOOL_KINDS, type ClaimResult, type EffectClaimResult } from "arkah-agent-guardrails/store";
import { checkCall, checkMutationStep, claimAction, effectClaimAction, effectRefusal, REFUSAL_MESSAGES, replaysAnotherCall } from "../../src/decision/plan.js";
import type { StepCall } from "../../src/decision/transcript.js";

const KIND_OF_NAME: Record<string, ToolKind> = {
  read_document: "document-read",
  search_sources: "source-read",
  rename_document: "mutation",
  delete_document: "mutation",
  remember: "auxiliary",
};

const kindOf = (name: string): ToolKind | undefined => KIND_OF_NAME[name];

const call = (id: string | undefined, name: string): StepCall => ({ id, name, args: {} });

describe("checkCall", () => {
  const step = [call("a", "read_document"), call("b", "rename_document")];

  it("accepts a registered, available tool with a unique id, returning its kind and id", () => {
    expect(checkCall({ name: "read_document", id: "a" }, step, "document-read", true)).toEqual({
      kind: "document-read",
      id: "a",
    });
    expect(checkCall({ name: "rename_document", id: "b" }, step, "mutation", true)).toEqual({
      kind: "mutation",
      id: "b",
    });
  });

  it.each(TOOL_KINDS)("returns the kind unchanged for %s", (kind) => {
    expect(checkCall({ name: "t", id: "x" }, [call("x", "t")], kind, true)).toEqual({ kind, id: "x" });
  });

  it("refuses an unregistered kind with unregistered_tool", () => {
    expect(checkCall({ name: "mystery", id: "a" }, [call("a", "mystery")], undefined, true)).toEqual({
      refuse: "unregistered_tool",
    });
  });

  it("refuses a registered tool that is not available with unregistered_tool", () => {
    expect(checkCall({ name: "read_document", id: "a" }, step, "document-read", false)).toEqual({
      refuse: "unregistered_tool",
    });
  });

  it("checks registration before ids: an unregistered tool with a bad id is unregistered_tool", () => {
    expect(checkCall({ name: "mystery" }, undefined, undefined, true)).toEqual({ refuse: "unregistered_tool" });
    expect(checkCall({ name: "mystery", id: "" }, undefined, "mutation", false)).toEqual({
      refuse: "unregistered_tool",
    });
  });

  it("refuses a missing id with duplicate_call_id", () => {
    expect(checkCall({ name: "read_document" }, [call(undefined, "read_document")], "document-read", true)).toEqual({
      refuse: "duplicate_call_id",
    });
    expect(
      checkCall({ name: "read_document", id: undefined }, [call(undefined, "read_document")], "document-read", true),
    ).toEqual({ refuse: "duplicate_call_id" });
  });

  it("refuses an empty id with duplicate_call_id", () => {
    expect(checkCall({ name: "read_document", id: "" }, [call("", "read_document")], "document-read", true)).toEqual({
      refuse: "duplicate_call_id",
    });
  });

  it("refuses a call whose step cannot be found with duplicate_call_id", () => {
    expect(checkCall({ name: "read_document", id: "a" }, undefined, "document-read", true)).toEqual({
      refuse: "duplicate_call_id",
    });
  });

  it("refuses every call of a step with a repeated id anywhere in it, including calls with unique ids", () => {
    const duplicated = [
      call("a", "read_document"),
      call("b", "rename_document"),
      call("c", "remember"),
      call("b", "search_sources"),
    ];
    for (const proposed of duplicated) {
      const kind = kindOf(proposed.name);
      expect(checkCall({ name: proposed.name, id: proposed.id }, duplicated, kind, true)).toEqual({
        refuse: "duplicate_call_id",
      });
    }
  });

  it("treats two missing ids in one step as repeated", () => {
    const step2 = [call(undefined, "read_document"), call(undefined, "remember"), call("z", "remember")];
    expect(checkCall({ name: "remember", id: "z" }, step2, "auxiliary", true)).toEqual({
      refuse: "duplicate_call_id",
    });
  });

  it("accepts a call in a step of one", () => {
    expect(checkCall({ name: "remember", id: "only" }, [call("only", "remember")], "auxiliary", true)).toEqual({
      kind: "auxiliary",
      id: "only",
    });
  });
});

describe("checkMutationStep", () => {
  it("lets the only mutation of a step run", () => {
    expect(checkMutationStep("w1", [call("w1", "rename_document")], kindOf)).toBeUndefined();
  });

  it("defers a mutation that shares its step with a document-read", () => {
    const step = [call("r1", "read_document"), call("w1", "rename_document")];
    expect(checkMutationStep("w1", step, kindOf)).toEqual({ refuse: "read_batch_deferred" });
  });

  it("defers a mutation that shares its step with a source-read", () => {
    const step = [call("w1", "rename_document"), call("s1", "search_sources")];
    expect(checkMutationStep("w1", step, kindOf)).toEqual({ refuse: "read_batch_deferred" });
  });

  it("defers a mutation when the read comes after it in the step", () => {
    const step = [call("w1", "rename_document"), call("r1", "read_document")];
    expect(checkMutationStep("w1", step, kindOf)).toEqual({ refuse: "read_batch_deferred" });
  });

  it("defers every mutation of a step with a read, the first one included", () => {
    const step = [call("w1", "rename_document"), call("w2", "delete_document"), call("r1", "read_document")];
    expect(checkMutationStep("w1", step, kindOf)).toEqual({ refuse: "read_batch_deferred" });
    expect(checkMutationStep("w2", step, kindOf)).toEqual({ refuse: "read_batch_deferred" });
  });

  it("does not defer for an auxiliary call alone", () => {
    const step = [call("x1", "remember"), call("w1", "rename_document"), call("x2", "remember")];
    expect(checkMutationStep("w1", step, kindOf)).toBeUndefined();
  });

  it("ignores unregistered tool names", () => {
    const step = [call("u1", "mystery"), call("w1", "rename_document"), call("u2", "other_mystery")];
    expect(checkMutationStep("w1", step, kindOf)).toBeUndefined();
  });

  it("makes only the first mutation eligible, by step order", () => {
    const step = [call("w1", "rename_document"), call("w2", "delete_document"), call("w3", "rename_document")];
    expect(checkMutationStep("w1", step, kindOf)).toBeUndefined();
    expect(checkMutationStep("w2", step, kindOf)).toEqual({ refuse: "single_mutation" });
    expect(checkMutationStep("w3", step, kindOf)).toEqual({ refuse: "single_mutation" });
  });

  it("decides first-wins by position in the step, not by id or tool name", () => {
    const step = [call("z-last", "delete_document"), call("a-first", "rename_document")];
    expect(checkMutationStep("z-last", step, kindOf)).toBeUndefined();
    expect(checkMutationStep("a-first", step, kindOf)).toEqual({ refuse: "single_mutation" });
  });

  it("skips non-mutations before the first mutation", () => {
    const step = [call("x1", "remember"), call("u1", "mystery"), call("w1", "rename_document"), call("w2", "rename_document")];
    expect(checkMutationStep("w1", step, kindOf)).toBeUndefined();
    expect(checkMutationStep("w2", step, kindOf)).toEqual({ refuse: "single_mutation" });
  });

  it("refuses a call id that is not a mutation of the step", () => {
    expect(checkMutationStep("nope", [call("w1", "rename_document")], kindOf)).toEqual({ refuse: "single_mutation" });
  });

  it("asks kindOf about names, so an unregistered mutation-like name never counts as the first mutation", () => {
    const step = [call("w0", "rename_documents"), call("w1", "rename_document")];
    expect(checkMutationStep("w1", step, kindOf)).toBeUndefined();
  });
});

describe("checkMutationStep over every step of up to three calls", () => {
  const KINDS = ["document-read", "source-read", "mutation", "auxiliary", "unregistered"] as const;
  type GeneratedKind = (typeof KINDS)[number];
  const NAME_OF: Record<GeneratedKind, string> = {
    "document-read": "read_document",
    "source-read": "search_sources",
    mutation: "rename_document",
    auxiliary: "remember",
    unregistered: "mystery",
  };

  function* steps(maxLength: number): Generator<GeneratedKind[]> {
    if (maxLength === 0) return;
    for (const kind of KINDS) yield [kind];
    for (const shorter of steps(maxLength - 1)) {
      for (const kind of KINDS) yield [...shorter, kind];
    }
  }

  const all = [...steps(3)];

  it("enumerates 5 + 25 + 125 steps", () => {
    expect(all).toHaveLength(155);
    expect(new Set(all.map((kinds) => kinds.join(","))).size).toBe(155);
  });

  it("holds the invariants for every step", () => {
    let withMutation = 0;
    for (const kinds of all) {
      const step = kinds.map((kind, index) => call(`c${index}`, NAME_OF[kind]));
      const mutations = step.filter((_, index) => kinds[index] === "mutation");
      const hasRead = kinds.includes("document-read") || kinds.includes("source-read");
      const verdicts = mutations.map((proposed) => checkMutationStep(proposed.id!, step, kindOf));
      const eligible = verdicts.filter((verdict) => verdict === undefined);
      const label = kinds.join(",");

      expect(eligible.length, label).toBeLessThanOrEqual(1);
      if (hasRead) {
        expect(verdicts, label).toEqual(mutations.map(() => ({ refuse: "read_batch_deferred" })));
      } else if (mutations.length > 0) {
        withMutation += 1;
        expect(verdicts[0], label).toBeUndefined();
        expect(verdicts.slice(1), label).toEqual(mutations.slice(1).map(() => ({ refuse: "single_mutation" })));
      }
    }
    // Steps without a read that hold at least one mutation: 3^n - 2^n for n = 1..3.
    expect(withMutation).toBe(1 + 5 + 19);
  });
});

describe("claimAction", () => {
  const cases: [ClaimResult, ReturnType<typeof claimAction>][] = [
    [{ status: "acquired", token: "tok-1" }, { execute: "tok-1" }],
    [
      { status: "replay", result: { content: "renamed", status: "success" } },
      { replay: { content: "renamed", status: "success" } },
    ],
    [{ status: "pending" }, { refuse: "mutation_pending" }],
    [{ status: "unknown" }, { refuse: "mutation_unknown" }],
    [{ status: "conflict" }, { refuse: "mutation_conflict" }],
    [
      { status: "conflict", completed: { toolName: "rename_document", toolCallId: "w1", result: { content: "renamed", status: "success" } } },
      { refuse: "mutation_conflict", details: { completed: { tool: "rename_document", status: "success", result: "renamed" } } },
    ],
    [{ status: "scope_unresolved" }, { refuse: "scope_unresolved" }],
    [{ status: "read_required" }, { refuse: "read_required" }],
  ];

  it.each(cases)("maps %o to %o", (claim, action) => {
    expect(claimAction(claim)).toEqual(action);
  });

  it("covers all seven claim statuses", () => {
    expect(new Set(cases.map(([claim]) => claim.status))).toEqual(
      new Set(["acquired", "replay", "pending", "unknown", "conflict", "scope_unresolved", "read_required"]),
    );
  });

  it("replays a stored error result as is", () => {
    expect(claimAction({ status: "replay", result: { content: "boom", status: "error" } })).toEqual({
      replay: { content: "boom", status: "error" },
    });
  });
});

describe("effectClaimAction", () => {
  const result = { content: "sent", status: "success" } as const;
  const cases: [EffectClaimResult, ReturnType<typeof effectClaimAction>][] = [
    [{ status: "acquired", token: "t-1" }, { execute: "t-1" }],
    [{ status: "replay", result }, { replay: result }],
    [{ status: "pending" }, { refuse: "effect_pending" }],
    [{ status: "unknown" }, { refuse: "effect_unknown" }],
    [{ status: "pruned" }, { refuse: "effect_pruned" }],
    [{ status: "limit_reached" }, { refuse: "effect_limit" }],
  ];
  it.each(cases)("%j -> %j", (claim, action) => {
    expect(effectClaimAction(claim)).toEqual(action);
  });
});

describe("effectRefusal (before a person is asked)", () => {
  const claim = { toolName: "send_email", toolCallId: "c-1" };
  it("refuses only what never changes by itself: unknown and pruned", () => {
    expect(effectRefusal(undefined)).toBeUndefined();
    expect(effectRefusal({ ...claim, state: "pending" })).toBeUndefined();
    expect(effectRefusal({ ...claim, state: "complete", result: { content: "sent", status: "success" } })).toBeUndefined();
    expect(effectRefusal({ ...claim, state: "unknown" })).toEqual({ refuse: "effect_unknown" });
    expect(effectRefusal({ ...claim, state: "pruned" })).toEqual({ refuse: "effect_pruned" });
  });
});

describe("replaysAnotherCall (the model is told an identical call already ran)", () => {
  const done = { state: "complete", toolName: "send_email", result: { content: "sent", status: "success" } } as const;
  it("only a replay of the call's own effect (same id and tool) is not another call's; an effect the store no longer names is", () => {
    expect(replaysAnotherCall({ ...done, toolCallId: "c-1" }, { id: "c-1", name: "send_email" })).toBe(false);
    expect(replaysAnotherCall({ ...done, toolCallId: "c-1" }, { id: "c-2", name: "send_email" })).toBe(true);
    expect(replaysAnotherCall({ ...done, toolCallId: "c-1" }, { id: "c-1", name: "post_chat" })).toBe(true);
    expect(replaysAnotherCall(undefined, { id: "c-1", name: "send_email" })).toBe(true);
  });
});

describe("REFUSAL_MESSAGES", () => {
  const codes = Object.values(REFUSAL_CODES);

  it("has exactly the refusal codes as keys", () => {
    expect(Object.keys(REFUSAL_MESSAGES).sort()).toEqual([...codes].sort());
  });

  it("maps every code to itself in REFUSAL_CODES", () => {
    for (const [key, value] of Object.entries(REFUSAL_CODES)) expect(value).toBe(key);
  });

  it.each(codes)("has a non-empty message for %s", (code: RefusalCode) => {
    const message = REFUSAL_MESSAGES[code];
    expect(typeof message).toBe("string");
    expect(message.trim().length).toBeGreaterThan(0);
  });
});

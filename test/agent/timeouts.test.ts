/**
 * A tool policy's `timeoutMs` through the real `createAgent` loop, with slow bodies on real timers:
 * the body's `config.signal` aborts at the timeout, the call is refused `tool_timeout` without
 * waiting for the body, and a mutation's or side effect's claim is settled `unknown` (the body may
 * still be writing) until `confirm` or an operator settles it. A body that ends later changes
 * nothing. Assertions are on outcomes (codes, writes, the store), never on durations.
 */
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { StructuredTool } from "@langchain/core/tools";
import { createAgent, tool, type ToolRuntime } from "langchain";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  ConfigurationError,
  createDocumentGuardrails,
  InMemoryGuardrailStore,
  mutationKey,
  NoEffectError,
  turnKey,
  type ConfirmClaim,
  type GuardrailStore,
  type ToolPolicy,
  type TurnInput,
} from "arkah-agent-guardrails";
import { ScriptedModel, type ScriptStep } from "arkah-agent-guardrails/testing";
import { admit, deferred, outcomeOf, turnInput, userText } from "../support/fixtures.js";

/** Resolves when `signal` aborts: a body that waits for its own timeout. */
function aborted(signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal === undefined) return;
    if (signal.aborted) resolve();
    signal.addEventListener("abort", () => resolve(), { once: true });
  });
}

/** What the bodies saw and did. */
class World {
  readonly store: GuardrailStore = new InMemoryGuardrailStore();
  readonly input: TurnInput = turnInput();
  /** The signal each body got. */
  readonly signals: AbortSignal[] = [];
  /** Writes by key: the write service dedupes on mutationKey. */
  readonly records = new Map<string, string>();
  writes = 0;
  /** Whether the next rename body hangs after writing (until its signal aborts). */
  hang = true;

  write(key: string, title: string): string {
    const known = this.records.get(key);
    if (known !== undefined) return known;
    this.writes += 1;
    const result = `renamed to ${title}`;
    this.records.set(key, result);
    return result;
  }
}

function tools(world: World) {
  const readDocument = tool(
    async (_args, runtime: ToolRuntime) => {
      world.signals.push(runtime.signal as AbortSignal);
      await aborted(runtime.signal); // never answers before its timeout
      return "Untitled";
    },
    { name: "slow_read", description: "Read slowly.", schema: z.object({}) },
  );
  const quickRead = tool(() => "Untitled", { name: "read_document", description: "Read the document.", schema: z.object({}) });
  const rename = tool(
    async (args, runtime: ToolRuntime) => {
      world.signals.push(runtime.signal as AbortSignal);
      const result = world.write(mutationKey(world.input, { id: runtime.toolCallId, name: "rename_document", args }), args.title);
      if (world.hang) await aborted(runtime.signal); // the write committed; the reply never comes
      return result;
    },
    { name: "rename_document", description: "Rename the document.", schema: z.object({ title: z.string() }) },
  );
  return [readDocument, quickRead, rename];
}

async function run(
  world: World,
  script: readonly ScriptStep[],
  policies: Readonly<Record<string, ToolPolicy>>,
  extraTools: readonly StructuredTool[] = [],
): Promise<BaseMessage[]> {
  const agent = createAgent({
    model: new ScriptedModel(script),
    tools: [...tools(world), ...extraTools],
    middleware: [
      createDocumentGuardrails({
        input: world.input,
        store: world.store,
        userMessageLabel: "user",
        authorize: () => true,
        tools: {
          slow_read: { kind: "document-read", timeoutMs: 20 },
          read_document: { kind: "document-read" },
          rename_document: { kind: "mutation", timeoutMs: 20 },
          ...policies,
        },
        logger: { warn: () => undefined },
      }),
    ],
  });
  return (await agent.invoke({ messages: [new HumanMessage(userText(world.input))] })).messages;
}

const renameScript: ScriptStep[] = [
  { toolCalls: [{ id: "r1", name: "read_document", args: {} }] },
  { toolCalls: [{ id: "w1", name: "rename_document", args: { title: "Field notes" } }] },
  { content: "done" },
];

describe("tool timeouts", () => {
  it("a read that outlasts timeoutMs is refused tool_timeout, and its body's signal aborted", async () => {
    const world = new World();
    await admit(world.store, world.input);

    const messages = await run(world, [{ toolCalls: [{ id: "s1", name: "slow_read", args: {} }] }, { content: "done" }], {});

    expect(outcomeOf(messages, "s1")).toMatchObject({ status: "error", code: "tool_timeout" });
    expect(world.signals).toHaveLength(1);
    expect(world.signals[0]?.aborted).toBe(true);
    expect((world.signals[0]?.reason as Error).name).toBe("TimeoutError");
    const events = await world.store.readAudit({ turnKey: turnKey(world.input) });
    expect(events.map((event) => [event.decision, event.code])).toEqual([["failed", "tool_timeout"]]);
  });

  it("a mutation that times out leaves its claim unknown; the same call again is mutation_unknown; confirm settles it", async () => {
    const world = new World();
    await admit(world.store, world.input);

    const first = await run(world, renameScript, {});
    expect(outcomeOf(first, "w1")).toMatchObject({ status: "error", code: "tool_timeout" });
    expect(world.writes).toBe(1);
    expect(world.signals[0]?.aborted).toBe(true);
    expect(await world.store.listUnresolved()).toMatchObject([{ state: "unknown", toolCallId: "w1" }]);

    world.hang = false;
    const again = await run(world, renameScript, {});
    expect(outcomeOf(again, "w1").code).toBe("mutation_unknown");

    const confirm: ConfirmClaim = (claim) => {
      const known = claim.kind === "mutation" ? world.records.get(claim.mutationKey) : undefined;
      return known === undefined ? { outcome: "no-effect" } : { outcome: "completed", result: known };
    };
    const settled = await run(world, renameScript, { rename_document: { kind: "mutation", timeoutMs: 20, confirm } });
    expect(outcomeOf(settled, "w1")).toMatchObject({ status: "success", content: "renamed to Field notes" });
    expect(world.writes).toBe(1);
    expect(world.signals).toHaveLength(1); // the body ran once
  });

  it("a body that ends after the timeout changes nothing: the claim stays unknown, no further event", async () => {
    const world = new World();
    await admit(world.store, world.input);
    const release = deferred();
    const finished = deferred();
    const schema = z.object({ title: z.string() });
    // Ignores its signal: it really finishes later, after the call was answered.
    class LateRename extends StructuredTool<typeof schema> {
      name = "late_rename";
      description = "Rename, slowly.";
      schema = schema;
      async _call({ title }: z.infer<typeof schema>): Promise<string> {
        world.writes += 1;
        await release.promise;
        finished.resolve();
        return `renamed to ${title}`;
      }
    }
    const script: ScriptStep[] = [
      { toolCalls: [{ id: "r1", name: "read_document", args: {} }] },
      { toolCalls: [{ id: "w1", name: "late_rename", args: { title: "Field notes" } }] },
      { content: "done" },
    ];

    const messages = await run(world, script, { late_rename: { kind: "mutation", timeoutMs: 20 } }, [new LateRename()]);
    expect(outcomeOf(messages, "w1").code).toBe("tool_timeout");
    const before = await world.store.readAudit({ turnKey: turnKey(world.input) });

    release.resolve();
    await finished.promise;
    await new Promise((resolve) => setTimeout(resolve, 0));

    expect(await world.store.listUnresolved()).toMatchObject([{ state: "unknown", toolCallId: "w1" }]);
    expect(await world.store.readAudit({ turnKey: turnKey(world.input) })).toEqual(before);
    expect(before.at(-1)).toMatchObject({ decision: "failed", code: "tool_timeout" });
    expect(world.writes).toBe(1);
  });

  it("a body that throws NoEffectError before its timeout releases the claim as without one", async () => {
    const world = new World();
    await admit(world.store, world.input);
    const refusing = tool(
      () => {
        throw new NoEffectError("the service refused the write");
      },
      { name: "refusing_rename", description: "Rename.", schema: z.object({ title: z.string() }) },
    );
    const script: ScriptStep[] = [
      { toolCalls: [{ id: "r1", name: "read_document", args: {} }] },
      { toolCalls: [{ id: "w1", name: "refusing_rename", args: { title: "Field notes" } }] },
      { content: "done" },
    ];

    const messages = await run(world, script, { refusing_rename: { kind: "mutation", timeoutMs: 60_000 } }, [refusing]);

    expect(outcomeOf(messages, "w1").code).toBe("no_effect");
    expect(await world.store.getMutation(turnKey(world.input))).toBeUndefined();
  });

  it("timeoutMs must be a whole number of milliseconds from 1 to an hour", () => {
    const build = (timeoutMs: number) =>
      createDocumentGuardrails({
        input: turnInput(),
        store: new InMemoryGuardrailStore(),
        userMessageLabel: "user",
        authorize: () => true,
        tools: { read_document: { kind: "document-read", timeoutMs } },
      });
    for (const timeoutMs of [0, 1.5, 3_600_001]) expect(() => build(timeoutMs)).toThrow(ConfigurationError);
    expect(build(3_600_000).report().tools).toMatchObject([{ name: "read_document" }]);
  });
});

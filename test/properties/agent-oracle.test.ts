/**
 * Random model steps through the real `createAgent` loop, against an oracle of the decision table
 * (support/decision-oracle.ts): batches of calls of every kind, with repeated, reused and
 * malformed ids, odd arguments and unknown tool names, over one or two turns of one document and
 * transport retries of a turn, with a side-effect tool beside the document's. For every call, the
 * model must see exactly what the table says; the document must have taken exactly the writes the
 * table allows, and the outbox exactly the notifications it allows (each distinct one once per
 * turn, at most `NOTIFY_LIMIT` per turn); and no tool error text may reach the model. See docs/reliability.md, "Property tests".
 */
import { AIMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { test } from "@fast-check/vitest";
import { describe, expect } from "vitest";
import { tool } from "langchain";
import { z } from "zod";
import { InMemoryGuardrailStore, type Guardrail } from "arkah-agent-guardrails";
import { admit, DocumentService, guardedAgent, invokeTurn, refusalCode, TOOL_POLICIES, turnInput } from "../support/fixtures.js";
import {
  DecisionOracle,
  DRAFT,
  DRAFT_CODE,
  FORBIDDEN,
  LOUD,
  notified,
  NOTIFY_LIMIT,
  programArbitrary,
  type Expected,
  type Invocation,
} from "./support/decision-oracle.js";
import { propertyParameters, propertyTimeout } from "./support/runs.js";

/** CI's budget: about 20 s on two busy cores (docs/reliability.md). */
const RUNS = 60;

/**
 * The guardrails every agent runs, in order: one that observes every rename, one that denies a
 * draft title with its own code (recorded, so a replay reads its verdict), one that throws.
 */
const GUARDRAILS: readonly Guardrail[] = [
  {
    name: "watch",
    placements: ["tool-args"],
    tools: ["rename_document"],
    check: () => ({ action: "observe", outcome: "complete", detections: [{ rule: "rename", detected: true }] }),
  },
  {
    name: "no-drafts",
    placements: ["tool-args"],
    tools: ["rename_document"],
    check: ({ toolCall }) => {
      const draft = toolCall.args.title === DRAFT;
      return {
        action: draft ? "deny" : "allow",
        outcome: "complete",
        detections: [{ rule: "draft-title", detected: draft }],
        ...(draft ? { reason: "Pick a final title.", code: DRAFT_CODE } : {}),
      };
    },
  },
  {
    name: "flaky",
    placements: ["tool-args"],
    tools: ["remember"],
    deterministic: true,
    check: ({ toolCall }) => {
      if (toolCall.args.preference === LOUD) throw new Error("detector down at /srv/docs/secret-path");
      return { action: "allow", outcome: "complete", detections: [] };
    },
  },
];

/** What the model saw for each call of each step: the refusal code or the result text, in call order. */
function observedSteps(messages: readonly BaseMessage[]): Expected[][] {
  const steps: Expected[][] = [];
  for (const message of messages) {
    if (AIMessage.isInstance(message) && (message.tool_calls?.length ?? 0) > 0) steps.push([]);
    if (!ToolMessage.isInstance(message)) continue;
    const content = typeof message.content === "string" ? message.content : JSON.stringify(message.content);
    const code = refusalCode(content);
    const current = steps.at(-1);
    if (current === undefined) throw new Error("a ToolMessage before any model step");
    current.push(message.status === "error" ? { refused: code ?? `(error without a code: ${content})` } : { result: content });
  }
  return steps;
}

/** ToolMessages of one step may come back in any order: compare them as multisets. */
const sorted = (steps: readonly (readonly Expected[])[]): string[][] => steps.map((step) => step.map((entry) => JSON.stringify(entry)).sort());

async function runProgram(program: readonly Invocation[]): Promise<void> {
  const store = new InMemoryGuardrailStore();
  const service = new DocumentService();
  const oracle = new DecisionOracle();
  /** The notifications really sent: the side effects the table must allow, exactly. */
  const outbox: string[] = [];
  const notify = tool(
    ({ to }) => {
      outbox.push(to);
      return notified(to);
    },
    { name: "notify", description: "Notify someone.", schema: z.object({ to: z.string() }) },
  );
  const turns = { t1: turnInput({ turnId: "t1" }), t2: turnInput({ turnId: "t2" }) };
  await admit(store, turns.t1);
  await admit(store, turns.t2);
  for (const [index, invocation] of program.entries()) {
    const input = turns[invocation.turn];
    const { agent } = guardedAgent({
      store,
      service,
      input,
      script: [...invocation.steps.map((toolCalls) => ({ toolCalls })), { content: "done" }],
      extraTools: [notify],
      guardrails: {
        tools: { ...TOOL_POLICIES, notify: { kind: "side-effect", maxPerTurn: NOTIFY_LIMIT } },
        authorize: (call) => !Object.values(call.args as Record<string, unknown>).includes(FORBIDDEN),
        guardrails: GUARDRAILS,
      },
    });
    const messages = await invokeTurn(agent, input);
    const expected = oracle.invoke(invocation);
    expect(sorted(observedSteps(messages)), `invocation ${String(index + 1)} (${invocation.turn}): what the model saw`).toEqual(sorted(expected));
    for (const message of messages.filter(ToolMessage.isInstance)) {
      // The write service's error names a server path: it must never reach the model.
      expect(JSON.stringify(message.content)).not.toContain("secret-path");
    }
    expect({ writes: service.writes, title: service.title, revision: service.revision }, `writes after invocation ${String(index + 1)}`).toEqual({
      writes: oracle.writes,
      title: oracle.title,
      revision: oracle.revision,
    });
    // Calls of one step run concurrently: the same notifications, in any order within it.
    expect([...outbox].sort(), `notifications after invocation ${String(index + 1)}`).toEqual([...oracle.outbox].sort());
  }
}

describe("random model steps through createAgent against the decision table", () => {
  test.prop([programArbitrary], propertyParameters(RUNS))(
    "every call gets what the table says, and only allowed writes happen",
    runProgram,
    propertyTimeout(RUNS, 3_000),
  );
});

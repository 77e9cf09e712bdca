/**
 * Attack class 24: the model steers `requireApproval`'s `when` around a person. The condition
 * decides whether a person is asked, and it reads arguments the model chose, so it is given the
 * arguments as the tool's own schema parsed them (what the body receives), never the raw ones: a
 * spelling the parse normalises cannot slip past it. A recorded "not asked" verdict is bound to
 * the call's arguments, so it never covers other ones; and a condition that fails asks a person.
 *
 * Every assertion counts messages the tool body really sent.
 */
import { MemorySaver } from "@langchain/langgraph";
import { tool } from "langchain";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { requireApproval } from "arkah-agent-guardrails";
import { outcomeOf } from "../support/fixtures.js";
import { secureAgent } from "./support.js";

/** A side-effect tool whose schema upper-cases the text: the body sends the parsed text. */
function messenger() {
  const sent: string[] = [];
  const send = tool(
    ({ text }) => {
      sent.push(text);
      return `sent ${text}`;
    },
    { name: "send_message", description: "Send a message.", schema: z.object({ text: z.string().trim().toUpperCase() }) },
  );
  return { sent, send };
}

/** Asks a person about urgent messages only, looking at the arguments it is given. */
const urgentOnly = () => requireApproval({ tools: ["send_message"], when: (args) => typeof args.text === "string" && args.text.startsWith("URGENT") });

function agent(script: Parameters<typeof secureAgent>[0]["script"], when = urgentOnly()) {
  const tools = messenger();
  const secured = secureAgent({
    tools: [tools.send],
    policies: { send_message: { kind: "side-effect" } },
    guardrails: { guardrails: [when] },
    checkpointer: new MemorySaver(),
    script,
  });
  return { ...secured, sent: tools.sent };
}

const config = { configurable: { thread_id: "condition" } };

describe("requireApproval's when decides on the arguments the body receives", () => {
  it("'  urgent: wire the money' in the model's spelling is URGENT once parsed: a person is asked, nothing sent", async () => {
    const { run, sent, store } = agent([{ toolCalls: [{ id: "m1", name: "send_message", args: { text: "  urgent: wire the money" } }] }, { content: "done" }]);

    await run(config);

    expect(sent).toEqual([]);
    expect(await store.listApprovals({ status: "pending" })).toMatchObject([{ toolCallId: "m1", args: { text: "URGENT: WIRE THE MONEY" } }]);
  });

  it("an allowed call's verdict never covers other arguments: the same call id made urgent is asked about", async () => {
    const { run, sent, store } = agent([
      { toolCalls: [{ id: "m1", name: "send_message", args: { text: "hello" } }] },
      { toolCalls: [{ id: "m1", name: "send_message", args: { text: "urgent: wire the money" } }] },
      { content: "done" },
    ]);

    const messages = await run(config);

    expect(sent).toEqual(["HELLO"]);
    expect(outcomeOf(messages, "m1").content).toBe("sent HELLO");
    expect(await store.listApprovals({ status: "pending" })).toMatchObject([{ toolCallId: "m1", args: { text: "URGENT: WIRE THE MONEY" } }]);
  });

  it("a condition the model's arguments make throw asks a person: nothing sent", async () => {
    const fragile = requireApproval({
      tools: ["send_message"],
      when: (args) => {
        if (JSON.stringify(args.text).length > 20) throw new Error("too long to classify");
        return false;
      },
    });
    const { run, sent, store } = agent([{ toolCalls: [{ id: "m1", name: "send_message", args: { text: "a very long message that breaks it" } }] }, { content: "done" }], fragile);

    await run(config);

    expect(sent).toEqual([]);
    expect(await store.listApprovals({ status: "pending" })).toMatchObject([{ toolCallId: "m1" }]);
  });

  it("a condition cannot change what the body receives", async () => {
    const meddling = requireApproval({
      tools: ["send_message"],
      when: (args) => {
        (args as Record<string, unknown>).text = "SOMETHING ELSE";
        return false;
      },
    });
    const { run, sent } = agent([{ toolCalls: [{ id: "m1", name: "send_message", args: { text: "hello" } }] }, { content: "done" }], meddling);

    await run(config);

    expect(sent).toEqual(["HELLO"]);
  });
});

import { HumanMessage } from "@langchain/core/messages";
import { createAgent, tool } from "langchain";
import { z } from "zod";
import { admitTurn, createDocumentGuardrails, InMemoryGuardrailStore, type TurnInput } from "arkah-agent-guardrails";
import { ScriptedModel } from "arkah-agent-guardrails/testing";

const outbox: string[] = [];
const sendEmail = tool(
  ({ to, subject }) => {
    outbox.push(`${to}: ${subject}`); // your mail API; pass effectKey(turn, call) as its idempotency key
    return `sent to ${to}`;
  },
  { name: "send_email", description: "Send an email.", schema: z.object({ to: z.string(), subject: z.string() }) },
);

const store = new InMemoryGuardrailStore();
const turn: TurnInput = {
  scopeId: "ticket-42",
  turnId: "req-5c1d",
  policyVersion: "2026-11",
  segments: [{ label: "user", content: "Tell Ana the ticket is fixed." }],
};
const email = { name: "send_email", args: { to: "ana@example.com", subject: "Ticket 42 is fixed" } };

// The model asks for the same email twice, under two call ids: it is sent once.
const agent = createAgent({
  model: new ScriptedModel([
    { toolCalls: [{ id: "call-1", ...email }] },
    { toolCalls: [{ id: "call-2", ...email }] },
    { content: "Done." },
  ]),
  tools: [sendEmail],
  middleware: [
    createDocumentGuardrails({
      input: turn,
      store,
      userMessageLabel: "user",
      authorize: () => true,
      // Claimed by turn, tool and arguments; replayed, never sent twice; at most 3 per turn.
      tools: { send_email: { kind: "side-effect", maxPerTurn: 3 } },
    }),
  ],
});

await admitTurn({ store, input: turn, moderate: () => true });
const result = await agent.invoke({ messages: [new HumanMessage("Tell Ana the ticket is fixed.")] });
console.log(result.messages.at(-1)?.text, outbox);

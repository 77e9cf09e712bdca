/**
 * The guardrail port, offline: a schema denial, the model's corrected call, an observe-only rule
 * and an approval round trip, through a real `createAgent` loop with a checkpointer.
 *
 *   pnpm example:guardrails
 *
 * The `issue_credit` tool carries a plain JSON Schema, as an MCP tool does. Exits non-zero if the
 * trace differs from what this file expects.
 */
import { HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { Command, MemorySaver } from "@langchain/langgraph";
import { createAgent, tool } from "langchain";
import {
  allowAllCalls,
  createSchemaGuardrail,
  createToolGuardrails,
  InMemoryGuardrailStore,
  requireApproval,
  type Guardrail,
  type JsonValue,
} from "arkah-agent-guardrails";
import { ScriptedModel } from "arkah-agent-guardrails/testing";

// The credit service: every executed credit is counted.
const credits: { customerId: string; amount: number }[] = [];

const issueCredit = tool(
  (args: { customerId: string; amount: number; currency: string }) => {
    credits.push({ customerId: args.customerId, amount: args.amount });
    return `Credited ${String(args.amount)} ${args.currency} to ${args.customerId}`;
  },
  {
    name: "issue_credit",
    description: "Issue a goodwill credit to a customer.",
    schema: {
      type: "object",
      properties: {
        customerId: { type: "string", minLength: 1 },
        amount: { type: "number", exclusiveMinimum: 0, maximum: 500 },
        currency: { enum: ["EUR", "USD"] },
        reason: false,
      },
      required: ["customerId", "amount", "currency"],
    },
  },
);

// A policy rolled out in observe mode first: it records what it would refuse and lets calls run.
let largeCreditsSeen = 0;
const largeCredits: Guardrail = {
  name: "large-credit",
  placements: ["tool-args"],
  tools: ["issue_credit"],
  check: ({ toolCall }) => {
    const large = typeof toolCall.args.amount === "number" && toolCall.args.amount > 100;
    if (large) largeCreditsSeen += 1;
    return {
      action: large ? "observe" : "allow",
      outcome: "complete",
      detections: [{ rule: "amount-over-100", detected: large }],
      ...(large ? { reason: "Credits over 100 will need a manager." } : {}),
    };
  },
};

/** Arguments are JSON values: print strings and numbers as they are. */
const text = (value: JsonValue | undefined) =>
  typeof value === "string" || typeof value === "number" ? String(value) : JSON.stringify(value);

const store = new InMemoryGuardrailStore();
const agent = createAgent({
  model: new ScriptedModel([
    // The model forgets the amount and adds a field the schema forbids.
    { toolCalls: [{ id: "call-1", name: "issue_credit", args: { customerId: "cus_42", currency: "EUR", reason: "late" } }] },
    // It reads the refusal and fixes both problems in one step.
    { toolCalls: [{ id: "call-2", name: "issue_credit", args: { customerId: "cus_42", amount: 150, currency: "EUR" } }] },
    { content: "I issued a 150 EUR credit to cus_42." },
  ]),
  tools: [issueCredit],
  middleware: [
    createToolGuardrails({
      store,
      tools: ["issue_credit"],
      // No per-user check in this example: say so explicitly (omitted, every call is refused).
      authorize: allowAllCalls,
      guardrails: [
        createSchemaGuardrail(),
        largeCredits,
        requireApproval({
          tools: ["issue_credit"],
          describe: ({ args }) => `Credit ${text(args.amount)} ${text(args.currency)} to ${text(args.customerId)}?`,
        }),
      ],
    }),
  ],
  checkpointer: new MemorySaver(),
});

const lines: string[] = [];
const config = { configurable: { thread_id: "support-7" } };

const paused = await agent.invoke({ messages: [new HumanMessage("Please credit cus_42 for the late delivery.")] }, config);
lines.push(...toolLines(paused.messages));
const [pending] = paused.__interrupt__ ?? [];
const request = pending?.value as { type?: string; tool?: string; reason?: string } | undefined;
lines.push(`approval requested: ${request?.tool ?? "?"}: ${request?.reason ?? "?"}`);

const resumed = await agent.invoke(new Command({ resume: { decision: "approve" } }), config);
lines.push(...toolLines(resumed.messages).slice(1)); // the refusal of call-1 was printed already
lines.push(
  `credits issued: ${String(credits.length)}`,
  `observed large credits: ${String(largeCreditsSeen)}`,
  `audit: ${(await store.readAudit()).map((event) => `${event.decision}${event.code === undefined ? "" : `:${event.code}`}${event.action === undefined ? "" : `:${event.action}`}`).join(", ")}`,
);
console.log(lines.join("\n"));

function toolLines(messages: readonly BaseMessage[]): string[] {
  return messages.filter(ToolMessage.isInstance).map((message) => {
    const content = typeof message.content === "string" ? message.content : JSON.stringify(message.content);
    return `${message.name ?? "?"} [${message.status ?? "success"}]: ${content}`;
  });
}

const expected = [
  'issue_credit [error]: {"guardrail":"invalid_arguments","message":"The arguments do not match the tool\'s schema, so the call did not run. Fix every listed problem and call it again.","valid":false,"tool":"issue_credit","error":"arguments for tool \\"issue_credit\\" do not match its inputSchema - #: Instance does not have required property \\"amount\\".; #/reason: False boolean schema.","issues":[{"path":"","message":"Instance does not have required property \\"amount\\"."},{"path":"/reason","message":"False boolean schema."}]}',
  "approval requested: issue_credit: Credit 150 EUR to cus_42?",
  "issue_credit [success]: Credited 150 EUR to cus_42",
  "credits issued: 1",
  "observed large credits: 1",
  "audit: refused:invalid_arguments, verdict:observe, verdict:approve, approval:requested, approval:approve, approval:applied, executed",
];
if (lines.join("\n") !== expected.join("\n")) {
  console.error("\nexample: the trace differs from the expected one");
  process.exit(1);
}

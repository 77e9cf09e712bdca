import { describe, expect, it } from "vitest";
import { admit, guardedAgent, invokeTurn, outcomeOf, read, rename, toolOutcomes } from "../support/fixtures.js";

describe("document guardrails through createAgent", () => {
  it("lets a turn read, then make exactly one write", async () => {
    const { agent, store, input, service } = guardedAgent({
      script: [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }],
    });
    await admit(store, input);
    const messages = await invokeTurn(agent, input);
    expect(toolOutcomes(messages).map((outcome) => outcome.code ?? outcome.status)).toEqual(["success", "success"]);
    expect(outcomeOf(messages, "w1").content).toBe('{"title":"Field notes","revision":1}');
    expect(service.writes).toBe(1);
  });
});

/**
 * A middleware inside the guardrails that stops a mutation before its tool body starts (a rate
 * limiter, a circuit breaker): it throws, or answers an error ToolMessage of its own. The body
 * provably never ran, so the claim is released, not left closed: the turn's retry writes, once.
 * One that answers success without the tool is the opposite case (the claim stays closed), in
 * test/security/sealed-execution.test.ts. Written for surviving mutants of src/decision/seal.ts.
 */
import { ToolMessage } from "@langchain/core/messages";
import { createMiddleware } from "langchain";
import { describe, expect, it } from "vitest";
import { InMemoryGuardrailStore } from "arkah-agent-guardrails";
import { admit, DocumentService, guardedAgent, invokeTurn, outcomeOf, read, rename, turnInput } from "../support/fixtures.js";

const SCRIPT = [{ toolCalls: [read("r1")] }, { toolCalls: [rename("w1")] }, { content: "done" }];

/** Stops the first call to the mutation tool before the handler, as `stop` says; passes everything else. */
function breaker(stop: (id: string) => never | ToolMessage) {
  let stopped = 0;
  const middleware = createMiddleware({
    name: "Breaker",
    wrapToolCall: (request, handler) => {
      if (request.toolCall.name === "rename_document" && stopped === 0) {
        stopped += 1;
        return stop(request.toolCall.id ?? "");
      }
      return handler(request);
    },
  });
  return { middleware, stopped: () => stopped };
}

describe("an inner middleware that stops a mutation before its body runs", () => {
  it.each<[string, (id: string) => never | ToolMessage]>([
    [
      "throws",
      () => {
        throw new Error("circuit open");
      },
    ],
    [
      "answers an error ToolMessage",
      (id) => new ToolMessage({ content: "rate limited, try later", tool_call_id: id, status: "error" }),
    ],
  ])("%s: nothing is written, the claim is released, and the turn's retry writes once", async (_name, stop) => {
    const store = new InMemoryGuardrailStore();
    const service = new DocumentService();
    const input = turnInput();
    await admit(store, input);
    const inner = breaker(stop);

    const first = guardedAgent({ script: SCRIPT, store, service, input, middleware: [inner.middleware] });
    const stopped = outcomeOf(await invokeTurn(first.agent, input), "w1");
    expect(inner.stopped()).toBe(1);
    expect(stopped.status).toBe("error");
    expect(service.writes).toBe(0);
    expect(await store.listUnresolved()).toEqual([]);

    const retry = guardedAgent({ script: SCRIPT, store, service, input, middleware: [inner.middleware] });
    expect(outcomeOf(await invokeTurn(retry.agent, input), "w1").status).toBe("success");
    expect(service.writes).toBe(1);

    // And the write is now replayed, not run again.
    const again = guardedAgent({ script: SCRIPT, store, service, input, middleware: [inner.middleware] });
    expect(outcomeOf(await invokeTurn(again.agent, input), "w1").status).toBe("success");
    expect(service.writes).toBe(1);
  });
});

/**
 * `askOnce` (src/guardrails/resume.ts) where it cannot tell a new resume value from a replay: no
 * checkpointer, or a LangGraph without the task scratchpad it reads. Either way it takes no answer
 * and says how to fix it. (Its work inside a real graph is tested through the agent loop:
 * test/security/approval-answers.test.ts.)
 */
import { RunnableLambda } from "@langchain/core/runnables";
import { MemorySaver } from "@langchain/langgraph";
import { describe, expect, it } from "vitest";
import { ConfigurationError } from "arkah-agent-guardrails";
import { askOnce, hasCheckpointer } from "../../src/guardrails/resume.js";

function thrown(run: () => unknown): unknown {
  try {
    run();
  } catch (error) {
    return error;
  }
  throw new Error("expected a throw");
}

describe("askOnce without what it needs", () => {
  it("outside a graph: a ConfigurationError naming the checkpointer fix", () => {
    const error = thrown(() => askOnce({ question: 1 }));
    expect(ConfigurationError.isInstance(error)).toBe(true);
    expect(String(error)).toMatch(/an approval pauses the run for a person's approval, which needs a checkpointer/);
  });

  it("with a checkpointer but no task scratchpad (another LangGraph): a ConfigurationError, no answer taken", async () => {
    const ask = RunnableLambda.from(() => thrown(() => askOnce({ question: 1 })));
    const error = await ask.invoke(undefined, { configurable: { __pregel_checkpointer: new MemorySaver() } });
    expect(ConfigurationError.isInstance(error)).toBe(true);
    expect(String(error)).toMatch(/cannot tell a new resume value from one LangGraph replays/);
  });

  it("a checkpointer is any value LangGraph set but false", () => {
    expect(hasCheckpointer(undefined)).toBe(false);
    expect(hasCheckpointer({ __pregel_checkpointer: false })).toBe(false);
    expect(hasCheckpointer({ __pregel_checkpointer: null })).toBe(false);
    expect(hasCheckpointer({ __pregel_checkpointer: new MemorySaver() })).toBe(true);
  });
});

/** The README's "How a tool gets its mutationKey" runs as written: it is examples/mutation-key.ts, verbatim. */
import { readFileSync } from "node:fs";
import { afterEach, describe, expect, it, vi } from "vitest";

const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");

describe("How a tool gets its mutationKey", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it("the README embeds examples/mutation-key.ts verbatim", () => {
    const block = /<!-- mutation-key:start -->\n```ts\n([\s\S]*?)```\n<!-- mutation-key:end -->/.exec(readme)?.[1];
    expect(block).toBe(readFileSync(new URL("../../examples/mutation-key.ts", import.meta.url), "utf8"));
  });

  it("the tool passes the claim's mutationKey to its write service, which writes once", async () => {
    const lines: unknown[][] = [];
    vi.spyOn(console, "log").mockImplementation((...args: unknown[]) => {
      lines.push(args);
    });
    await import("../../examples/mutation-key.js");
    expect(lines).toEqual([[1, true]]);
  });
});

/** The README's examples run as written: its quickstart is examples/quickstart.ts, verbatim. */
import { readFileSync } from "node:fs";
import { afterEach, describe, expect, it, vi } from "vitest";

const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");

describe("README", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it("embeds examples/quickstart.ts verbatim", () => {
    const block = /<!-- quickstart:start -->\n```ts\n([\s\S]*?)```\n<!-- quickstart:end -->/.exec(readme)?.[1];
    expect(block).toBe(readFileSync(new URL("../examples/quickstart.ts", import.meta.url), "utf8"));
  });

  it("runs the quickstart and edits the note once", async () => {
    const lines: unknown[][] = [];
    vi.spyOn(console, "log").mockImplementation((...args: unknown[]) => {
      lines.push(args);
    });
    await import("../examples/quickstart.js");
    expect(lines).toEqual([["Done: the note now says “Buy oat milk”."], [{ body: "Buy oat milk", revision: 4 }]]);
  });

  it("shows the demo's exact trace", () => {
    const demo = readFileSync(new URL("../examples/document-agent.ts", import.meta.url), "utf8");
    const expected = /const expected = \[([\s\S]*?)\];/.exec(demo)?.[1];
    expect(expected).toBeDefined();
    const lines = [...(expected ?? "").matchAll(/^\s*(?:'(.*)'|"(.*)"),$/gm)].map((match) => match[1] ?? match[2] ?? "");
    expect(lines.length).toBe(13);
    expect(readme).toContain(["```", ...lines, "```"].join("\n"));
  });
});

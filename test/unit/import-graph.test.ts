/**
 * src/ has no runtime import cycle (scripts/import-cycles.ts): a module of a cycle runs before the
 * other has finished loading, so what it reads at load time depends on the bundle's order.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { findCycles, importGraph, runtimeSpecifiers } from "../../scripts/import-cycles.js";

const SRC = join(import.meta.dirname, "../../src");
const graph = importGraph(SRC);

describe("the import graph of src/", () => {
  it("has no runtime import cycle", () => {
    const cycles = findCycles(graph).map((cycle) => cycle.join(" -> "));
    expect(cycles, `runtime import cycles in src/:\n${cycles.join("\n")}`).toEqual([]);
  });

  it("is read whole: every source file, value imports as edges, type-only imports as none", () => {
    expect(graph.size, "source files found under src/").toBeGreaterThan(100);
    expect(graph.get("index.ts"), "the root entry loads the middleware").toContain("middleware.ts");
    expect(graph.get("store/index.ts"), "the /store entry loads its capabilities").toContain("store/capabilities.ts");
    // The known pair: evaluate.ts calls approvals.ts, which names evaluate.ts's types only.
    expect(graph.get("guardrails/evaluate.ts")).toContain("guardrails/approvals.ts");
    expect(graph.get("guardrails/approvals.ts")).not.toContain("guardrails/evaluate.ts");
  });
});

describe("runtimeSpecifiers", () => {
  it("counts what compilation keeps and skips what it erases", () => {
    const text = [
      'import type { A } from "./erased-import.js";',
      'export type { B } from "./erased-export.js";',
      'import { type C } from "./kept-as-empty-import.js";',
      'import { d, type E } from "./value.js";',
      'import "./side-effect.js";',
      'import * as f from "./namespace.js";',
      'export * from "./star.js";',
      'export { g } from "./named.js";',
      'const h = () => import("./dynamic.js");',
      "export { d, f, h };",
    ].join("\n");
    expect(runtimeSpecifiers("x.ts", text)).toEqual([
      "./kept-as-empty-import.js",
      "./value.js",
      "./side-effect.js",
      "./namespace.js",
      "./star.js",
      "./named.js",
    ]);
  });
});

describe("findCycles", () => {
  it("finds none in a graph without one", () => {
    const graph = new Map([
      ["a", ["b", "c"]],
      ["b", ["c"]],
      ["c", []],
    ]);
    expect(findCycles(graph)).toEqual([]);
  });

  it("finds a two-file cycle, a longer one and a self-import, each once", () => {
    const graph = new Map([
      ["a", ["b"]],
      ["b", ["a", "c"]],
      ["c", ["d"]],
      ["d", ["e"]],
      ["e", ["c"]],
      ["f", ["f"]],
      ["g", ["a"]],
    ]);
    expect(findCycles(graph)).toEqual([
      ["a", "b", "a"],
      ["c", "d", "e", "c"],
      ["f", "f"],
    ]);
  });
});

/**
 * Every TypeScript block in the README and docs (docs/api is generated: not checked) type-checks as
 * its own module against the package (through tsconfig `paths`, to the sources, like every other
 * test), or is marked as an excerpt of a named example and appears in it, line by line, in order.
 * A block that declares nothing is a whole program: it also runs, and prints what its comments say.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { formatWithOptions } from "node:util";
import { afterAll, describe, expect, it, vi } from "vitest";
import { compileBlocks, expectedOutput, extractBlocks, missingExcerptLines, runsAsWritten, type DocsBlock } from "./support/docs-blocks.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const files = [
  "README.md",
  ...readdirSync(new URL("../docs", import.meta.url))
    .filter((name) => name.endsWith(".md"))
    .sort()
    .map((name) => `docs/${name}`),
];
const blocks = files.flatMap((file) => extractBlocks(root, file));
const compiled = compileBlocks(root, blocks);

/**
 * The only blocks that are shown but not checked, by file and first code line (not blank, a
 * comment or an import), so the list does not move when lines are added above them; each gives
 * its reason in its marker.
 */
const NOT_CHECKED: readonly string[] = [
  'docs/migrating-from-0.1.md import { InMemoryGuardrailStore, MutationIdentitySchema, type MutationIdentity } from "arkah-agent-guardrails";',
];

/** A block's key in NOT_CHECKED: its file and its first code line that is not blank, a comment or an import. */
function blockKey(block: DocsBlock): string {
  const line = block.code.split("\n").find((text) => !/^\s*(?:$|\/\/|\/\*|\*|import )/.test(text));
  return `${block.file} ${(line ?? block.code.split("\n").find((text) => text.trim() !== "") ?? "").trim()}`;
}

describe("TypeScript blocks in the README and docs", () => {
  it("finds the blocks", () => {
    expect(blocks.length).toBeGreaterThan(50);
  });

  // Each is compared with its example file, verbatim, and run: by test/docs.test.ts, and mutation-key
  // by test/examples/mutation-key.test.ts. A new embed needs such a test before it joins this list.
  it("embeds verbatim only the examples a test compares and runs", () => {
    const embedded = blocks.flatMap((block) => (block.mark.kind === "embedded" ? [block.mark.name] : []));
    expect(embedded.sort()).toEqual(["approval-resume", "custom-graph", "mutation-key", "quickstart", "server-admission", "side-effects"]);
  });

  it("marks only the listed blocks not-checked", () => {
    expect(blocks.filter((block) => block.mark.kind === "not-checked").map(blockKey)).toEqual(NOT_CHECKED);
  });

  for (const file of files) {
    const own = blocks.filter((block) => block.file === file);
    if (own.length === 0) continue;
    it(`${file}: every block type-checks or is a faithful excerpt`, () => {
      const problems = own.flatMap((block: DocsBlock) => {
        if (block.mark.kind === "compile") return compiled.get(`${block.file}:${String(block.line)}`) ?? [];
        if (block.mark.kind === "excerpt") return missingExcerptLines(root, { ...block, mark: block.mark });
        return [];
      });
      // The message lists file:line and tsc's words, one problem per line.
      expect(problems, `\n${problems.join("\n")}\n`).toEqual([]);
    });
  }
});

/** Where runnable blocks are written to run: inside the repository, so imports resolve as for the tests. */
const runDir = join(root, "test", `.docs-run-${String(process.pid)}`);
afterAll(() => {
  rmSync(runDir, { recursive: true, force: true });
});

/** Runs one block as its own module and returns what it printed with `console.log`, a line per call. */
async function runBlock(block: DocsBlock): Promise<string[]> {
  mkdirSync(runDir, { recursive: true });
  const path = join(runDir, `${block.file.replace(/[/.]/g, "_")}_L${String(block.line)}.ts`);
  writeFileSync(path, `${block.code}export {};\n`);
  const printed: string[] = [];
  const log = vi.spyOn(console, "log").mockImplementation((...args: unknown[]) => {
    printed.push(formatWithOptions({ colors: false }, ...args));
  });
  try {
    await import(pathToFileURL(path).href);
  } finally {
    log.mockRestore();
  }
  return printed;
}

describe("TypeScript blocks that run as written", () => {
  const runnable = blocks.filter(runsAsWritten);

  it("finds them, and marks not-run only blocks that would otherwise run", () => {
    expect(runnable.length).toBeGreaterThan(5);
    const notRun = blocks.filter((block) => block.mark.kind === "not-run");
    expect(notRun.filter((block) => /^\s*declare\s/m.test(block.code)).map(blockKey)).toEqual([]);
  });

  for (const block of runnable) {
    it(`${block.file}:${String(block.line)} runs and prints what its comments say`, async () => {
      expect(await runBlock(block)).toEqual(expectedOutput(block));
    });
  }
});

/** The checker itself: a block that does not compile, or an excerpt that rotted, is reported at its line. */
describe("the docs block checker", () => {
  function withDocs(files: Record<string, string>, run: (dir: string) => void): void {
    // Inside the repository, so `arkah-agent-guardrails` and node_modules resolve as for the real docs.
    const dir = mkdtempSync(join(root, "test", ".docs-blocks-"));
    try {
      for (const [name, text] of Object.entries(files)) {
        mkdirSync(join(dir, name, ".."), { recursive: true });
        writeFileSync(join(dir, name), text);
      }
      run(dir);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  it("reports a block that does not type-check with the markdown line and tsc's message", () => {
    const doc = ["# Doc", "", "```ts", 'import { turnKey } from "arkah-agent-guardrails";', "", "turnKey(42);", "```", ""].join("\n");
    withDocs({ "doc.md": doc }, (dir) => {
      const found = extractBlocks(dir, "doc.md");
      expect(found.map((block) => block.mark.kind)).toEqual(["compile"]);
      const errors = compileBlocks(dir, found, join(root, "tsconfig.json")).get("doc.md:3") ?? [];
      expect(errors).toHaveLength(1);
      expect(errors[0]).toMatch(/^doc\.md:6: TS2345 Argument of type 'number'/);
    });
  });

  it("runs a block that declares nothing, and catches one that prints other than it says", async () => {
    const doc = [
      "```ts",
      'import { canonicalJson } from "arkah-agent-guardrails";',
      "",
      'console.log(canonicalJson({ b: 1, a: 2 })); // {"b":1,"a":2}',
      "```",
      "",
      "```ts",
      "declare const x: number;",
      "console.log(x);",
      "```",
      "",
    ].join("\n");
    let found: DocsBlock[] = [];
    withDocs({ "doc.md": doc }, (dir) => {
      found = extractBlocks(dir, "doc.md");
    });
    expect(found.map(runsAsWritten)).toEqual([true, false]);
    const [block] = found;
    if (block === undefined) return;
    expect(expectedOutput(block)).toEqual(['{"b":1,"a":2}']);
    expect(await runBlock({ ...block, file: "checker.md" })).toEqual(['{"a":2,"b":1}']);
  });

  it("reports an excerpt line its example does not have, in order", () => {
    const example = ["const a = 1;", "const b = 2;", ""].join("\n");
    const doc = ["<!-- excerpt: example.ts -->", "```ts", "const b = 2;", "", "const a = 1;", "```", ""].join("\n");
    withDocs({ "example.ts": example, "doc.md": doc }, (dir) => {
      const [block] = extractBlocks(dir, "doc.md");
      expect(block?.mark).toEqual({ kind: "excerpt", of: "example.ts" });
      if (block?.mark.kind !== "excerpt") return;
      expect(missingExcerptLines(dir, { ...block, mark: block.mark })).toEqual(["doc.md:5: not in example.ts (in order): const a = 1;"]);
    });
  });
});

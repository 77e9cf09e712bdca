/**
 * Every TypeScript block in the README and docs (docs/api is generated: not checked) type-checks as
 * its own module against the package (through tsconfig `paths`, to the sources, like every other
 * test), or is marked as an excerpt of a named example and appears in it, line by line, in order.
 */
import { readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { compileBlocks, extractBlocks, missingExcerptLines, type DocsBlock } from "./support/docs-blocks.js";

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
 * The only blocks that are shown but not checked (by file and first code line, as PENDING below);
 * each gives its reason in its marker.
 */
const NOT_CHECKED: readonly string[] = [
  'docs/migrating-from-0.1.md import { InMemoryGuardrailStore, MutationIdentitySchema, type MutationIdentity } from "arkah-agent-guardrails";',
];

/**
 * Blocks that do not compile yet (issue 41, item 2, still open), by file and first code line, so
 * the list does not move when lines are added above them. A listed block that compiles fails the
 * test: take it off the list. Nothing may be added.
 */
const PENDING: ReadonlySet<string> = new Set([
  "README.md const turns = createTurnService({ agent, store, moderate }); // agent: a checkpointer, guardrails without `input`",
  "README.md createAgent({",
  "README.md const noBulkDeletes: Guardrail = {",
  "README.md await validateGuardrailStore({",
  "README.md createDocumentGuardrails({ ...options, telemetry: openTelemetry() });",
  "README.md const renameDocument = tool(async ({ title, expectedRevision }) => {",
]);

/** A block's key in NOT_CHECKED and PENDING: its file and its first code line that is not blank, a comment or an import. */
function blockKey(block: DocsBlock): string {
  const line = block.code.split("\n").find((text) => !/^\s*(?:$|\/\/|\/\*|\*|import )/.test(text));
  return `${block.file} ${(line ?? block.code.split("\n").find((text) => text.trim() !== "") ?? "").trim()}`;
}

describe("TypeScript blocks in the README and docs", () => {
  it("finds the blocks", () => {
    expect(blocks.length).toBeGreaterThan(50);
  });

  it("lists in PENDING only blocks that exist", () => {
    const keys = new Set(blocks.map(blockKey));
    expect([...PENDING].filter((key) => !keys.has(key))).toEqual([]);
  });

  it("marks only the listed blocks not-checked", () => {
    expect(blocks.filter((block) => block.mark.kind === "not-checked").map(blockKey)).toEqual(NOT_CHECKED);
  });

  for (const file of files) {
    const own = blocks.filter((block) => block.file === file);
    if (own.length === 0) continue;
    it(`${file}: every block type-checks or is a faithful excerpt`, () => {
      const problems = own.flatMap((block: DocsBlock) => {
        if (block.mark.kind === "compile") {
          const errors = compiled.get(`${block.file}:${String(block.line)}`) ?? [];
          if (!PENDING.has(blockKey(block))) return errors;
          return errors.length > 0 ? [] : [`${block.file}:${String(block.line)}: compiles now: take "${blockKey(block)}" off PENDING`];
        }
        if (block.mark.kind === "excerpt") return missingExcerptLines(root, { ...block, mark: block.mark });
        return [];
      });
      // The message lists file:line and tsc's words, one problem per line.
      expect(problems, `\n${problems.join("\n")}\n`).toEqual([]);
    });
  }
});

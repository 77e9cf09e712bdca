/**
 * Extracts the TypeScript blocks of the README and docs and checks them. A plain block is
 * type-checked as its own module (one program for all of them, so the check stays fast). A block
 * embedded verbatim between `<!-- name:start -->` and `<!-- name:end -->` is an example file that
 * test/docs.test.ts (or the example's own test) compares and runs. A block marked
 * `<!-- excerpt: examples/x.ts -->` must appear line by line, in order, in that file (so it cannot
 * rot). A block marked `<!-- not-checked: reason -->` is only listed.
 *
 * A plain block that declares nothing (no `declare`, so every name in it has a value) is a whole
 * program, and it also RUNS: test/docs-blocks.test.ts imports it, and each `console.log(...)` line
 * that ends in a `// comment` must print that comment. A self-contained block that cannot run here
 * (it opens a file under /var/lib, or needs a database URL) is marked `<!-- not-run: reason -->`:
 * still type-checked, only not run.
 */
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import ts from "typescript";

/** One fenced TypeScript block of a markdown file. */
export interface DocsBlock {
  /** The markdown file, relative to the repository root (`docs/turns.md`). */
  readonly file: string;
  /** The 1-based line of the opening fence. */
  readonly line: number;
  /** The code between the fences. */
  readonly code: string;
  /** How the block is checked: compiled, compared with an example file, or not at all. */
  readonly mark:
    | { readonly kind: "compile" }
    | { readonly kind: "embedded"; readonly name: string }
    | { readonly kind: "excerpt"; readonly of: string }
    | { readonly kind: "not-checked"; readonly reason: string }
    | { readonly kind: "not-run"; readonly reason: string };
}

const FENCE = /^```(?:ts|typescript)\s*$/;
const EXCERPT = /^<!--\s*excerpt:\s*(\S+)\s*-->\s*$/;
/** `<!-- quickstart:start -->`: an example file embedded verbatim, which another test compares and runs. */
const EMBEDDED = /^<!--\s*([a-z-]+):start\s*-->\s*$/;
const NOT_CHECKED = /^<!--\s*not-checked:\s*(.+?)\s*-->\s*$/;
const NOT_RUN = /^<!--\s*not-run:\s*(.+?)\s*-->\s*$/;

/** Every ```ts / ```typescript block of `file` (relative to `root`), with the marker right above it. */
export function extractBlocks(root: string, file: string): DocsBlock[] {
  const lines = readFileSync(join(root, file), "utf8").split("\n");
  const blocks: DocsBlock[] = [];
  for (let index = 0; index < lines.length; index += 1) {
    if (!FENCE.test(lines[index] ?? "")) continue;
    const start = index;
    const body: string[] = [];
    index += 1;
    while (index < lines.length && !/^```\s*$/.test(lines[index] ?? "")) {
      body.push(lines[index] ?? "");
      index += 1;
    }
    // The marker is the nearest non-blank line above the fence.
    let above = start - 1;
    while (above >= 0 && (lines[above] ?? "").trim() === "") above -= 1;
    const previous = lines[above] ?? "";
    const excerpt = EXCERPT.exec(previous);
    const notChecked = NOT_CHECKED.exec(previous);
    const embedded = EMBEDDED.exec(previous);
    const notRun = NOT_RUN.exec(previous);
    const mark: DocsBlock["mark"] = embedded?.[1] !== undefined
      ? { kind: "embedded", name: embedded[1] }
      : excerpt?.[1] !== undefined
      ? { kind: "excerpt", of: excerpt[1] }
      : notChecked?.[1] !== undefined
        ? { kind: "not-checked", reason: notChecked[1] }
        : notRun?.[1] !== undefined
          ? { kind: "not-run", reason: notRun[1] }
          : { kind: "compile" };
    blocks.push({ file, line: start + 1, code: body.join("\n") + "\n", mark });
  }
  return blocks;
}

/** The virtual path of a compiled block: beside the repository's sources, so `paths` and `node_modules` resolve. */
function virtualPath(root: string, block: DocsBlock): string {
  return join(root, "test", ".docs-blocks", `${block.file.replace(/[/.]/g, "_")}_L${String(block.line)}.ts`);
}

/**
 * Type-checks every compile block as its own module in ONE program with the repository's tsconfig
 * options (`arkah-agent-guardrails[/sub]` resolves through its `paths`, to the sources, as in every
 * other test; `configFile` is the repository's tsconfig.json unless given). Returns tsc's messages per block, keyed `file:line`, as `file:line: message` lines
 * pointing into the markdown file.
 */
export function compileBlocks(root: string, blocks: readonly DocsBlock[], configFile = join(root, "tsconfig.json")): Map<string, string[]> {
  const read = ts.readConfigFile(configFile, ts.sys.readFile);
  if (read.error) throw new Error(ts.flattenDiagnosticMessageText(read.error.messageText, "\n"));
  const parsed = ts.parseJsonConfigFileContent(read.config, ts.sys, dirname(configFile), undefined, configFile);
  const options: ts.CompilerOptions = { ...parsed.options, noEmit: true, declaration: false };

  const virtual = new Map<string, DocsBlock>();
  const texts = new Map<string, string>();
  for (const block of blocks) {
    if (block.mark.kind !== "compile" && block.mark.kind !== "not-run") continue;
    const path = resolve(virtualPath(root, block));
    virtual.set(path, block);
    // `export {}` makes a block without imports a module too, so blocks never share globals.
    texts.set(path, `${block.code}export {};\n`);
  }

  const host = ts.createCompilerHost(options, true);
  const { fileExists, readFile, getSourceFile } = host;
  host.fileExists = (name) => texts.has(resolve(name)) || fileExists.call(host, name);
  host.readFile = (name) => texts.get(resolve(name)) ?? readFile.call(host, name);
  host.getSourceFile = (name, language, onError, create) => {
    const text = texts.get(resolve(name));
    return text === undefined ? getSourceFile.call(host, name, language, onError, create) : ts.createSourceFile(name, text, language, true);
  };

  const program = ts.createProgram({ rootNames: [...texts.keys()], options, host });
  const results = new Map<string, string[]>();
  for (const [path, block] of virtual) {
    const source = program.getSourceFile(path);
    const diagnostics = source === undefined ? [] : [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)];
    results.set(
      `${block.file}:${String(block.line)}`,
      diagnostics.map((diagnostic) => {
        const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n");
        if (diagnostic.file === undefined || diagnostic.start === undefined) return `${block.file}:${String(block.line)}: ${message}`;
        const { line } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start);
        // +1 for the fence, +1 for 1-based lines.
        return `${block.file}:${String(block.line + line + 1)}: TS${String(diagnostic.code)} ${message}`;
      }),
    );
  }
  return results;
}

/**
 * The non-blank lines of an excerpt block that are not found, in order, in its example file
 * (compared trimmed, so an excerpt may be re-indented). Empty when the excerpt is faithful.
 */
export function missingExcerptLines(root: string, block: DocsBlock & { mark: { kind: "excerpt"; of: string } }): string[] {
  const source = readFileSync(join(root, block.mark.of), "utf8")
    .split("\n")
    .map((line) => line.trim());
  const missing: string[] = [];
  let at = 0;
  block.code.split("\n").forEach((raw, offset) => {
    const line = raw.trim();
    if (line === "" || line === "// ..." || line === "…" || line === "...") return;
    const found = source.indexOf(line, at);
    if (found === -1) missing.push(`${block.file}:${String(block.line + offset + 1)}: not in ${block.mark.of} (in order): ${line}`);
    else at = found + 1;
  });
  return missing;
}

/**
 * True when a block is a whole program that runs as written: a plain (compiled) block that
 * declares nothing, so every name it uses has a value. `not-run` blocks are excluded by their mark.
 */
export function runsAsWritten(block: DocsBlock): boolean {
  return block.mark.kind === "compile" && !/^\s*declare\s/m.test(block.code);
}

/**
 * What a runnable block says it prints: for each `console.log(...)` line ending in `// text`, the
 * text, in order. A block without such comments only has to finish without throwing.
 */
export function expectedOutput(block: DocsBlock): string[] {
  return block.code.split("\n").flatMap((line) => {
    const printed = /^\s*console\.log\(.*\);\s*\/\/\s*(.+?)\s*$/.exec(line)?.[1];
    return printed === undefined ? [] : [printed];
  });
}

/**
 * Every assertion in the conformance kit says what it checks (`expect(value, "message")`): an
 * adapter author reads the message, not "expected false to be true". Fails naming each
 * `expect(` without a second argument in src/testing/conformance/.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const KIT = join(import.meta.dirname, "../../src/testing/conformance");

/** The index after the bracket matching the one at `open`, skipping strings, templates and comments. */
function close(src: string, open: number): number {
  let depth = 0;
  for (let i = open; i < src.length; i += 1) {
    const c = src[i];
    if (c === '"' || c === "'") {
      for (i += 1; src[i] !== c; i += 1) if (src[i] === "\\") i += 1;
    } else if (c === "`") {
      for (i += 1; src[i] !== "`"; i += 1) {
        if (src[i] === "\\") i += 1;
        else if (src[i] === "$" && src[i + 1] === "{") i = close(src, i + 1) - 1;
      }
    } else if (src.startsWith("//", i)) i = src.indexOf("\n", i);
    else if (src.startsWith("/*", i)) i = src.indexOf("*/", i) + 1;
    else if (c === "(" || c === "[" || c === "{") depth += 1;
    else if (c === ")" || c === "]" || c === "}") {
      depth -= 1;
      if (depth === 0) return i + 1;
    }
  }
  throw new Error("unbalanced brackets");
}

/** Whether the call's arguments (between `open` and `end`) have a second, non-empty one. */
function hasMessage(src: string, open: number, end: number): boolean {
  // Nested brackets and strings are skipped whole, so a comma seen here is between arguments.
  for (let i = open + 1; i < end - 1; i += 1) {
    const c = src[i];
    if (c === '"' || c === "'" || c === "`" || c === "(" || c === "[" || c === "{") {
      i = c === "(" || c === "[" || c === "{" ? close(src, i) - 1 : skipString(src, i);
      continue;
    }
    if (c === ",") return src.slice(i + 1, end - 1).trim() !== "";
  }
  return false;
}

function skipString(src: string, start: number): number {
  const quote = src[start];
  if (quote === "`") return close(`(${src.slice(start)}`, 0) > 0 ? start + templateLength(src, start) : start;
  let i = start + 1;
  for (; src[i] !== quote; i += 1) if (src[i] === "\\") i += 1;
  return i;
}

function templateLength(src: string, start: number): number {
  let i = start + 1;
  for (; src[i] !== "`"; i += 1) {
    if (src[i] === "\\") i += 1;
    else if (src[i] === "$" && src[i + 1] === "{") i = close(src, i + 1) - 1;
  }
  return i - start;
}

describe("conformance kit assertions", () => {
  it("every expect( in src/testing/conformance has a message", () => {
    const missing: string[] = [];
    let seen = 0;
    for (const file of readdirSync(KIT).filter((name) => name.endsWith(".ts"))) {
      const src = readFileSync(join(KIT, file), "utf8");
      for (const match of src.matchAll(/(?<![\w.])expect\(/g)) {
        const open = match.index + match[0].length - 1;
        seen += 1;
        if (!hasMessage(src, open, close(src, open))) missing.push(`${file}:${String(src.slice(0, open).split("\n").length)}`);
      }
    }
    expect(seen, "the scan found the kit's assertions").toBeGreaterThan(400);
    expect(missing, "kit assertions without a message (add one: expect(value, \"what and why\"))").toEqual([]);
  });
});

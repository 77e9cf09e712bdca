/**
 * `pnpm check:docs-built` (part of `pnpm check:package`, after the build): every TypeScript block in
 * the README and docs that test/docs-blocks.test.ts type-checks against the sources is type-checked
 * again against the built package, resolved as a user's import is (the package's own name through
 * package.json's `exports` to dist/*.d.ts), so a block that imports a subpath the package does not
 * export, or a name its declarations lack, fails here.
 */
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { compileBlocks, extractBlocks } from "../test/support/docs-blocks.js";

const root = fileURLToPath(new URL("..", import.meta.url));
if (!existsSync(join(root, "dist", "index.d.ts"))) {
  console.error("check-docs-built: dist/ is missing; run `pnpm build` first");
  process.exit(1);
}
const files = [
  "README.md",
  ...readdirSync(join(root, "docs"))
    .filter((name) => name.endsWith(".md"))
    .sort()
    .map((name) => `docs/${name}`),
];
const blocks = files.flatMap((file) => extractBlocks(root, file));
const results = compileBlocks(root, blocks, join(root, "scripts", "docs-built.tsconfig.json"));
const problems = [...results.values()].flat();
if (problems.length > 0) {
  console.error(`check-docs-built: ${String(problems.length)} problem(s) against dist/:\n${problems.join("\n")}`);
  process.exit(1);
}
console.log(`check-docs-built: ${String(results.size)} blocks type-check against the built package`);

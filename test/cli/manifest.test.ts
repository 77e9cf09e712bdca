/**
 * The CLI's inventory commands, in-process through `main`: `manifest` prints a module's tool
 * manifest, `compare` compares a reviewed manifest with another or with a module's running
 * configuration, exiting 5 on drift. No store is opened.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import { parseToolManifest, type ToolManifest } from "arkah-agent-guardrails";
import { EXIT } from "../../src/cli/commands.js";
import { main } from "../../src/cli/main.js";

const MODULE = fileURLToPath(new URL("./fixtures/inventory-module.ts", import.meta.url));
const ROOT = fileURLToPath(new URL("../..", import.meta.url));

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tempFile(name: string, text: string): string {
  const dir = mkdtempSync(join(tmpdir(), "arkah-manifest-test-"));
  dirs.push(dir);
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

async function cli(argv: readonly string[]) {
  let stdout = "";
  let stderr = "";
  const code = await main(argv, { out: (text) => void (stdout += text), err: (text) => void (stderr += text), env: {} });
  return { code, stdout, stderr };
}

async function printed(args: readonly string[] = []): Promise<ToolManifest> {
  const run = await cli(["manifest", "--module", MODULE, ...args]);
  expect(run).toMatchObject({ code: EXIT.ok, stderr: "" });
  return parseToolManifest(JSON.parse(run.stdout));
}

describe("manifest", () => {
  it("prints the module's governed tools, sorted by name, with kinds and fingerprints, as a valid manifest", async () => {
    const manifest = await printed();
    expect(manifest.tools.map(({ name, kind }) => [name, kind])).toEqual([
      ["edit_note", "mutation"],
      ["read_note", "document-read"],
    ]);
    for (const entry of manifest.tools) expect(entry.fingerprint).toMatch(/^[0-9a-f]{64}$/);
  });

  it("--export picks another export (a function returning { guardrails, tools }); a substituted body has another fingerprint", async () => {
    const reviewed = await printed();
    const variant = await printed(["--export", "variant"]);
    expect(variant.tools.find((entry) => entry.name === "edit_note")?.fingerprint).not.toBe(
      reviewed.tools.find((entry) => entry.name === "edit_note")?.fingerprint,
    );
    expect(variant.tools.find((entry) => entry.name === "read_note")).toEqual(reviewed.tools.find((entry) => entry.name === "read_note"));
  });

  it("usage errors: no --module, a store flag, an export that is missing or not { guardrails, tools }", async () => {
    expect(await cli(["manifest"])).toMatchObject({ code: EXIT.usage, stderr: expect.stringContaining("--module PATH is required") as string });
    expect(await cli(["--sqlite", "x.db", "manifest", "--module", MODULE])).toMatchObject({
      code: EXIT.usage,
      stderr: expect.stringContaining("manifest reads no store") as string,
    });
    expect((await cli(["manifest", "--module", MODULE, "--export", "nothing"])).stderr).toContain('has no export named "nothing"');
    expect(await cli(["manifest", "--module", MODULE, "--export", "broken"])).toMatchObject({
      code: EXIT.usage,
      stderr: expect.stringContaining("must be { guardrails, tools }") as string,
    });
    expect((await cli(["manifest", "--module", join(tmpdir(), "no-such-module.js")])).code).toBe(EXIT.failure);
  });
});

describe("help", () => {
  it("lists both commands and exit code 5; each has its own help", async () => {
    const global = await cli(["--help"]);
    expect(global.stdout).toMatch(/\n {2}manifest {4}print the tool manifest of a module's guardrails \(no store\)/);
    expect(global.stdout).toMatch(/\n {2}5 {2}drift \(compare/);
    expect((await cli(["manifest", "--help"])).stdout).toContain("arkah-guardrails manifest --module PATH [--export NAME]");
    expect((await cli(["compare", "--help"])).stdout).toContain("arkah-guardrails compare --expected FILE --actual FILE");
  });
});

describe("compare", () => {
  it("a manifest against the module it was printed from: match, exit 0", async () => {
    const expected = tempFile("reviewed.json", JSON.stringify(await printed()));
    const run = await cli(["compare", "--expected", expected, "--module", MODULE]);
    expect(run).toMatchObject({ code: EXIT.ok, stdout: "the tools match the reviewed manifest (2 tools)\n" });
  });

  it("a substituted body: the fingerprint drift is printed, exit 5", async () => {
    const expected = tempFile("reviewed.json", JSON.stringify(await printed()));
    const run = await cli(["compare", "--expected", expected, "--module", MODULE, "--export", "variant"]);
    expect(run.code).toBe(EXIT.drift);
    expect(run.stdout).toMatch(/^edit_note: fingerprint changed from [0-9a-f]{64} to [0-9a-f]{64}/);
  });

  it("two manifest files: missing, extra and kind changes, each on its own line, exit 5", async () => {
    const reviewed = await printed();
    const [edit, read] = reviewed.tools;
    if (edit === undefined || read === undefined) throw new Error("two tools expected");
    const actual = { ...reviewed, tools: [{ ...edit, kind: "auxiliary" }, { ...read, name: "peek_note" }] };
    const run = await cli(["compare", "--expected", tempFile("a.json", JSON.stringify(reviewed)), "--actual", tempFile("b.json", JSON.stringify(actual))]);
    expect(run.code).toBe(EXIT.drift);
    expect(run.stdout.trim().split("\n")).toEqual([
      "edit_note: kind changed from mutation to auxiliary",
      "peek_note: extra (document-read, not in the reviewed manifest)",
      "read_note: missing (reviewed as document-read, not exposed or not governed)",
    ]);
  });

  it("usage errors: no --expected, both or neither of --actual and --module, a file that is not a manifest", async () => {
    const good = tempFile("a.json", JSON.stringify(await printed()));
    expect((await cli(["compare", "--actual", good])).stderr).toContain("--expected FILE is required");
    expect((await cli(["compare", "--expected", good])).stderr).toContain("give exactly one of --actual FILE or --module PATH");
    expect((await cli(["compare", "--expected", good, "--actual", good, "--module", MODULE])).code).toBe(EXIT.usage);
    const bad = tempFile("bad.json", JSON.stringify({ format: "arkah.tool-manifest", version: 3, tools: [] }));
    expect(await cli(["compare", "--expected", bad, "--actual", good])).toMatchObject({
      code: EXIT.usage,
      stderr: expect.stringContaining("is not a tool manifest") as string,
    });
    expect((await cli(["compare", "--expected", tempFile("x.json", "{"), "--actual", good])).stderr).toContain("is not JSON");
  });
});

describe("a zod tool's schema changed in what its JSON Schema cannot show", () => {
  // Each variant of the fixture's reviewed zod schema: same JSON Schema, another parse.
  const VARIANTS = {
    zodLoose: ".loose() (passthrough): unknown keys reach the body",
    zodTransform: "a transform: the body receives another value",
    zodNoRefine: "a refinement dropped: a body the reviewed tool refuses is accepted",
    zodCatchall: "a catchall: unknown keys of that type reach the body",
    zodCoerce: "coercion: a number becomes a string id",
  } as const;

  for (const [exported, change] of Object.entries(VARIANTS)) {
    it(`compare --module reports the edit tool's fingerprint drift, exit 5: ${change}`, async () => {
      const expected = tempFile("reviewed.json", JSON.stringify(await printed(["--export", "zod"])));
      const run = await cli(["compare", "--expected", expected, "--module", MODULE, "--export", exported]);
      expect(run.code).toBe(EXIT.drift);
      expect(run.stdout).toMatch(/^edit_note: fingerprint changed from [0-9a-f]{64} to [0-9a-f]{64}/);
      expect(run.stdout).not.toContain("read_note");
    });
  }

  it("the same schema built again, here or in another process, has the same fingerprint", async () => {
    const reviewed = await printed(["--export", "zod"]);
    const expected = tempFile("reviewed.json", JSON.stringify(reviewed));
    expect(await cli(["compare", "--expected", expected, "--module", MODULE, "--export", "zodAgain"])).toMatchObject({ code: EXIT.ok });
    // A manifest pinned in CI must match the deployed server's: two Node processes print the same
    // one (both through tsx: vitest transforms the sources, so the bodies' source text differs here).
    const print = async () => {
      const args = ["--import", "tsx", "src/cli/index.ts", "manifest", "--module", MODULE, "--export", "zod"];
      return parseToolManifest(JSON.parse((await promisify(execFile)(process.execPath, args, { cwd: ROOT })).stdout));
    };
    const [ci, deployed] = await Promise.all([print(), print()]);
    expect(deployed).toEqual(ci);
    expect(ci.tools.map(({ name }) => name)).toEqual(["edit_note", "read_note"]);
  });

  it("a version 1 manifest (fingerprints that did not see the parse) is refused with a message to re-pin, exit 2", async () => {
    const current = await printed(["--export", "zod"]);
    const old = tempFile("old.json", JSON.stringify({ ...current, version: 1 }));
    const run = await cli(["compare", "--expected", old, "--module", MODULE, "--export", "zod"]);
    expect(run.code).toBe(EXIT.usage);
    expect(run.stderr).toContain("version 1 holds fingerprints of an older format that did not see the zod parse");
    expect(run.stderr).toContain("re-pin: print the manifest again (report().manifest or arkah-guardrails manifest)");
    expect(run.stdout).toBe("");
  });
});

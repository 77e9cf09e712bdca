/**
 * The parts of examples/file-store under the store: key names, the directory lock and the redo
 * journal, each on a real directory.
 */
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fc, test as property } from "@fast-check/vitest";
import { afterEach, describe, expect, it } from "vitest";
import { StoreContractError } from "arkah-agent-guardrails/store";
import { FileDirectory, type CommitPoint } from "../../examples/file-store/files.js";
import { acquireLock, BOOT_ID, FileStoreLockError } from "../../examples/file-store/lock.js";
import { escapeKey, fileName, MAX_ESCAPED, parseFileName, unescapeKey } from "../../examples/file-store/names.js";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "arkah-file-parts-"));
  dirs.push(dir);
  return dir;
}

/** A process id that was in use a moment ago and is not any more. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ["-e", ""]);
  if (child.pid === undefined) throw new Error("could not start a child process");
  return child.pid;
}

/** Any string, lone surrogates included: arrays of arbitrary UTF-16 code units. */
const anyString = fc.array(fc.integer({ min: 0, max: 0xffff }), { maxLength: 80 }).map((units) => String.fromCharCode(...units));
const SAFE_NAME = /^(k[a-z0-9_%-]*|h[0-9a-f]{64})$/;

describe("file-store names", () => {
  property.prop([anyString])("every key has a safe, reversible name", (key) => {
    const name = fileName(key);
    expect(name, `name of ${JSON.stringify(key)}`).toMatch(SAFE_NAME);
    expect(name.length).toBeLessThanOrEqual(MAX_ESCAPED + 1);
    expect(unescapeKey(escapeKey(key))).toBe(key);
    expect(parseFileName(name)).toEqual({ type: "key", key });
  });

  property.prop([anyString, anyString])("distinct keys get distinct names, also ignoring case", (a, b) => {
    fc.pre(a !== b);
    expect(fileName(a).toLowerCase()).not.toBe(fileName(b).toLowerCase());
  });

  it("names the keys that trip naive encodings apart", () => {
    const keys = ["", ".", "..", "/", "a/b", "a%2fb", "A", "a", "\u0000", "\ud800", "\udc00", "\ud800\udc00", "\u{1f600}", "%", "%0061"];
    const names = keys.map(fileName);
    expect(new Set(names).size).toBe(keys.length);
    for (const name of names) expect(name).toMatch(SAFE_NAME);
    expect(fileName("\ud800")).toBe("k%d800");
  });

  it("hashes long keys after escaping: lone surrogates hashed as UTF-8 would collide, escaped they do not", () => {
    const a = `${"x".repeat(300)}\ud800`;
    const b = `${"x".repeat(300)}\udbff`;
    // The bug this avoids: UTF-8 turns every lone surrogate into U+FFFD.
    expect(createHash("sha256").update(a).digest("hex")).toBe(createHash("sha256").update(b).digest("hex"));
    expect(fileName(a)).toMatch(/^h[0-9a-f]{64}$/);
    expect(fileName(a)).not.toBe(fileName(b));
    expect(parseFileName(fileName(a))).toEqual({ type: "hashed" });
  });

  it("does not take a temporary file or a non-canonical spelling for a record", () => {
    expect(parseFileName("tkabc")).toEqual({ type: "other" });
    expect(parseFileName("k%0061")).toEqual({ type: "other" });
    expect(parseFileName("kA")).toEqual({ type: "other" });
    expect(parseFileName("k%zz00")).toEqual({ type: "other" });
  });
});

describe("file-store lock", () => {
  it("is exclusive: a second taker waits, and gives up after its timeout naming the holder", async () => {
    const path = join(tempDir(), "lock");
    const held = await acquireLock(path, 1_000);
    const error: unknown = await acquireLock(path, 0).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(FileStoreLockError);
    expect((error as Error).message).toContain(`process ${String(process.pid)} holds it and is still running`);
    await held.release();
    const again = await acquireLock(path, 0);
    await again.release();
    expect(existsSync(path)).toBe(false);
  });

  it("a waiting taker gets the lock once it is released", async () => {
    const path = join(tempDir(), "lock");
    const first = await acquireLock(path, 1_000);
    const order: string[] = [];
    const second = acquireLock(path, 60_000).then((lock) => {
      order.push("second");
      return lock;
    });
    order.push("released");
    await first.release();
    await (await second).release();
    expect(order).toEqual(["released", "second"]);
  });

  it("takes over a lock whose holder died", async () => {
    const path = join(tempDir(), "lock");
    writeFileSync(path, `${String(deadPid())} ${BOOT_ID} deadbeef`);
    const lock = await acquireLock(path, 0);
    expect(readFileSync(path, "utf8")).toContain(`${String(process.pid)} ${BOOT_ID} `);
    await lock.release();
  });

  it("takes over a lock left before a reboot, even when its pid is alive now", async () => {
    const path = join(tempDir(), "lock");
    writeFileSync(path, `${String(process.pid)} another-boot deadbeef`);
    const lock = await acquireLock(path, 0);
    await lock.release();
  });

  it("takes over a lock whose breaker died too", async () => {
    const path = join(tempDir(), "lock");
    writeFileSync(path, `${String(deadPid())} ${BOOT_ID} deadbeef`);
    writeFileSync(`${path}.break.deadbeef`, `${String(deadPid())} ${BOOT_ID} cafe`);
    const lock = await acquireLock(path, 0);
    expect(readdirSync(join(path, "..")).sort()).toEqual(["lock"]);
    await lock.release();
  });

  it("never removes a lock held by a live process, and refuses a lock file it did not write", async () => {
    const dir = tempDir();
    const path = join(dir, "lock");
    writeFileSync(path, `${String(process.pid)} ${BOOT_ID} live`);
    await expect(acquireLock(path, 0)).rejects.toThrow(FileStoreLockError);
    expect(readFileSync(path, "utf8")).toBe(`${String(process.pid)} ${BOOT_ID} live`);
    writeFileSync(path, "garbage");
    await expect(acquireLock(path, 0)).rejects.toThrow(/not one this store wrote/);
  });

  it("16 concurrent takers hold it one at a time", async () => {
    const path = join(tempDir(), "lock");
    let inside = 0;
    let most = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        const lock = await acquireLock(path, 60_000);
        inside += 1;
        most = Math.max(most, inside);
        await new Promise((resolve) => setImmediate(resolve));
        inside -= 1;
        await lock.release();
      }),
    );
    expect(most).toBe(1);
  });
});

describe("file-store journal", () => {
  async function opened(): Promise<FileDirectory> {
    const directory = new FileDirectory(tempDir());
    await directory.create();
    return directory;
  }

  it("commits a batch: puts and deletes, read back by key, listed in UTF-16 order", async () => {
    const directory = await opened();
    await directory.commit(
      [
        { collection: "c", key: "b", json: JSON.stringify(2) },
        { collection: "c", key: "\ud800", json: JSON.stringify("lone") },
        { collection: "c", key: "a/..", json: JSON.stringify({ nested: [null] }) },
        { collection: "c", key: "x".repeat(400), json: JSON.stringify(true) },
      ],
      undefined,
    );
    await directory.commit([{ collection: "c", key: "b", json: null }], undefined);
    expect(await directory.read("c", "b")).toBeUndefined();
    expect(await directory.read("c", "\ud800")).toBe("lone");
    expect(await directory.read("c", "a/..")).toEqual({ nested: [null] });
    expect(await directory.keys("c")).toEqual(["a/..", "x".repeat(400), "\ud800"]);
    expect(await directory.keys("none")).toEqual([]);
    expect(existsSync(join(directory.root, "journal"))).toBe(false);
  });

  it("a commit cut off after its journal is durable is applied in full by the next recovery", async () => {
    const directory = await opened();
    await directory.commit([{ collection: "c", key: "old", json: JSON.stringify(1) }], undefined);
    const points: CommitPoint[] = [];
    const crash = new Error("crash");
    const writes = [
      { collection: "c", key: "a", json: JSON.stringify(1) },
      { collection: "c", key: "old", json: null },
      { collection: "d", key: "b", json: JSON.stringify(2) },
    ];
    await expect(
      directory.commit(writes, (point) => {
        points.push(point);
        if (point.point === "applied") throw crash;
      }),
    ).rejects.toBe(crash);
    // Half applied on disk: the first write, not the others.
    expect(points).toEqual([{ point: "journaled" }, { point: "applied", done: 1, of: 3 }]);
    expect(await directory.read("c", "a")).toBe(1);
    expect(await directory.read("c", "old")).toBe(1);

    const reopened = new FileDirectory(directory.root);
    expect(await reopened.recover()).toBe(true);
    expect(await reopened.read("c", "a")).toBe(1);
    expect(await reopened.read("c", "old")).toBeUndefined();
    expect(await reopened.read("d", "b")).toBe(2);
    expect(await reopened.recover()).toBe(false);
  });

  it("a single write needs no journal: it is applied directly", async () => {
    const directory = await opened();
    const points: CommitPoint[] = [];
    await directory.commit([{ collection: "c", key: "a", json: "1" }], (point) => {
      points.push(point);
    });
    expect(points).toEqual([]);
    expect(await directory.read("c", "a")).toBe(1);
    expect(readdirSync(directory.root).sort()).toEqual(["data"]);
  });

  it("a commit cut off before its journal was renamed leaves nothing", async () => {
    const directory = await opened();
    writeFileSync(join(directory.root, "journal.tmp"), '{"v":1,"writes":[["kc","ka","{\\"key\\":\\"a\\",\\"value\\":1}"]]');
    expect(await directory.recover()).toBe(false);
    expect(await directory.read("c", "a")).toBeUndefined();
  });

  it("fails closed on a damaged journal, a journal reaching outside its directory, and a record filed under another key", async () => {
    const directory = await opened();
    writeFileSync(join(directory.root, "journal"), "{not json");
    await expect(directory.recover()).rejects.toThrow(StoreContractError);
    writeFileSync(join(directory.root, "journal"), JSON.stringify({ v: 1, writes: [["..", "kx", "{}"]] }));
    await expect(directory.recover()).rejects.toThrow(/damaged/);
    rmSync(join(directory.root, "journal"));

    await directory.writeRaw("c", "a", JSON.stringify({ key: "b", value: 1 }));
    await expect(directory.read("c", "a")).rejects.toThrow(/another key/);
    await directory.writeRaw("c", "a", "{");
    await expect(directory.read("c", "a")).rejects.toThrow(/not JSON/);
    await directory.writeRaw("c", "a", JSON.stringify({ key: "a" }));
    await expect(directory.read("c", "a")).rejects.toThrow(/not a record/);
  });
});

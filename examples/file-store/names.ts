/**
 * File names for keys. A key is any JavaScript string: UTF-16 code units, lone surrogates, "/",
 * "..", NUL and the empty string included. Every key must map to its own file name, and that name
 * must be safe on every common file system: no "/" or NUL, never "." or "..", not too long, and
 * distinct even where names are case-insensitive (macOS, Windows).
 *
 * So a key is escaped code unit by code unit, never transcoded: `[a-z0-9_-]` stay as they are and
 * every other UTF-16 code unit becomes `%` and its four lowercase hex digits ("A" is `%0041`,
 * "/" is `%002f`, a lone surrogate U+D800 is `%d800`). Escaping is injective (the `%` itself is
 * escaped), so distinct keys get distinct names, and it is reversible, so `scan` can list keys from
 * names. The name is `k` + the escaped key; an escaped key longer than {@link MAX_ESCAPED} units
 * is named `h` + the SHA-256 of its escaped form (hashed after escaping, so the hash never sees a
 * lone surrogate: hashing the raw string would encode it as UTF-8, where every lone surrogate
 * becomes U+FFFD and distinct keys collide). The file also holds its key, so a hashed name is
 * listed by reading the file, and a file found under a name that is not its key's fails closed.
 */
import { createHash } from "node:crypto";

/** Escaped keys up to this length are spelled out in the name; longer ones are hashed (ext4, APFS and NTFS allow 255). */
export const MAX_ESCAPED = 200;

const PLAIN = /^[a-z0-9_-]$/;

/** `key` escaped as described above: ASCII, reversible. */
export function escapeKey(key: string): string {
  let escaped = "";
  for (let index = 0; index < key.length; index++) {
    const unit = key.charCodeAt(index);
    const char = key[index] ?? "";
    escaped += unit < 128 && PLAIN.test(char) ? char : `%${unit.toString(16).padStart(4, "0")}`;
  }
  return escaped;
}

/** The key an escaped name spells, or undefined if `escaped` is not something `escapeKey` produces. */
export function unescapeKey(escaped: string): string | undefined {
  let key = "";
  let index = 0;
  while (index < escaped.length) {
    const char = escaped[index] ?? "";
    if (char === "%") {
      const hex = escaped.slice(index + 1, index + 5);
      if (!/^[0-9a-f]{4}$/.test(hex)) return undefined;
      const unit = Number.parseInt(hex, 16);
      // Canonical only: a plain character escaped would be a second name for the same key.
      if (unit < 128 && PLAIN.test(String.fromCharCode(unit))) return undefined;
      key += String.fromCharCode(unit);
      index += 5;
    } else if (PLAIN.test(char)) {
      key += char;
      index += 1;
    } else {
      return undefined;
    }
  }
  return key;
}

/** The file name a key (or a collection name) is stored under. */
export function fileName(key: string): string {
  const escaped = escapeKey(key);
  return escaped.length <= MAX_ESCAPED ? `k${escaped}` : `h${createHash("sha256").update(escaped, "ascii").digest("hex")}`;
}

/**
 * What a directory entry is: a spelled-out key (`key`), a hashed one whose key is inside the file
 * (`hashed`), or not a record (a temporary file of an interrupted write, anything else).
 */
export type EntryName = { readonly type: "key"; readonly key: string } | { readonly type: "hashed" } | { readonly type: "other" };

export function parseFileName(name: string): EntryName {
  if (name.startsWith("k")) {
    const key = unescapeKey(name.slice(1));
    return key === undefined || name.length - 1 > MAX_ESCAPED ? { type: "other" } : { type: "key", key };
  }
  return /^h[0-9a-f]{64}$/.test(name) ? { type: "hashed" } : { type: "other" };
}

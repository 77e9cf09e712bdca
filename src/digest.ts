/**
 * RFC 8785 (JSON Canonicalization Scheme) serialization and SHA-256 digests of JSON values.
 *
 * A digest is only useful if every party computes the same bytes, including services written in
 * other languages. So anything `JSON.stringify` would silently drop, rewrite or invent (undefined,
 * NaN, Dates, getters, holes, lone surrogates...) is rejected with a `DigestError` naming the JSON
 * path, instead of being hashed in some lossy form.
 */
import { createHash, type Hash } from "node:crypto";
import { errorBrand } from "./errors.js";

/** A JSON value was not plain, lossless JSON data. `path` is e.g. `$.items[2].title`. */
export class DigestError extends Error {
  readonly code = "unsupported_value";
  readonly path: string;

  constructor(path: string, problem: string) {
    super(`Cannot digest the value at ${path}: ${problem}.`);
    this.path = path;
    errorBrand.brand(this, "DigestError");
  }

  static isInstance(error: unknown): error is DigestError {
    return errorBrand.hasBrand(error, "DigestError");
  }
}

/** Lowercase hex SHA-256 of the UTF-8 encoding of `text`. */
export function sha256Hex(text: string): string {
  // Strings are hashed as UTF-8 by default; passing "utf8" explicitly takes a slower path in Node.
  return createHash("sha256").update(text).digest("hex");
}

/** The RFC 8785 canonical JSON text of `value`. Throws `DigestError` for non-JSON values. */
export function canonicalJson(value: unknown): string {
  const writer = newWriter(undefined);
  writeValue(value, writer, 0);
  return writer.out;
}

/** Lowercase hex SHA-256 of the UTF-8 bytes of `canonicalJson(value)`. */
export function digest(value: unknown): string {
  const hash = createHash("sha256");
  const writer = newWriter(hash);
  writeValue(value, writer, 0);
  return hash.update(writer.out).digest("hex");
}

// ---------------------------------------------------------------------------------------------
// Serializer: one recursive pass that validates and appends to one string. V8 appends to a string
// by building a rope, which is cheap, but turning a rope into the flat string the hash needs gets
// expensive once the result is large (over ~128 KiB V8 allocates it as a large object). So
// `digest` hands the hash each chunk of about `CHUNK` characters as soon as it is complete.

/** Per-call state; kept out of module scope so a re-entrant call (e.g. from a Proxy trap) is safe. */
interface Writer {
  /** The output not yet handed to `hash` (for `canonicalJson`: all of it). */
  out: string;
  /** Where complete chunks go; undefined to keep everything in `out`. */
  readonly hash: Hash | undefined;
  /** `out` is handed to `hash` once longer than this. */
  readonly chunk: number;
  /** `ancestors[i]` is the object at depth `i` of the current path, for cycle detection. */
  readonly ancestors: object[];
  /** `path[i]` is the key or index taken at depth `i`; only read to format an error. */
  readonly path: (string | number)[];
}

/** Characters per chunk handed to the hash: far below V8's large-object size, big enough to amortize. */
const CHUNK = 16 * 1024;

/** Up to this length a string is scanned in JavaScript; longer ones are left to native code. */
const SHORT_STRING = 64;

const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;

function newWriter(hash: Hash | undefined): Writer {
  return { out: "", hash, chunk: hash === undefined ? Infinity : CHUNK, ancestors: [], path: [] };
}

/** Hands the pending output to the hash once it is a full chunk. */
function flush(writer: Writer): void {
  if (writer.out.length > writer.chunk && writer.hash !== undefined) {
    writer.hash.update(writer.out);
    writer.out = "";
  }
}

function writeValue(value: unknown, writer: Writer, depth: number): void {
  switch (typeof value) {
    case "string": {
      const text = quote(value, writer, depth);
      if (text.length > writer.chunk && writer.hash !== undefined) {
        // A long string goes to the hash as is: appending it first would copy it again.
        writer.hash.update(writer.out);
        writer.hash.update(text);
        writer.out = "";
      } else {
        writer.out += text;
      }
      return;
    }
    case "number":
      // Number#toString is exactly the RFC 8785 number format, and prints -0 as "0".
      if (Number.isFinite(value)) {
        writer.out += String(value);
        return;
      }
      throw fail(writer, depth, `${String(value)} is not a JSON number`);
    case "boolean":
      writer.out += value ? "true" : "false";
      return;
    case "object":
      if (value === null) writer.out += "null";
      else if (Array.isArray(value)) writeArray(value, writer, depth);
      else writeObject(value, writer, depth);
      return;
    case "undefined":
      throw fail(writer, depth, "undefined is not a JSON value");
    case "bigint":
      throw fail(writer, depth, "a bigint is not a JSON number (convert it to a string)");
    default:
      throw fail(writer, depth, `a ${typeof value} is not a JSON value`);
  }
}

function quote(text: string, writer: Writer, depth: number): string {
  // Short strings (keys, ids, titles) are scanned inline: cheaper than a regex or isWellFormed
  // call. Nothing to escape and no surrogate means the JSON string is the text between quotes.
  if (text.length <= SHORT_STRING) {
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c < 0x20 || c === 0x22 || c === 0x5c || (c & 0xf800) === 0xd800) return quoteSlow(text, writer, depth);
    }
    return `"${text}"`;
  }
  return quoteSlow(text, writer, depth);
}

function quoteSlow(text: string, writer: Writer, depth: number): string {
  // Lone surrogates cannot be encoded as UTF-8, so other implementations cannot hash them alike.
  // (The ES2023 lib typings lack isWellFormed; Node 20 has it, and it is O(1) for Latin-1 strings.)
  if (!(text as unknown as { isWellFormed(): boolean }).isWellFormed()) {
    throw fail(writer, depth, "the string contains a lone UTF-16 surrogate");
  }
  // Escapes exactly like JSON.stringify, because it is JSON.stringify.
  return JSON.stringify(text);
}

/** Cycle check: the same object already on the current path. Shared, acyclic references are fine. */
function enter(node: object, writer: Writer, depth: number): void {
  const { ancestors } = writer;
  // A linear scan, like V8's own JSON.stringify: paths are short, and no allocation per object.
  for (let i = 0; i < depth; i++) {
    if (ancestors[i] === node) {
      throw fail(writer, depth, `circular reference to ${formatPath(writer.path, i)}`);
    }
  }
  ancestors[depth] = node;
}

function writeObject(node: object, writer: Writer, depth: number): void {
  const proto: unknown = Object.getPrototypeOf(node);
  if (proto !== Object.prototype && proto !== null) {
    throw fail(writer, depth, `${describeObject(node)} is not a plain object or array`);
  }
  enter(node, writer, depth);
  // getOwnPropertyNames (not Object.keys) so non-enumerable properties are seen, not skipped.
  const keys = Object.getOwnPropertyNames(node);
  if (Object.getOwnPropertySymbols(node).length !== 0) {
    throw fail(writer, depth, `symbol-keyed property ${String(Object.getOwnPropertySymbols(node)[0])}`);
  }
  sortKeys(keys);

  let separator = "{";
  for (const key of keys) {
    writer.path[depth] = key;
    // The descriptor reveals getters without calling them, and carries the value.
    const property = Object.getOwnPropertyDescriptor(node, key);
    if (property === undefined || !("value" in property)) {
      throw fail(writer, depth + 1, "accessor (getter/setter) property");
    }
    if (property.enumerable !== true) throw fail(writer, depth + 1, "non-enumerable property");
    writer.out += separator + quote(key, writer, depth + 1) + ":";
    writeValue(property.value, writer, depth + 1);
    flush(writer);
    separator = ",";
  }
  writer.out += separator === "{" ? "{}" : "}";
}

function writeArray(node: unknown[], writer: Writer, depth: number): void {
  if (Object.getPrototypeOf(node) !== Array.prototype) {
    throw fail(writer, depth, `${describeObject(node)} (an Array subclass) is not a plain array`);
  }
  enter(node, writer, depth);
  const length = node.length;
  // A plain array's own keys are its indices plus "length"; anything else (a named property
  // JSON.stringify would drop, a symbol) or anything missing (a hole) changes the count.
  if (Reflect.ownKeys(node).length !== length + 1) throw explainArrayKeys(node, writer, depth);

  writer.out += "[";
  for (let i = 0; i < length; i++) {
    writer.path[depth] = i;
    const element = Object.getOwnPropertyDescriptor(node, i);
    if (element === undefined) throw fail(writer, depth + 1, "hole in a sparse array");
    if (!("value" in element)) throw fail(writer, depth + 1, "accessor (getter/setter) element");
    if (element.enumerable !== true) throw fail(writer, depth + 1, "non-enumerable element");
    if (i !== 0) writer.out += ",";
    writeValue(element.value, writer, depth + 1);
    flush(writer);
  }
  writer.out += "]";
}

/** Error path only: says which of the array's own keys is unexpected or missing. */
function explainArrayKeys(node: unknown[], writer: Writer, depth: number): DigestError {
  for (const key of Reflect.ownKeys(node)) {
    if (typeof key === "symbol") return fail(writer, depth, `symbol-keyed property ${String(key)} on an array`);
    // Array indices are the canonical integer strings below 2 ** 32 - 1.
    if (key !== "length" && (String(Number(key) >>> 0) !== key || key === "4294967295")) {
      return fail(writer, depth, `named property ${JSON.stringify(key)} on an array`);
    }
  }
  for (let i = 0; i < node.length; i++) {
    if (!Object.hasOwn(node, i)) {
      writer.path[depth] = i;
      return fail(writer, depth + 1, "hole in a sparse array");
    }
  }
  return fail(writer, depth, "unexpected own properties on an array");
}

/**
 * RFC 8785 orders members by UTF-16 code units: the default sort order, and what `<` compares.
 * Small objects (most tool arguments) are insertion-sorted, which beats `Array#sort`'s setup cost
 * and is O(n) when already sorted. Larger ones are checked in O(n) before paying O(n log n).
 */
function sortKeys(keys: string[]): void {
  if (keys.length <= 16) {
    // Insertion sort in place. Writes only go to positions already visited, so iterating is safe.
    let sorted = 0;
    for (const key of keys) {
      let j = sorted++;
      while (j > 0) {
        const previous = keys[j - 1];
        if (previous === undefined || previous <= key) break;
        keys[j--] = previous;
      }
      keys[j] = key;
    }
    return;
  }
  let previous = "";
  for (const key of keys) {
    if (previous > key) {
      keys.sort();
      return;
    }
    previous = key;
  }
}

/** Error path only: "a Date instance", "a Point instance"... */
function describeObject(node: object): string {
  const name = (node as { constructor?: { name?: unknown } }).constructor?.name;
  if (typeof name !== "string" || name === "" || name === "Object") return "an object with a custom prototype";
  return `${/^[AEIOU]/.test(name) ? "an" : "a"} ${name} instance`;
}

function fail(writer: Writer, depth: number, problem: string): DigestError {
  return new DigestError(formatPath(writer.path, depth), problem);
}

/** `$`, then `.name`, `["odd name"]` or `[index]` for each of the first `depth` path steps. */
function formatPath(path: readonly (string | number)[], depth: number): string {
  let text = "$";
  for (let i = 0; i < depth; i++) {
    const step = path[i];
    if (typeof step === "number") text += `[${step}]`;
    else if (step !== undefined && IDENTIFIER.test(step)) text += `.${step}`;
    else text += `[${JSON.stringify(step)}]`;
  }
  return text;
}

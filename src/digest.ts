/**
 * RFC 8785 (JSON Canonicalization Scheme) serialization and SHA-256 digests of JSON values.
 *
 * A digest is only useful if every party computes the same bytes, including services written in
 * other languages. So anything `JSON.stringify` would silently drop, rewrite or invent (undefined,
 * NaN, Dates, getters, holes, lone surrogates...) is rejected with a `DigestError` naming the JSON
 * path, instead of being hashed in some lossy form.
 */
import * as crypto from "node:crypto";
import { types } from "node:util";
import { CodedError } from "./errors.js";

/** A JSON value was not plain, lossless JSON data. `path` is e.g. `$.items[2].title`. */
export class DigestError extends CodedError<"unsupported_value"> {
  protected static override readonly brandName: string = "DigestError";

  /** Where the value failed, as a JSON path from `$`. */
  readonly path: string;

  constructor(path: string, problem: string) {
    super("unsupported_value", `Cannot digest the value at ${path}: ${problem}.`);
    this.path = path;
  }
}

/**
 * `crypto.hash` (Node >= 20.12) hashes in one call, without a `Hash` object: about twice as fast as
 * `createHash` for small inputs, which is what most digests are. Older Node 20 lines lack it.
 */
const oneShotHash = (crypto as { hash?: (algorithm: string, data: string, encoding: "hex") => string }).hash;

/** Lowercase hex SHA-256 of the UTF-8 encoding of `text`. */
export function sha256Hex(text: string): string {
  if (oneShotHash !== undefined) return oneShotHash("sha256", text, "hex");
  // Strings are hashed as UTF-8 by default; passing "utf8" explicitly takes a slower path in Node.
  return crypto.createHash("sha256").update(text).digest("hex");
}

/** The RFC 8785 canonical JSON text of `value`. Throws `DigestError` for non-JSON values. */
export function canonicalJson(value: unknown): string {
  return writeValue(value, "", undefined, undefined);
}

/** Lowercase hex SHA-256 of the UTF-8 bytes of `canonicalJson(value)`. */
export function digest(value: unknown): string {
  const sink = new HashSink();
  const rest = writeValue(value, "", sink, undefined);
  return sink.hash === undefined ? sha256Hex(rest) : sink.hash.update(rest).digest("hex");
}

/** Receives the chunks of a large value; the `Hash` is only created if one comes. */
class HashSink {
  hash: crypto.Hash | undefined = undefined;

  write(text: string): void {
    (this.hash ??= crypto.createHash("sha256")).update(text);
  }
}

// ---------------------------------------------------------------------------------------------
// Serializer: one recursive pass that validates and appends to one string, returning it.
//
// V8 appends to a string by building a rope, which is cheap, but flattening a rope into the string
// the hash reads gets expensive once it is large (past ~128 KiB V8 allocates a large object). So
// `digest` passes a sink along, and complete chunks of about `CHUNK` characters go to it as soon
// as they are written; `canonicalJson` passes none and gets everything back.
//
// For small values allocation is much of the cost, so there is no per-call state besides the sink:
// the current path is a chain of `Frame`s, one per object or array being written.

/** An object or array on the current path: for cycle detection, and for error paths. */
interface Frame {
  readonly node: object;
  readonly parent: Frame | undefined;
  /** The member name or index being written. */
  key: string | number;
}

/** Characters per chunk handed to the sink: well below V8's large-object size, big enough to amortize. */
const CHUNK = 16 * 1024;

/** Up to this length a string is scanned in JavaScript; longer ones are left to native code. */
const SHORT_STRING = 64;

const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;

/** `parent` is the innermost object or array containing `value` (undefined at the root). */
function writeValue(value: unknown, out: string, sink: HashSink | undefined, parent: Frame | undefined): string {
  switch (typeof value) {
    case "string": {
      const text = quote(value, parent);
      if (sink === undefined || text.length <= CHUNK) return out + text;
      // A long string goes to the hash as is: appending it to `out` would only copy it again.
      if (out !== "") sink.write(out);
      sink.write(text);
      return "";
    }
    case "number":
      // Number#toString is exactly the RFC 8785 number format, and prints -0 as "0".
      if (Number.isFinite(value)) return out + String(value);
      throw fail(parent, `${String(value)} is not a JSON number`);
    case "boolean":
      return out + (value ? "true" : "false");
    case "object":
      if (value === null) return out + "null";
      return Array.isArray(value) ? writeArray(value, out, sink, parent) : writeObject(value, out, sink, parent);
    case "undefined":
      throw fail(parent, "undefined is not a JSON value");
    case "bigint":
      throw fail(parent, "a bigint is not a JSON number (convert it to a string)");
    default:
      throw fail(parent, `a ${typeof value} is not a JSON value`);
  }
}

/** Hands `out` to the sink once it is a full chunk; returns what is still pending. */
function flush(out: string, sink: HashSink | undefined): string {
  if (sink === undefined || out.length <= CHUNK) return out;
  sink.write(out);
  return "";
}

/** `frame` locates the string, for an error message (see `fail`). */
function quote(text: string, frame: Frame | undefined): string {
  // Short strings (keys, ids, titles) are scanned inline: cheaper than a regex or isWellFormed
  // call. Nothing to escape and no surrogate means the JSON string is the text between quotes.
  if (text.length <= SHORT_STRING) {
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c < 0x20 || c === 0x22 || c === 0x5c || (c & 0xf800) === 0xd800) return quoteSlow(text, frame);
    }
    return `"${text}"`;
  }
  return quoteSlow(text, frame);
}

function quoteSlow(text: string, frame: Frame | undefined): string {
  // Lone surrogates cannot be encoded as UTF-8, so other implementations cannot hash them alike.
  // (The ES2023 lib typings lack isWellFormed; Node 20 has it, and it is O(1) for Latin-1 strings.)
  if (!(text as unknown as { isWellFormed(): boolean }).isWellFormed()) {
    throw fail(frame, "the string contains a lone UTF-16 surrogate");
  }
  // Escapes exactly like JSON.stringify, because it is JSON.stringify.
  return JSON.stringify(text);
}

/** Pushes `node` on the path, refusing a cycle (a shared but acyclic reference is fine). */
function enter(node: object, parent: Frame | undefined): Frame {
  // A linear scan up the path, as V8's own JSON.stringify does: paths are short.
  for (let frame = parent; frame !== undefined; frame = frame.parent) {
    if (frame.node === node) throw fail(parent, `circular reference to ${formatPath(frame.parent)}`);
  }
  return { node, parent, key: "" };
}

function writeObject(node: object, out: string, sink: HashSink | undefined, parent: Frame | undefined): string {
  const proto: unknown = Object.getPrototypeOf(node);
  if (proto !== Object.prototype && proto !== null) {
    throw fail(parent, `${describeObject(node)} is not a plain object or array`);
  }
  const frame = enter(node, parent);
  // Object.keys, as JSON.stringify: non-enumerable properties are not part of a JSON value.
  // (getOwnPropertyNames would see them, but costs 3x more on large objects in dictionary mode.)
  const keys = Object.keys(node);
  if (Object.getOwnPropertySymbols(node).length !== 0) {
    throw fail(parent, `symbol-keyed property ${String(Object.getOwnPropertySymbols(node)[0])}`);
  }
  sortKeys(keys);

  let separator = "{";
  for (const key of keys) {
    frame.key = key;
    // The descriptor reveals getters without calling them, and carries the value.
    const property = Object.getOwnPropertyDescriptor(node, key);
    if (property === undefined || !("value" in property)) throw fail(frame, "accessor (getter/setter) property");
    out = flush(writeValue(property.value, out + (separator + quote(key, frame) + ":"), sink, frame), sink);
    separator = ",";
  }
  return out + (separator === "{" ? "{}" : "}");
}

function writeArray(node: unknown[], out: string, sink: HashSink | undefined, parent: Frame | undefined): string {
  if (Object.getPrototypeOf(node) !== Array.prototype) {
    throw fail(parent, `${describeObject(node)} (an Array subclass) is not a plain array`);
  }
  const frame = enter(node, parent);
  const length = node.length;
  // A plain array's own keys are its indices plus "length"; anything else (a named property
  // JSON.stringify would drop, a symbol) or anything missing (a hole) changes the count.
  if (Reflect.ownKeys(node).length !== length + 1) throw explainArrayKeys(node, frame);

  out += "[";
  for (let i = 0; i < length; i++) {
    frame.key = i;
    const element = Object.getOwnPropertyDescriptor(node, i);
    if (element === undefined) throw fail(frame, "hole in a sparse array");
    if (!("value" in element)) throw fail(frame, "accessor (getter/setter) element");
    if (element.enumerable !== true) throw fail(frame, "non-enumerable element");
    out = flush(writeValue(element.value, i === 0 ? out : out + ",", sink, frame), sink);
  }
  return out + "]";
}

/** Error path only: says which of the array's own keys is unexpected or missing. */
function explainArrayKeys(node: unknown[], frame: Frame): DigestError {
  for (const key of Reflect.ownKeys(node)) {
    if (typeof key === "symbol") return fail(frame.parent, `symbol-keyed property ${String(key)} on an array`);
    // Array indices are the canonical integer strings below 2 ** 32 - 1.
    if (key !== "length" && (String(Number(key) >>> 0) !== key || key === "4294967295")) {
      return fail(frame.parent, `named property ${JSON.stringify(key)} on an array`);
    }
  }
  for (let i = 0; i < node.length; i++) {
    if (!Object.hasOwn(node, i)) {
      frame.key = i;
      return fail(frame, "hole in a sparse array");
    }
  }
  return fail(frame.parent, "unexpected own properties on an array");
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

/** The offending value is at `frame.key` in `frame` (or is the root value, if `frame` is undefined). */
function fail(frame: Frame | undefined, problem: string): DigestError {
  return new DigestError(formatPath(frame), problem);
}

/** `$`, then `.name`, `["odd name"]` or `[index]` for each step from the root down to `frame`. */
function formatPath(frame: Frame | undefined): string {
  let steps = "";
  for (let step = frame; step !== undefined; step = step.parent) {
    const { key } = step;
    if (typeof key === "number") steps = `[${key}]${steps}`;
    else if (IDENTIFIER.test(key)) steps = `.${key}${steps}`;
    else steps = `[${JSON.stringify(key)}]${steps}`;
  }
  return `$${steps}`;
}

// ---------------------------------------------------------------------------------------------
// Copies of checked values

/** What `copyPlain` answers for anything but plain JSON data; never escapes `copyJson`. */
const NOT_PLAIN: unique symbol = Symbol("not plain JSON");

/**
 * A deep copy of a plain JSON value that shares no object with it, as `structuredClone` makes
 * one, at a fraction of its cost for the small argument objects of a tool call. Anything but
 * plain objects, plain arrays and JSON primitives (a proxy, a class instance, a function, a
 * symbol-keyed property) is left to `structuredClone` whole, so such a value is copied, or
 * refused, exactly as before.
 */
export function copyJson<T>(value: T): T {
  const copy = copyPlain(value);
  return copy === NOT_PLAIN ? structuredClone(value) : (copy as T);
}

function copyPlain(value: unknown): unknown {
  switch (typeof value) {
    case "string":
    case "number":
    case "boolean":
      return value;
    case "object":
      break;
    default:
      return NOT_PLAIN;
  }
  if (value === null) return null;
  if (types.isProxy(value)) return NOT_PLAIN;
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto === Array.prototype) {
    const array = value as readonly unknown[];
    // Named properties on an array (structuredClone keeps them) are not JSON: left to it.
    if (Object.keys(array).length !== array.length) return NOT_PLAIN;
    const copy: unknown[] = new Array<unknown>(array.length);
    for (let index = 0; index < array.length; index++) {
      if (!Object.hasOwn(array, index)) return NOT_PLAIN;
      const element = copyPlain(array[index]);
      if (element === NOT_PLAIN) return NOT_PLAIN;
      copy[index] = element;
    }
    return copy;
  }
  if (proto !== Object.prototype && proto !== null) return NOT_PLAIN;
  if (Object.getOwnPropertySymbols(value).length !== 0) return NOT_PLAIN;
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    const field = copyPlain((value as Record<string, unknown>)[key]);
    if (field === NOT_PLAIN) return NOT_PLAIN;
    // An own "__proto__" (JSON.parse makes one) stays an own property, as structuredClone keeps it.
    if (key === "__proto__") Object.defineProperty(copy, key, { value: field, enumerable: true, writable: true, configurable: true });
    else copy[key] = field;
  }
  return copy;
}

/**
 * What the guardrails read of a zod v4 schema: the definitions (`_zod.def`) of the schemas and
 * checks reachable from it. One walk, shared by the sync-parse check (sync-parse.ts), which asks
 * whether every node is a built-in one, and the tool fingerprint (parse-definition.ts), which
 * digests every node: both see the same nodes.
 */

/** A zod v4 definition: `type` for a schema, `check` for a check (a refinement is both). */
export interface ZodDef {
  /** The schema's type (`object`, `string`, `pipe`...); absent on a bare check. */
  readonly type?: unknown;
  /** The check's kind (`min_length`, `custom`...); absent on a schema that is not a check. */
  readonly check?: unknown;
  /** The checks on a schema. */
  readonly checks?: unknown;
  /** Everything else zod keeps there: members, parameters, functions. */
  readonly [key: string]: unknown;
}

/** The zod v4 definition of `node`, if it is a zod v4 schema or check. */
export function defOf(node: unknown): ZodDef | undefined {
  if (typeof node !== "object" || node === null) return undefined;
  const zod = (node as { _zod?: unknown })._zod;
  if (typeof zod !== "object" || zod === null) return undefined;
  const def = (zod as { def?: unknown }).def;
  return typeof def === "object" && def !== null ? (def as ZodDef) : undefined;
}

/**
 * A definition's member that is never read: zod's getter for a default (`default`, `prefault`)
 * calls the default when it is a function, which may answer something else on every call.
 */
export function unreadMember(key: string): boolean {
  return key === "defaultValue";
}

/** Why a walk ended before it visited every node. */
export type WalkEnd = "complete" | "stopped" | "too_large";

/**
 * Visits every zod node (schema or check) reachable from `root`, each once (a cycle through a
 * getter or `z.lazy` is walked once), breadth first, each definition's members by key in code
 * unit order (as RFC 8785 sorts them): the same schema, however built, is visited in the same
 * order. `visit` sees a node before its members are read; answering false stops the walk
 * (`stopped`). More than `maxNodes` nodes stop it too (`too_large`): a `z.lazy` that builds a new
 * schema each time would otherwise never end. A lazy schema's member is the schema its getter
 * answers (zod's own cached `innerType`, which its parse reads too). Throws what a getter throws.
 */
export function walkZod(root: unknown, maxNodes: number, visit: (node: object, def: ZodDef) => boolean): WalkEnd {
  const seen = new Set<object>();
  const queue: object[] = [];
  const enqueue = (node: object) => {
    if (!seen.has(node)) {
      seen.add(node);
      queue.push(node);
    }
  };
  if (defOf(root) === undefined) return "stopped";
  enqueue(root as object);
  for (let next = 0; next < queue.length; next++) {
    if (next >= maxNodes) return "too_large";
    const node = queue[next] as object;
    const def = defOf(node) as ZodDef;
    if (!visit(node, def)) return "stopped";
    for (const member of zodMembers(node, def)) enqueue(member);
  }
  return "complete";
}

/**
 * The zod nodes a definition holds, in walk order: found in its members, through arrays and plain
 * objects (a shape, a union's options, a template literal's parts), not inside another node.
 */
export function zodMembers(node: object, def: ZodDef): object[] {
  const found: object[] = [];
  const containers = new Set<object>();
  const search = (value: unknown): void => {
    if (typeof value !== "object" || value === null) return;
    if (defOf(value) !== undefined) {
      found.push(value);
      return;
    }
    if (containers.has(value)) return;
    containers.add(value);
    if (Array.isArray(value)) {
      for (const item of value) search(item);
    } else if (isPlainObject(value)) {
      for (const key of sortedKeys(value)) search((value as Record<string, unknown>)[key]);
    }
  };
  for (const key of sortedKeys(def)) if (!unreadMember(key)) search(def[key]);
  if (def.type === "lazy") search((node as { _zod: { innerType?: unknown } })._zod.innerType);
  return found;
}

/** An object literal's kind of object (a shape, an enum's entries), not an instance of a class. */
export function isPlainObject(value: object): boolean {
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** Own enumerable string keys in UTF-16 code unit order, as RFC 8785 sorts them. */
export function sortedKeys(value: object): string[] {
  return Object.keys(value).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

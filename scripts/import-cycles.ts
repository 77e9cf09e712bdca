/**
 * Runtime import cycles among the sources: `pnpm tsx scripts/import-cycles.ts [dir]` prints each
 * one and exits 1, or says there is none (test/unit/import-graph.test.ts runs the same check on
 * src/). A cycle makes one module of it run before the other has finished, so a value it reads at
 * load time is `undefined` in one bundle order and not in another.
 *
 * An edge is a static import or re-export that survives compilation. `import type` and
 * `export type` are erased, so they are no edge; `import { type A }` is one, because under
 * `verbatimModuleSyntax` it stays as `import {} from` and still loads the module. A dynamic
 * `import()` is no edge: it loads the module when called, after every module has loaded.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import ts from "typescript";

/** The modules a source file loads when it is loaded, as the specifiers written in it. */
export function runtimeSpecifiers(fileName: string, text: string): string[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const specifiers: string[] = [];
  for (const statement of source.statements) {
    if (ts.isImportDeclaration(statement)) {
      if (statement.importClause?.phaseModifier === ts.SyntaxKind.TypeKeyword) continue;
      if (ts.isStringLiteral(statement.moduleSpecifier)) specifiers.push(statement.moduleSpecifier.text);
    } else if (ts.isExportDeclaration(statement)) {
      if (statement.isTypeOnly || statement.moduleSpecifier === undefined) continue;
      if (ts.isStringLiteral(statement.moduleSpecifier)) specifiers.push(statement.moduleSpecifier.text);
    } else if (
      ts.isImportEqualsDeclaration(statement) &&
      !statement.isTypeOnly &&
      ts.isExternalModuleReference(statement.moduleReference) &&
      ts.isStringLiteral(statement.moduleReference.expression)
    ) {
      specifiers.push(statement.moduleReference.expression.text);
    }
  }
  return specifiers;
}

/**
 * The file a relative specifier names, among `files` (absolute paths of .ts sources): `./x.js`
 * is `x.ts`, as NodeNext resolution writes it. Undefined for a package or a file outside the set.
 */
export function resolveSpecifier(from: string, specifier: string, files: ReadonlySet<string>): string | undefined {
  if (!specifier.startsWith(".")) return undefined;
  const target = resolve(dirname(from), specifier);
  const candidates = [target.replace(/\.js$/, ".ts"), `${target}.ts`, join(target, "index.ts")];
  return candidates.find((candidate) => files.has(candidate));
}

/**
 * Every cycle of a directed graph, one per strongly connected component that has one (Tarjan's
 * algorithm), each as a path that starts and ends at the same node, smallest node first so the
 * answer does not depend on the order of the input.
 */
export function findCycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  let next = 0;
  const connect = (node: string): void => {
    index.set(node, next);
    low.set(node, next);
    next += 1;
    stack.push(node);
    onStack.add(node);
    for (const to of graph.get(node) ?? []) {
      if (!index.has(to)) {
        connect(to);
        low.set(node, Math.min(low.get(node)!, low.get(to)!));
      } else if (onStack.has(to)) {
        low.set(node, Math.min(low.get(node)!, index.get(to)!));
      }
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string | undefined;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      const selfLoop = component.length === 1 && (graph.get(node) ?? []).includes(node);
      if (component.length > 1 || selfLoop) components.push(component);
    }
  };
  for (const node of [...graph.keys()].sort()) if (!index.has(node)) connect(node);
  return components.map((component) => cycleThrough(graph, new Set(component))).sort((a, b) => a[0]!.localeCompare(b[0]!));
}

/** One cycle inside a strongly connected component: a shortest path from its smallest node back to it. */
function cycleThrough(graph: ReadonlyMap<string, readonly string[]>, component: ReadonlySet<string>): string[] {
  const start = [...component].sort()[0]!;
  const previous = new Map<string, string>();
  const queue = [start];
  // An array's iterator sees what is pushed while it runs: the loop is the breadth-first queue.
  for (const node of queue) {
    for (const to of [...(graph.get(node) ?? [])].sort()) {
      if (!component.has(to)) continue;
      if (to === start) {
        const path = [start];
        for (let back: string | undefined = node; back !== start && back !== undefined; back = previous.get(back)) path.splice(1, 0, back);
        return [...path, start];
      }
      if (!previous.has(to)) {
        previous.set(to, node);
        queue.push(to);
      }
    }
  }
  return [start, start];
}

/** Every `.ts` file under `dir`, absolute, declaration files aside. */
function sourcesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((entry) => {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) return sourcesUnder(path);
      return entry.isFile() && entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts") ? [path] : [];
    })
    .sort();
}

/** The runtime import graph of the sources under `dir`: each file to the files it loads, paths relative to `dir`. */
export function importGraph(dir: string): Map<string, string[]> {
  const root = resolve(dir);
  const files = sourcesUnder(root);
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const targets = runtimeSpecifiers(file, readFileSync(file, "utf8"))
      .map((specifier) => resolveSpecifier(file, specifier, known))
      .filter((target): target is string => target !== undefined)
      .map((target) => relative(root, target));
    graph.set(relative(root, file), [...new Set(targets)]);
  }
  return graph;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const dir = process.argv[2] ?? "src";
  if (!existsSync(dir)) {
    console.error(`no such directory: ${dir}`);
    process.exit(2);
  }
  const cycles = findCycles(importGraph(dir));
  for (const cycle of cycles) console.log(cycle.join(" -> "));
  console.log(cycles.length === 0 ? `no runtime import cycle under ${dir}` : `${cycles.length} runtime import cycle(s) under ${dir}`);
  process.exit(cycles.length === 0 ? 0 : 1);
}

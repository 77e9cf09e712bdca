/**
 * A Stryker JSON report (mutation-testing-elements schema) as a score table per file and the list of
 * surviving and uncovered mutants, for triage. `pnpm tsx scripts/mutation/summary.ts <report.json>...`
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

interface Mutant {
  readonly mutatorName: string;
  readonly replacement?: string;
  readonly status: string;
  readonly static?: boolean;
  readonly location: { readonly start: { readonly line: number; readonly column: number } };
}

interface Report {
  readonly files: Readonly<Record<string, { readonly source: string; readonly mutants: readonly Mutant[] }>>;
}

const DETECTED = new Set(["Killed", "Timeout"]);
const UNDETECTED = new Set(["Survived", "NoCoverage"]);

/** Stryker's score: detected over detected + undetected (errors and ignored mutants excluded). */
function score(mutants: readonly Mutant[]): { detected: number; undetected: number; text: string } {
  const detected = mutants.filter((m) => DETECTED.has(m.status)).length;
  const undetected = mutants.filter((m) => UNDETECTED.has(m.status)).length;
  const valid = detected + undetected;
  return { detected, undetected, text: valid === 0 ? "n/a" : `${((100 * detected) / valid).toFixed(1)} %` };
}

export function summarize(...paths: readonly string[]): string {
  const lines: string[] = ["| file | mutants | killed | timed out | survived | no coverage | score |", "|---|---:|---:|---:|---:|---:|---:|"];
  const survivors: string[] = [];
  const all: Mutant[] = [];
  for (const path of paths) {
    const report = JSON.parse(readFileSync(path, "utf8")) as Report;
    for (const [file, { source, mutants }] of Object.entries(report.files).sort(([a], [b]) => a.localeCompare(b))) {
      all.push(...mutants);
      const count = (status: string): number => mutants.filter((m) => m.status === status).length;
      lines.push(
        `| \`${file}\` | ${mutants.length} | ${count("Killed")} | ${count("Timeout")} | ${count("Survived")} | ${count("NoCoverage")} | ${score(mutants).text} |`,
      );
      const sourceLines = source.split("\n");
      for (const mutant of mutants.filter((m) => UNDETECTED.has(m.status))) {
        const { line, column } = mutant.location.start;
        const original = (sourceLines[line - 1] ?? "").trim().slice(0, 100);
        const replacement = (mutant.replacement ?? "").replace(/\s+/g, " ").slice(0, 100);
        survivors.push(
          `${file}:${line}:${column} ${mutant.status}${mutant.static === true ? " (static)" : ""} ${mutant.mutatorName}: ${original}  =>  ${replacement}`,
        );
      }
    }
  }
  const total = score(all);
  lines.push(`| all | ${all.length} | | | | | ${total.text} |`, "", ...survivors);
  return lines.join("\n");
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  console.log(summarize(...process.argv.slice(2)));
}

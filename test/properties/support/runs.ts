/**
 * How many cases a property runs, and how to replay one. CI runs the small budget each file names;
 * `ARKAH_PROPERTY_RUNS=N` runs N cases per property for a longer local hunt. A failure prints
 * fast-check's `seed` and `path`: `ARKAH_PROPERTY_SEED=<seed> ARKAH_PROPERTY_PATH=<path>` replays
 * exactly that counterexample (with the same number of runs).
 */

function positiveInt(name: string): number | undefined {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return undefined;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < 0) throw new Error(`${name} must be a non-negative integer, got "${raw}"`);
  return value;
}

/** The number of runs: `ARKAH_PROPERTY_RUNS` when set, else the CI budget `ci`. */
export function propertyRuns(ci: number): number {
  const runs = positiveInt("ARKAH_PROPERTY_RUNS");
  if (runs === 0) throw new Error("ARKAH_PROPERTY_RUNS must be at least 1");
  return runs ?? ci;
}

/** fast-check parameters: the run budget, and the seed and path to replay when given. */
export function propertyParameters(ci: number): { numRuns: number; seed?: number; path?: string } {
  // A seed is a 32-bit integer; negative ones are valid, so parse it apart from the run count.
  const rawSeed = process.env.ARKAH_PROPERTY_SEED;
  const seed = rawSeed === undefined || rawSeed === "" ? undefined : Number(rawSeed);
  if (seed !== undefined && !Number.isSafeInteger(seed)) throw new Error(`ARKAH_PROPERTY_SEED must be an integer, got "${String(rawSeed)}"`);
  const path = process.env.ARKAH_PROPERTY_PATH;
  return {
    numRuns: propertyRuns(ci),
    ...(seed === undefined ? {} : { seed }),
    ...(path === undefined || path === "" ? {} : { path }),
  };
}

/**
 * A test timeout for a property of `ci` runs in CI that may take up to `msPerRun` each on a machine
 * loaded far beyond its cores (`msPerRun` is ten times or more what a run takes on a quiet one):
 * it grows with `ARKAH_PROPERTY_RUNS`, so a long local run is bounded by its run count, while a
 * hung store still fails the test.
 */
export function propertyTimeout(ci: number, msPerRun: number): number {
  return 30_000 + propertyRuns(ci) * msPerRun;
}

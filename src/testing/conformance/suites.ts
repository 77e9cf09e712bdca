/** The suites, in the order they run; pass some of them to `validateGuardrailStore` to run only those. */
export const CONFORMANCE_SUITES = [
  "receipts",
  "reads",
  "claims",
  "evidence",
  "settlement",
  "release",
  "verdicts",
  "approvals",
  "audit",
  "step-audit",
  "cursors",
  "reconciliation",
  "scope",
  "retention",
  "turns",
  "effects",
  "validation",
  "corruption",
  "primitives",
] as const;

/** One of {@link CONFORMANCE_SUITES}: pass some to `validateGuardrailStore` to run only those. */
export type ConformanceSuite = (typeof CONFORMANCE_SUITES)[number];

// @ts-check
import js from "@eslint/js";
import { defineConfig, globalIgnores } from "eslint/config";
import tseslint from "typescript-eslint";

/** Node 20 globals for the few plain JS files (TypeScript files are checked by tsc instead). */
const nodeGlobals = Object.fromEntries(
  [
    "process",
    "console",
    "Buffer",
    "URL",
    "URLSearchParams",
    "AbortController",
    "AbortSignal",
    "TextEncoder",
    "TextDecoder",
    "structuredClone",
    "queueMicrotask",
    "setTimeout",
    "clearTimeout",
    "setInterval",
    "clearInterval",
    "setImmediate",
    "clearImmediate",
    "fetch",
  ].map((name) => [name, /** @type {const} */ ("readonly")]),
);

export default defineConfig(
  globalIgnores([
    "dist/",
    "coverage/",
    "node_modules/",
    ".tmp/",
    // Stryker's sandbox copies and its HTML report (pnpm test:mutation).
    ".stryker-tmp/",
    "reports/",
    // Consumer fixtures for scripts/smoke.sh: type-checked there against the packed tarball,
    // not against the sources.
    "scripts/smoke/",
  ]),

  js.configs.recommended,

  // Every TypeScript file: type-aware, strict + stylistic.
  {
    files: ["**/*.ts", "**/*.mts", "**/*.cts"],
    extends: [tseslint.configs.strictTypeChecked, tseslint.configs.stylisticTypeChecked],
    languageOptions: {
      parserOptions: {
        projectService: true,
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      "@typescript-eslint/no-explicit-any": "error",
      "@typescript-eslint/no-unused-vars": [
        "error",
        { argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrorsIgnorePattern: "^_" },
      ],
      "@typescript-eslint/restrict-template-expressions": ["error", { allowNumber: true }],
      // Conflicts with no-non-null-assertion (an error in src): it asks for `x!` over `x as T`.
      "@typescript-eslint/non-nullable-type-assertion-style": "off",
      // `async` without `await` is how an implementation of an async interface (a store) turns a
      // synchronous throw into a rejection; the rule would push towards `Promise.resolve` noise.
      "@typescript-eslint/require-await": "off",
    },
  },

  // Library code: no escape hatches (strictTypeChecked already makes these errors; kept explicit).
  {
    files: ["src/**/*.ts"],
    rules: {
      "@typescript-eslint/no-explicit-any": "error",
      "@typescript-eslint/no-non-null-assertion": "error",
    },
  },

  // Tests, examples, benchmarks, scripts and config files: still type-aware, a few noisy rules off.
  {
    files: ["test/**", "examples/**", "bench/**", "scripts/**", "*.config.ts"],
    rules: {
      "@typescript-eslint/no-non-null-assertion": "off",
      "@typescript-eslint/no-empty-function": "off",
      "@typescript-eslint/unbound-method": "off",
      "@typescript-eslint/no-confusing-void-expression": "off",
      "@typescript-eslint/no-unnecessary-condition": "off",
      "@typescript-eslint/no-dynamic-delete": "off",
      "@typescript-eslint/restrict-template-expressions": [
        "error",
        { allowNumber: true, allowBoolean: true, allowNullish: true },
      ],
    },
  },

  // Plain JavaScript (this file): no type information.
  {
    files: ["**/*.js", "**/*.mjs", "**/*.cjs"],
    extends: [tseslint.configs.disableTypeChecked],
    languageOptions: { globals: nodeGlobals },
  },
);

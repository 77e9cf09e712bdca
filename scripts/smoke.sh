#!/usr/bin/env bash
# Package smoke test (the last step of `pnpm verify`): pack (prepack builds), check that it ships
# dist/ and docs/api/, install the tarball into a fresh npm project outside the workspace, as a user
# would, then
#   (a) type-check an ESM and a CommonJS consumer against the shipped declarations,
#   (b) load the ESM and CJS builds in one process and check their errors recognise each other,
#       and load /otel without and with its optional peer @opentelemetry/api,
#   (c) run examples/document-agent.ts there with tsx, importing the installed package by name.
# Fixtures live in scripts/smoke/. Set ARKAH_SMOKE_KEEP=1 to keep the temp dir for inspection.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
fixtures="$root/scripts/smoke"

say() { printf 'smoke: %s\n' "$*"; }
die() {
  printf 'smoke: FAILED: %s\n' "$*" >&2
  exit 1
}

# Outside the workspace, so nothing resolves through the repo's node_modules or tsconfig.
work=$(mktemp -d "${TMPDIR:-/tmp}/arkah-smoke.XXXXXX")
case "$work/" in "$root"/*) die "temp dir $work is inside the workspace; set TMPDIR elsewhere" ;; esac
cleanup() {
  if [ "${ARKAH_SMOKE_KEEP:-}" = 1 ]; then say "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

started=$SECONDS
step_started=$SECONDS
log_n=0
# Runs a command quietly; prints its output only when it fails.
quiet() {
  log_n=$((log_n + 1))
  local log="$work/step-$log_n.log"
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    die "$*"
  fi
}
step() {
  say "$1"
  step_started=$SECONDS
}
done_step() { say "  ok ($((SECONDS - step_started))s)"; }

for parent in "$(dirname "$work")" /; do
  [ -e "$parent/node_modules" ] && say "warning: $parent/node_modules exists and is visible to the consumer"
done

step "pack (its prepack builds dist/ and the API reference in docs/api/)"
mkdir -p "$work/pack"
quiet pnpm pack --pack-destination "$work/pack"
tarball=$(find "$work/pack" -maxdepth 1 -name '*.tgz' -print -quit)
[ -n "$tarball" ] || die "pnpm pack produced no tarball"
# Listed once into a file: `tar | grep -q` would fail under pipefail when grep stops reading early.
tar -tzf "$tarball" >"$work/pack/files.txt"
say "  $(basename "$tarball"), $(du -k "$tarball" | cut -f1) KiB, $(wc -l <"$work/pack/files.txt") files"
# What a fresh clone's pack must ship: the builds, the CLI and the API reference the README links.
for file in dist/index.js dist/index.cjs dist/index.d.ts dist/store.js dist/store.cjs dist/store.d.ts dist/cli/index.js docs/api/README.md; do
  grep -qx "package/$file" "$work/pack/files.txt" || die "the tarball has no $file"
done
done_step

step "install the tarball into a fresh npm project"
consumer="$work/consumer"
mkdir -p "$consumer"
cat >"$consumer/package.json" <<'JSON'
{
  "name": "arkah-smoke-consumer",
  "version": "0.0.0",
  "private": true,
  "type": "module"
}
JSON
# Peers (and the tools to check them) at the versions this repo develops against.
mapfile -t specs < <(node -e '
  const pkg = require(process.argv[1]);
  const wanted = ["langchain", "@langchain/core", "@langchain/langgraph", "zod", "typescript", "tsx", "@types/node"];
  for (const name of wanted) {
    const range = pkg.devDependencies?.[name] ?? pkg.peerDependencies?.[name];
    if (!range) { console.error(`no version for ${name} in package.json`); process.exit(1); }
    console.log(`${name}@${range}`);
  }' "$root/package.json")
say "  $(basename "$tarball") ${specs[*]}"
(cd "$consumer" && quiet npm install --no-audit --no-fund --no-package-lock --loglevel=error "$tarball" "${specs[@]}")
[ -f "$consumer/node_modules/arkah-agent-guardrails/package.json" ] || die "package not installed"
done_step

step "type-check ESM (.mts) and CJS (.cts) consumers against the shipped declarations"
cp "$fixtures/tsconfig.json" "$fixtures/consumer.mts" "$fixtures/consumer.cts" "$consumer/"
(cd "$consumer" && quiet ./node_modules/.bin/tsc -p tsconfig.json)
done_step

step "load the ESM and CJS builds in one process"
cp "$fixtures/dual.mjs" "$consumer/"
(cd "$consumer" && node dual.mjs) || die "dual package check"
done_step

step "the optional peer @opentelemetry/api: the core without it, /otel with it"
cp "$fixtures/otel.mjs" "$consumer/"
(cd "$consumer" && node otel.mjs absent) || die "the package without @opentelemetry/api"
otel_api=$(node -p 'require(process.argv[1]).devDependencies["@opentelemetry/api"]' "$root/package.json")
(cd "$consumer" && quiet npm install --no-audit --no-fund --no-package-lock --loglevel=error "@opentelemetry/api@$otel_api")
(cd "$consumer" && node otel.mjs installed) || die "arkah-agent-guardrails/otel with @opentelemetry/api"
done_step

step "run examples/document-agent.ts against the installed package"
[ -f "$root/examples/document-agent.ts" ] || die "examples/document-agent.ts does not exist"
# The whole folder, in case the example reads a fixture or a helper next to it.
cp -R "$root/examples" "$consumer/examples"
(cd "$consumer" && ./node_modules/.bin/tsx examples/document-agent.ts) || die "examples/document-agent.ts exited non-zero"
done_step

say "passed ($((SECONDS - started))s)"

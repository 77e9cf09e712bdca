#!/usr/bin/env bash
# Where the guard's cost per read call goes: the 10-step read loop (bench/run-loop.ts) with parts of
# the guard turned off one after another, each configuration's "guard over no-op" (µs a tool call,
# the median of the per-round differences against the no-op middleware) averaged over REPS runs,
# and each part's cost as the difference between two configurations.
#
#   bash bench/ablation.sh [reps]        (default 4 reps; about 75 s a rep on 2 cores; an idle machine)
#
# The switches live in bench/ablation.patch, applied to a throwaway worktree of HEAD (uncommitted
# changes are not measured), never to the package: each turns a guarantee off and exists only to
# price it. ABLATE=part,part... in that build:
#   seal     the handler gets the request as it came, no sealed copy, no AsyncLocalStorage
#   record   no read evidence and no audit event after the body (no store call)
#   parse    no parse of the arguments (no digests, no zod): the raw arguments stand for the parsed
#   gate     the tool call reuses the turn the last check admitted (no transcript scan)
#   tool     wrapToolCall only calls the handler (the whole tool path off)
#   model    wrapModelCall only calls the handler
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
reps=${1:-4}
work=$(mktemp -d "${TMPDIR:-/tmp}/arkah-ablation.XXXXXX")
cleanup() {
  git -C "$root" worktree remove --force "$work/tree" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
git -C "$root" worktree add --quiet --detach "$work/tree" HEAD
cd "$work/tree"
git apply "$root/bench/ablation.patch"
ln -s "$root/node_modules" node_modules
pnpm exec tsup --silent

configs=(none seal record seal,record seal,record,parse seal,record,parse,gate tool model,tool)
results="$work/results"
for rep in $(seq 1 "$reps"); do
  for config in "${configs[@]}"; do
    line=$(ABLATE=$config TSX_TSCONFIG_PATH=bench/tsconfig.dist.json pnpm exec tsx bench/run-loop.ts 10 2>&1 | tail -n 1)
    # "... guard over no-op 218.9 µs ± 17.0 µs a call ..." (a negative figure has a Unicode minus)
    us=$(sed -E 's/.*guard over no-op ([^ ]+) µs.*/\1/; s/−/-/' <<<"$line")
    printf '%s %s\n' "$config" "$us" >>"$results"
    printf 'rep %s/%s  %-28s %8s µs\n' "$rep" "$reps" "$config" "$us" >&2
  done
done

awk -v reps="$reps" '
  { sum[$1] += $2; runs[$1] = runs[$1] sprintf(" %.0f", $2) }
  END {
    for (c in sum) mean[c] = sum[c] / reps
    printf "\nguard over no-op, µs a tool call (10-step read loop, mean of %d runs; each run: 60 interleaved rounds)\n", reps
    n = split("none seal record seal,record seal,record,parse seal,record,parse,gate tool model,tool", order, " ")
    for (i = 1; i <= n; i++) printf "  off: %-26s %7.1f   (%s )\n", order[i], mean[order[i]], runs[order[i]]
    printf "\nwhat each part costs (the difference of two rows)\n"
    printf "  seal (sealed copy, AsyncLocalStorage)              %7.1f\n", mean["none"] - mean["seal"]
    printf "  read evidence and audit event (one store call)     %7.1f\n", mean["none"] - mean["record"]
    printf "  both together                                      %7.1f\n", mean["none"] - mean["seal,record"]
    printf "  parse (digests, zod, copies)                       %7.1f\n", mean["seal,record"] - mean["seal,record,parse"]
    printf "  turn gate on the tool call                         %7.1f\n", mean["seal,record,parse"] - mean["seal,record,parse,gate"]
    printf "  rest of the tool path (step, scope, authorize,     %7.1f\n", mean["seal,record,parse,gate"] - mean["tool"]
    printf "    guardrails, identity, audit draft, async frames)\n"
    printf "  model hook (gate, coverage, seal check, mark)      %7.1f\n", mean["tool"] - mean["model,tool"]
    printf "  left with both hooks off (noise; should be ~0)     %7.1f\n", mean["model,tool"]
  }
' "$results"

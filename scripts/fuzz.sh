#!/usr/bin/env bash
# Runs every fuzz target of the module for a while each (default 30s).
# Usage: scripts/fuzz.sh [DURATION]
set -euo pipefail
time=${1:-30s}
cd "$(dirname "$0")/.."
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $(grep -ho '^func \(Fuzz[A-Za-z0-9_]*\)' "$dir"/*_test.go 2>/dev/null | sed 's/func //'); do
    echo "== $pkg $target"
    go test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$time"
  done
done

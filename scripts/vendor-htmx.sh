#!/usr/bin/env bash
# Refreshes the dashboard's one library, htmx, from the npm registry, at the
# pinned version below, into internal/server/ui/assets (embedded in the
# binary: no CDN, no build chain at run time). Run it to upgrade; commit
# the file it writes and the version it names.
set -euo pipefail
version=2.0.11
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack "htmx.org@$version" >/dev/null && tar xzf "htmx.org-$version.tgz")
cp "$tmp/package/dist/htmx.min.js" internal/server/ui/assets/htmx.min.js
sha256sum internal/server/ui/assets/htmx.min.js

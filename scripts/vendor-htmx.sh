#!/usr/bin/env bash
# Refreshes the dashboard's one library, htmx, and its Server-Sent Events
# extension, from the npm registry, at the pinned versions below, into
# internal/server/ui/assets (embedded in the binary: no CDN, no build chain
# at run time). Run it to upgrade; commit the files it writes and the
# versions it names.
set -euo pipefail
version=2.0.11
sse_version=2.2.4
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "htmx.org@$version" >/dev/null && tar xzf "htmx.org-$version.tgz")
cp "$tmp/package/dist/htmx.min.js" internal/server/ui/assets/htmx.min.js
rm -rf "$tmp/package"
(cd "$tmp" && npm pack --silent "htmx-ext-sse@$sse_version" >/dev/null && tar xzf "htmx-ext-sse-$sse_version.tgz")
cp "$tmp/package/dist/sse.min.js" internal/server/ui/assets/htmx-sse.min.js
sha256sum internal/server/ui/assets/htmx.min.js internal/server/ui/assets/htmx-sse.min.js

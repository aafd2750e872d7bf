#!/usr/bin/env bash
# build.sh SOURCE_DIR OUT_DIR: install node-nats-streaming (pinned) and the scenario into OUT_DIR.
set -euo pipefail
src="$1"; out="$2"
version="${LIBRARY_VERSION:-0.3.2}"
mkdir -p "$out"
cp "$src/scenario.js" "$out/"
cd "$out"
[ -f package.json ] || echo '{"name": "nats-conformance-stan-scenario", "private": true}' > package.json
npm install --no-audit --no-fund --loglevel=error "node-nats-streaming@$version" >/dev/null
printf '#!/bin/sh\nexec node "%s/scenario.js" "$@"\n' "$out" > run
chmod +x run

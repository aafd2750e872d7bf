#!/usr/bin/env bash
# build.sh SOURCE_DIR OUT_DIR: install node-nats-streaming (pinned, LIBRARY_VERSION, or
# LIBRARY_SOURCE: a local checkout, npm install PATH) with the driver
# (nats-conformance-stan-driver/1).
set -euo pipefail
src="$1"; mkdir -p "$2"; out="$(cd "$2" && pwd)"
version="${LIBRARY_VERSION:-0.3.2}"
cp "$src/driver.js" "$out/"
cd "$out"
[ -f package.json ] || echo '{"name": "nats-conformance-stan-driver", "private": true}' > package.json
npm install --no-audit --no-fund --loglevel=error "${LIBRARY_SOURCE:-node-nats-streaming@$version}" >/dev/null
printf '#!/bin/sh\nexec node "%s/driver.js" "$@"\n' "$out" > run
chmod +x run
echo '{"id":1,"cmd":"hello"}' | ./run | grep -q '"protocol":"nats-conformance-stan-driver/1"' || {
    echo "build.sh: the driver did not answer hello" >&2; exit 1; }

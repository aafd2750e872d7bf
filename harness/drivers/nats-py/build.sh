#!/usr/bin/env bash
# Build the nats-py driver: build.sh SOURCE_DIR OUT_DIR
# Installs nats-py==$LIBRARY_VERSION (default below) and aiohttp==$AIOHTTP_VERSION from PyPI into
# a venv in OUT_DIR, copies the driver there and writes OUT_DIR/run. PYTHON picks the
# interpreter (default python3).
# LIBRARY_SOURCE, when set, is a local checkout of nats-py installed instead (pip install PATH).
set -euo pipefail
LIBRARY_VERSION="${LIBRARY_VERSION:-2.16.0}"
AIOHTTP_VERSION="${AIOHTTP_VERSION:-3.14.5}"
if [ $# -ne 2 ]; then
    echo "usage: build.sh SOURCE_DIR OUT_DIR" >&2
    exit 2
fi
src="$(cd "$1" && pwd)"
mkdir -p "$2"
out="$(cd "$2" && pwd)"
python="${PYTHON:-python3}"

"$python" -m venv --clear "$out/venv"
# aiohttp: what nats-py's WebSocket transport (ws://, wss://) needs, its `aiohttp` extra (named
# on its own: older releases have no such extra, and no WebSocket transport to use it).
"$out/venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
    "${LIBRARY_SOURCE:-nats-py==$LIBRARY_VERSION}" "aiohttp==$AIOHTTP_VERSION"
# The driver needs nats-py and aiohttp only (a container image of the venv stays small).
"$out/venv/bin/python" -m pip uninstall --quiet --yes pip setuptools
cp "$src/driver.py" "$out/driver.py"
# -I: the driver sees only its own venv (no PYTHONPATH, no user site, no working directory).
cat >"$out/run" <<RUN
#!/bin/sh
exec "$out/venv/bin/python" -I "$out/driver.py" "\$@"
RUN
chmod +x "$out/run"

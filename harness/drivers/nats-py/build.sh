#!/usr/bin/env bash
# Build the nats-py driver: build.sh SOURCE_DIR OUT_DIR
# Installs nats-py==$LIBRARY_VERSION (default below) from PyPI into a venv in OUT_DIR, copies the
# driver there and writes OUT_DIR/run. PYTHON picks the interpreter (default python3).
# LIBRARY_SOURCE, when set, is a local checkout of nats-py installed instead (pip install PATH).
set -euo pipefail
LIBRARY_VERSION="${LIBRARY_VERSION:-2.16.0}"
if [ $# -ne 2 ]; then
    echo "usage: build.sh SOURCE_DIR OUT_DIR" >&2
    exit 2
fi
src="$(cd "$1" && pwd)"
mkdir -p "$2"
out="$(cd "$2" && pwd)"
python="${PYTHON:-python3}"

"$python" -m venv --clear "$out/venv"
"$out/venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
    "${LIBRARY_SOURCE:-nats-py==$LIBRARY_VERSION}"
# The driver needs nats-py only (a container image of the venv stays small).
"$out/venv/bin/python" -m pip uninstall --quiet --yes pip setuptools
cp "$src/driver.py" "$out/driver.py"
# -I: the driver sees only its own venv (no PYTHONPATH, no user site, no working directory).
cat >"$out/run" <<RUN
#!/bin/sh
exec "$out/venv/bin/python" -I "$out/driver.py" "\$@"
RUN
chmod +x "$out/run"

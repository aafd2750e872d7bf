#!/bin/sh
# Builds the driver for npm `nats` (nats.js v2): build.sh SOURCE_DIR OUT_DIR.
# LIBRARY_VERSION overrides the pinned version. After changing the pin, refresh the lock with
# `npm install --package-lock-only` in this directory (after editing package.json).
set -eu
PINNED_VERSION=2.29.3
exec sh "$1/npm-build.sh" "$1" "$2" "${LIBRARY_VERSION:-$PINNED_VERSION}" nats

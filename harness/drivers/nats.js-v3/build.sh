#!/bin/sh
# Builds the driver for @nats-io/transport-node (nats.js v3): build.sh SOURCE_DIR OUT_DIR.
# LIBRARY_VERSION overrides the pinned transport-node version. The name checks come from
# @nats-io/jetstream, kv and obj, which are not released for every transport-node version:
# package.json pins them at 3.4.0 whatever LIBRARY_VERSION says. After changing a pin, refresh
# the lock with `npm install --package-lock-only` in this directory.
# The build steps and the protocol loop are shared with the v2 driver in ../nats.js.
set -eu
PINNED_VERSION=3.4.0
exec sh "$1/../nats.js/npm-build.sh" "$1" "$2" "${LIBRARY_VERSION:-$PINNED_VERSION}" @nats-io/transport-node

#!/bin/sh
# Builds the driver for @nats-io/transport-node (nats.js v3): build.sh SOURCE_DIR OUT_DIR.
# LIBRARY_VERSION overrides the pinned transport-node version. The name checks come from
# @nats-io/jetstream, kv and obj, which are not released for every transport-node version:
# package.json pins them at 3.4.0 whatever LIBRARY_VERSION says. After changing a pin, refresh
# the lock with `npm install --package-lock-only` in this directory.
# The build steps and the protocol loop are shared with the v2 driver in ../nats.js.
# LIBRARY_SOURCE, when set, is a built checkout of the v3 monorepo (github.com/nats-io/nats.js,
# after `npm install && npm run build` there): its core, transport-node, jetstream, kv and obj
# packages are installed instead of the releases.
set -eu
PINNED_VERSION=3.4.0
export SOURCE_PACKAGES="core transport-node jetstream kv obj"
exec sh "$1/../nats.js/npm-build.sh" "$1" "$2" "${LIBRARY_VERSION:-$PINNED_VERSION}" @nats-io/transport-node

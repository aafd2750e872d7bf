#!/usr/bin/env bash
# Builds the io.nats:jnats driver: build.sh SOURCE_DIR OUT_DIR
# Through maven-build.sh (shared with java-nats-streaming): the pinned jnats from Maven Central,
# LIBRARY_VERSION when set, or LIBRARY_SOURCE, a local checkout of jnats.
set -euo pipefail
[ "$#" -eq 2 ] || { echo "usage: $0 SOURCE_DIR OUT_DIR" >&2; exit 2; }
exec bash "$1/maven-build.sh" "$1" "$2" jnats "${LIBRARY_VERSION:-2.26.2}" nats.conformance.Driver

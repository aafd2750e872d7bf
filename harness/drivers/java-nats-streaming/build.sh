#!/usr/bin/env bash
# Builds the io.nats:java-nats-streaming driver: build.sh SOURCE_DIR OUT_DIR
# Through ../jnats/maven-build.sh: the pinned java-nats-streaming from Maven Central,
# LIBRARY_VERSION when set, or LIBRARY_SOURCE, a local checkout of java-nats-streaming.
set -euo pipefail
[ "$#" -eq 2 ] || { echo "usage: $0 SOURCE_DIR OUT_DIR" >&2; exit 2; }
exec bash "$1/../jnats/maven-build.sh" "$1" "$2" java-nats-streaming \
    "${LIBRARY_VERSION:-2.2.3}" nats.conformance.StanDriver

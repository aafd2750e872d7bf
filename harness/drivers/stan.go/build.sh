#!/bin/sh
# Build the stan.go driver: build.sh SOURCE_DIR OUT_DIR
#
# Writes OUT_DIR/driver (static) and OUT_DIR/run through ../nats.go/go-build.sh: the library from
# the Go module proxy, the pinned version by go.mod/go.sum here, or LIBRARY_VERSION resolved into
# a copy of go.mod; LIBRARY_SOURCE, when set, a local checkout of stan.go (a replace directive).
set -eu
PINNED_VERSION=0.10.4
[ $# -eq 2 ] || { echo "usage: $0 SOURCE_DIR OUT_DIR" >&2; exit 2; }
exec sh "$1/../nats.go/go-build.sh" "$1" "$2" github.com/nats-io/stan.go "$PINNED_VERSION"

#!/bin/sh
# Build the nats.go driver: build.sh SOURCE_DIR OUT_DIR
#
# Writes OUT_DIR/driver (a static binary) and OUT_DIR/run through go-build.sh (shared with
# stan.go). LIBRARY_VERSION picks nats.go:
#   1.55.0 (default)  the Go module proxy, pinned by go.mod/go.sum here;
#   1.22.1            Debian's golang-github-nats-io-go-nats-dev, GOPATH mode,
#                     no network but apt (installed if missing);
#   any other X.Y.Z   the Go module proxy, resolved into a copy of go.mod.
# LIBRARY_SOURCE, when set, is a local checkout of nats.go built instead: a
# replace directive in the copy of go.mod, its dependencies from the proxy.
set -eu

PINNED_VERSION=1.55.0
DEBIAN_VERSION=1.22.1
DEBIAN_PACKAGE=golang-github-nats-io-go-nats-dev

[ $# -eq 2 ] || { echo "usage: $0 SOURCE_DIR OUT_DIR" >&2; exit 2; }
if [ "${LIBRARY_VERSION:-}" = "$DEBIAN_VERSION" ]; then
    if ! dpkg-query -W -f '${Status}' "$DEBIAN_PACKAGE" 2>/dev/null | grep -q 'ok installed'; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y "$DEBIAN_PACKAGE" >&2
    fi
    installed=$(dpkg-query -W -f '${Version}' "$DEBIAN_PACKAGE")
    case $installed in
        "$DEBIAN_VERSION"-*) ;;
        *) echo "build.sh: $DEBIAN_PACKAGE is $installed, not $DEBIAN_VERSION" >&2; exit 1 ;;
    esac
    export GO_DRIVER_GOPATH=/usr/share/gocode
fi
exec sh "$1/go-build.sh" "$1" "$2" github.com/nats-io/nats.go "$PINNED_VERSION"

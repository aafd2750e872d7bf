#!/bin/sh
# Build the stan.go driver: build.sh SOURCE_DIR OUT_DIR
#
# Writes OUT_DIR/driver (static, CGO_ENABLED=0) and OUT_DIR/run. The library comes from the Go
# module proxy: the pinned version by go.mod/go.sum here, or LIBRARY_VERSION resolved into a
# copy of go.mod.
set -eu

PINNED_VERSION=0.10.4
MODULE=github.com/nats-io/stan.go

[ $# -eq 2 ] || { echo "usage: $0 SOURCE_DIR OUT_DIR" >&2; exit 2; }
version=${LIBRARY_VERSION:-$PINNED_VERSION}
src=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
work=$out/src
rm -rf "$work" "$out/driver" "$out/run"
mkdir -p "$work"
cp "$src/main.go" "$src/go.mod" "$src/go.sum" "$work/"

export CGO_ENABLED=0 GOTOOLCHAIN=local
if [ -z "${HOME:-}" ]; then
    export GOCACHE="${GOCACHE:-$out/cache/build}" GOMODCACHE="${GOMODCACHE:-$out/cache/mod}"
fi
cd "$work"
if [ "$version" != "$PINNED_VERSION" ]; then
    go mod edit -require="$MODULE@v$version"
    go mod tidy
fi
go build -trimpath -buildvcs=false -ldflags='-s -w' -o "$out/driver" .

# The binary must report the version asked for.
loaded=$(echo '{"id":0,"cmd":"hello"}' | "$out/driver" | sed -n 's/.*"version":"\([^"]*\)".*/\1/p')
if [ "$loaded" != "$version" ]; then
    echo "build.sh: driver reports stan.go '$loaded', expected '$version'" >&2
    exit 1
fi
printf '#!/bin/sh\nexec "%s/driver" "$@"\n' "$out" > "$out/run"
chmod +x "$out/run"
echo "built stan.go $version driver: $out/run" >&2

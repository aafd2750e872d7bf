#!/bin/sh
# Shared by the Go drivers' build.sh (nats.go, stan.go): go-build.sh SOURCE_DIR OUT_DIR MODULE PINNED
#
# Builds the driver in SOURCE_DIR (its *.go files, go.mod, go.sum) against the library MODULE
# into OUT_DIR/driver (static, CGO_ENABLED=0, fit for a FROM scratch image) and writes
# OUT_DIR/run. Which library:
#   LIBRARY_SOURCE set        a local checkout of MODULE: a replace directive in the copy of go.mod,
#                             its dependencies from the Go module proxy;
#   LIBRARY_VERSION = PINNED  (or unset) the Go module proxy, pinned by go.mod/go.sum;
#   another LIBRARY_VERSION   the Go module proxy, resolved into the copy of go.mod;
#   GO_DRIVER_GOPATH set      GOPATH mode against $GO_DRIVER_GOPATH/src/MODULE, no network.
# SOURCE_DIR/tags.sh, when there, prints the build tags for the library's directory ($1).
# The driver must report the version asked for (a checkout's is whatever it holds).
set -eu

[ $# -eq 4 ] || { echo "usage: $0 SOURCE_DIR OUT_DIR MODULE PINNED_VERSION" >&2; exit 2; }
src=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
module=$3
version=${LIBRARY_VERSION:-$4}
work=$out/src

# Build from a copy: a version other than the pinned one rewrites go.mod.
rm -rf "$work" "$out/driver" "$out/run"
mkdir -p "$work"
for f in "$src"/*.go; do
    case $f in *_test.go) ;; *) cp "$f" "$work/" ;; esac
done

export CGO_ENABLED=0 GOTOOLCHAIN=local
# Go needs a home for its caches; without HOME, keep them in OUT_DIR.
if [ -z "${HOME:-}" ]; then
    export GOCACHE="${GOCACHE:-$out/cache/build}" GOMODCACHE="${GOMODCACHE:-$out/cache/mod}"
fi
cd "$work"
if [ -n "${GO_DRIVER_GOPATH:-}" ]; then
    export GOPATH="$GO_DRIVER_GOPATH" GO111MODULE=off GOPROXY=off
    libdir=$GOPATH/src/$module
else
    cp "$src/go.mod" "$src/go.sum" "$work/"
    if [ -n "${LIBRARY_SOURCE:-}" ]; then
        go mod edit -replace "$module=$LIBRARY_SOURCE"
        go mod tidy
    elif [ "$version" = "$4" ]; then
        go mod download "$module"
    else
        # go get, not go mod tidy: tidy also resolves the tests of older releases, whose
        # imports can pull a newer release of the library in and replace the one asked for.
        go get "$module@v$version"
    fi
    libdir=$(go list -m -f '{{.Dir}}' "$module")
fi
tags=""
if [ -f "$src/tags.sh" ]; then
    tags=$(sh "$src/tags.sh" "$libdir")
fi
go build -trimpath -buildvcs=false -ldflags='-s -w' -tags "$tags" -o "$out/driver" .

loaded=$(echo '{"id":0,"cmd":"hello"}' | "$out/driver" | sed -n 's/.*"version":"\([^"]*\)".*/\1/p')
if [ -z "${LIBRARY_SOURCE:-}" ] && [ "$loaded" != "$version" ]; then
    echo "go-build.sh: the driver reports $module '$loaded', expected '$version'" >&2
    exit 1
fi

cat >"$out/run" <<'RUN'
#!/bin/sh
exec "$(dirname "$0")/driver" "$@"
RUN
chmod +x "$out/run"
echo "built the $module $loaded driver: $out/run" >&2

#!/bin/sh
# Build the nats.go driver: build.sh SOURCE_DIR OUT_DIR
#
# Writes OUT_DIR/driver (a static binary, CGO_ENABLED=0, fit for a FROM
# scratch image) and OUT_DIR/run. LIBRARY_VERSION picks nats.go:
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
MODULE=github.com/nats-io/nats.go

[ $# -eq 2 ] || { echo "usage: $0 SOURCE_DIR OUT_DIR" >&2; exit 2; }
version=${LIBRARY_VERSION:-$PINNED_VERSION}
src=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
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

# build TAGS [VAR=VALUE ...]: go build in the current directory.
build() {
    tags=$1
    shift
    env "$@" go build -trimpath -buildvcs=false -ldflags='-s -w' -tags "$tags" -o "$out/driver" .
}

# The one API difference: DecodeHeadersMsg is exported only by newer releases.
legacy_tag() {
    if grep -q '^func DecodeHeadersMsg' "$1/nats.go"; then echo ""; else echo natsgo_legacy; fi
}

if [ "$version" = "$DEBIAN_VERSION" ]; then
    gopath=/usr/share/gocode
    libdir=$gopath/src/$MODULE
    if ! dpkg-query -W -f '${Status}' "$DEBIAN_PACKAGE" 2>/dev/null | grep -q 'ok installed'; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y "$DEBIAN_PACKAGE" >&2
    fi
    installed=$(dpkg-query -W -f '${Version}' "$DEBIAN_PACKAGE")
    case $installed in
        "$DEBIAN_VERSION"-*) ;;
        *) echo "build.sh: $DEBIAN_PACKAGE is $installed, not $DEBIAN_VERSION" >&2; exit 1 ;;
    esac
    tag=$(legacy_tag "$libdir")
    cd "$work"
    build "$tag" GOPATH="$gopath" GO111MODULE=off GOPROXY=off
else
    cp "$src/go.mod" "$src/go.sum" "$work/"
    cd "$work"
    if [ -n "${LIBRARY_SOURCE:-}" ]; then
        go mod edit -replace "$MODULE=$LIBRARY_SOURCE"
        go mod tidy
    elif [ "$version" = "$PINNED_VERSION" ]; then
        go mod download "$MODULE"
    else
        # go get, not go mod tidy: tidy also resolves the tests of older releases, whose
        # nats-server import pulls a newer nats.go in and replaces the version asked for.
        go get "$MODULE@v$version"
    fi
    tag=$(legacy_tag "$(go list -m -f '{{.Dir}}' "$MODULE")")
    build "$tag"
fi

# The binary must report the version asked for (a checkout's is whatever it holds).
loaded=$(echo '{"id":0,"cmd":"hello"}' | "$out/driver" | sed -n 's/.*"version":"\([^"]*\)".*/\1/p')
if [ -z "${LIBRARY_SOURCE:-}" ] && [ "$loaded" != "$version" ]; then
    echo "build.sh: driver reports nats.go '$loaded', expected '$version'" >&2
    exit 1
fi

cat >"$out/run" <<'EOF'
#!/bin/sh
exec "$(dirname "$0")/driver" "$@"
EOF
chmod +x "$out/run"
echo "built nats.go $version driver: $out/run" >&2

#!/usr/bin/env bash
# Build the async-nats conformance driver: build.sh SOURCE_DIR OUT_DIR
# Builds with cargo (crates.io) into OUT_DIR and writes OUT_DIR/run. LIBRARY_VERSION (default: the
# pinned version below) selects the async-nats release. LIBRARY_SOURCE, when set, is a local
# checkout of async-nats: a path dependency instead of the crates.io release. Every build beside
# OUT_DIR shares one cargo target directory, so a release or a checkout compiles only what differs
# from a build before it (the dependencies are the same crates); builds take turns on it.
set -euo pipefail

PINNED_VERSION=0.51.0

if [[ $# -ne 2 ]]; then
    echo "usage: $0 SOURCE_DIR OUT_DIR" >&2
    exit 2
fi
source_dir=$(cd "$1" && pwd)
mkdir -p "$2"
out_dir=$(cd "$2" && pwd)
version=${LIBRARY_VERSION:-$PINNED_VERSION}
if [[ ! $version =~ ^[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?$ ]]; then
    echo "build.sh: LIBRARY_VERSION '$version' is not a crate version" >&2
    exit 2
fi

# Copy a file only when its content changed, so cargo's mtime fingerprints see no change on a
# warm build.
install_if_changed() {
    if ! cmp -s "$1" "$2"; then
        mkdir -p "$(dirname "$2")"
        cp "$1" "$2"
    fi
}

work="$out_dir/crate"
mkdir -p "$work/src"
for source in "$source_dir"/src/*.rs; do
    install_if_changed "$source" "$work/src/${source##*/}"
done
requirement="version = \"=$version\""
if [[ -n ${LIBRARY_SOURCE:-} ]]; then
    requirement="path = \"$LIBRARY_SOURCE\""
fi
sed -E "s|^async-nats = \\{ version = \"=[^\"]+\"|async-nats = { $requirement|" \
    "$source_dir/Cargo.toml" >"$work/Cargo.toml.new"
grep -qF "async-nats = { $requirement" "$work/Cargo.toml.new" || {
    echo "build.sh: could not set the async-nats requirement in Cargo.toml" >&2
    exit 1
}
install_if_changed "$work/Cargo.toml.new" "$work/Cargo.toml"
rm -f "$work/Cargo.toml.new"

locked=()
if [[ $version == "$PINNED_VERSION" && -z ${LIBRARY_SOURCE:-} ]]; then
    # The committed lock file pins every crate for the default version.
    install_if_changed "$source_dir/Cargo.lock" "$work/Cargo.lock"
    locked=(--locked)
elif [[ ! -f $work/Cargo.lock ]]; then
    # Another version or a checkout: start from the committed lock; cargo moves only what the
    # new requirement needs.
    cp "$source_dir/Cargo.lock" "$work/Cargo.lock"
fi

export CARGO_TARGET_DIR
CARGO_TARGET_DIR="$(dirname "$out_dir")/async-nats.target"
mkdir -p "$CARGO_TARGET_DIR"
# Held until this script ends: another build must not replace release/async-nats-driver between
# this build and its copy into OUT_DIR.
exec 9>"$CARGO_TARGET_DIR/.build-lock"
flock 9
export DRIVER_RUSTC_VERSION
DRIVER_RUSTC_VERSION=$(rustc --version)
# The version cargo resolves, compiled into `hello` (the crate's own VERSION constant is
# private). `cargo metadata` resolves first, so an override's lock file is up to date.
cargo metadata --format-version 1 --manifest-path "$work/Cargo.toml" "${locked[@]}" >/dev/null
export DRIVER_LIBRARY_VERSION
DRIVER_LIBRARY_VERSION=$(cargo pkgid --manifest-path "$work/Cargo.toml" "${locked[@]}" async-nats)
DRIVER_LIBRARY_VERSION=${DRIVER_LIBRARY_VERSION##*[@#]}  # ...#async-nats@X or ...#X
cargo build --release --manifest-path "$work/Cargo.toml" "${locked[@]}"

install_if_changed "$CARGO_TARGET_DIR/release/async-nats-driver" "$out_dir/async-nats-driver"
chmod +x "$out_dir/async-nats-driver"
cat >"$out_dir/run.new" <<'EOF'
#!/bin/sh
exec "$(dirname "$0")/async-nats-driver" "$@"
EOF
chmod +x "$out_dir/run.new"
mv "$out_dir/run.new" "$out_dir/run"
echo "build.sh: async-nats $DRIVER_LIBRARY_VERSION driver in $out_dir/run" >&2

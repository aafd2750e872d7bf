#!/bin/sh
# Builds the nats.c driver: build.sh SOURCE_DIR OUT_DIR
#
# libnats comes from Debian (libnats-dev, nats.c upstream), jansson
# (libjansson-dev) handles JSON. Both are installed with apt-get when the
# wanted version is not already there, which needs root. LIBRARY_VERSION
# may be an upstream version (3.4.1) or an exact Debian one (3.4.1-1+b1).
# Writes OUT_DIR/driver and OUT_DIR/run.
set -eu

PINNED="3.4.1-1+b1"

if [ "$#" -ne 2 ]; then
    echo "usage: $0 SOURCE_DIR OUT_DIR" >&2
    exit 2
fi
src=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
want="${LIBRARY_VERSION:-$PINNED}"
export DEBIAN_FRONTEND=noninteractive

# The Debian version of libnats-dev whose upstream part is $1.
debian_version() {
    case "$1" in
    *-*) echo "$1" ;;
    *) apt-cache madison libnats-dev 2>/dev/null |
        awk -F'|' -v up="$1" '{gsub(/ /, "", $2); v = $2; sub(/^[0-9]+:/, "", v);
            sub(/-[^-]*$/, "", v); if (v == up) { print $2; exit }}' ;;
    esac
}

installed() {
    dpkg-query -W -f='${Status} ${Version}\n' "$1" 2>/dev/null | grep -q "^install ok installed $2"
}

deb=$(debian_version "$want")
if [ -z "$deb" ]; then
    apt-get update -qq
    deb=$(debian_version "$want")
fi
if [ -z "$deb" ]; then
    echo "build.sh: Debian has no libnats-dev for version $want" >&2
    exit 1
fi

if ! installed libnats-dev "$deb" || ! installed libjansson-dev "" ||
    ! command -v gcc >/dev/null || ! command -v pkg-config >/dev/null; then
    pkgs="libnats-dev=$deb libnats3.4=$deb libjansson-dev gcc libc6-dev pkg-config"
    # shellcheck disable=SC2086
    apt-get install -y -q --no-install-recommends --allow-downgrades $pkgs ||
        { apt-get update -qq && apt-get install -y -q --no-install-recommends \
            --allow-downgrades $pkgs; }
fi

# shellcheck disable=SC2046
gcc -std=gnu11 -O2 -Wall -Wextra -o "$out/driver" "$src/main.c" \
    $(pkg-config --cflags --libs libnats jansson) -lpthread

cat >"$out/run" <<EOF
#!/bin/sh
exec "$out/driver" "\$@"
EOF
chmod +x "$out/run"
echo "built nats.c driver against libnats-dev $deb in $out"

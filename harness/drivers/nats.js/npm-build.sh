#!/bin/sh
# Shared by the nats.js drivers' build.sh: installs a driver and its npm packages into OUT_DIR.
# usage: npm-build.sh SOURCE_DIR OUT_DIR VERSION PACKAGE...
# Every PACKAGE is installed at exactly VERSION; the driver's package.json and package-lock.json
# pin the rest (npm re-resolves in OUT_DIR when VERSION is not the one in the lock).
# LIBRARY_SOURCE, when set, is a local checkout installed in the packages' place (npm install
# PATH: a link to the checkout, which must hold the built packages): SOURCE_PACKAGES names its
# package directories, "." (the default: the checkout is the one PACKAGE) or several of a
# monorepo.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
version=$3
shift 3

cp "$here/driver-core.js" "$src/driver.js" "$src/package.json" "$src/package-lock.json" "$out/"
specs=""
for package in "$@"; do
    specs="$specs $package@$version"
done
if [ -n "${LIBRARY_SOURCE:-}" ]; then
    specs=""
    for package in ${SOURCE_PACKAGES:-.}; do
        specs="$specs $LIBRARY_SOURCE/$package"
    done
fi
cd "$out"
# shellcheck disable=SC2086  # one word per package spec
npm install --no-audit --no-fund --save-exact $specs >&2

node=$(command -v node)
# Node.js's own WebSocket, which nats.js v3's wsconnect needs as a global: built in from 22,
# behind --experimental-websocket in 20 (from 20.10); no flag where neither.
flags=""
if ! "$node" -e 'process.exit(typeof WebSocket === "function" ? 0 : 1)' &&
    "$node" --experimental-websocket -e '' 2>/dev/null; then
    flags="--experimental-websocket"
fi
cat > run <<RUN
#!/bin/sh
exec "$node" $flags "$out/driver.js" "\$@"
RUN
chmod +x run

#!/usr/bin/env bash
# Builds the io.nats:java-nats-streaming driver: build.sh SOURCE_DIR OUT_DIR
#
# Maven (Java 17) compiles the driver against the pinned java-nats-streaming from Maven Central,
# or LIBRARY_VERSION when set, into OUT_DIR: driver.jar, lib/ (the library, jnats, Jackson and
# their dependencies) and run, the executable the harness starts. Build logs go to stderr.
set -euo pipefail

STAN_VERSION="${LIBRARY_VERSION:-2.2.3}"

[ "$#" -eq 2 ] || { echo "usage: $0 SOURCE_DIR OUT_DIR" >&2; exit 2; }
src="$(cd "$1" && pwd)"
mkdir -p "$2"
out="$(cd "$2" && pwd)"
java="$(readlink -f "${JAVA_HOME:+$JAVA_HOME/bin/java}${JAVA_HOME:-$(command -v java)}")"

# Maven writes target/ beside the pom: build a copy so the source tree stays clean.
work="$out/build"
rm -rf "$work" "$out/lib" "$out/driver.jar" "$out/run"
mkdir -p "$work"
cp -R "$src/pom.xml" "$src/src" "$work/"
mvn --batch-mode --no-transfer-progress -f "$work/pom.xml" \
    -Dstan.version="$STAN_VERSION" -Dmaven.test.skip=true package >&2
mv "$work/target/lib" "$out/lib"
mv "$work/target/driver.jar" "$out/driver.jar"
rm -rf "$work"

classpath="$out/driver.jar"
for jar in "$out"/lib/*.jar; do
    classpath="$classpath:$jar"
done
# C1 only and the serial collector: the driver does little work, so start time is what counts.
cat >"$out/run" <<RUN
#!/bin/sh
exec "$java" -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xlog:disable -Xlog:all=warning:stderr -cp "$classpath" nats.conformance.StanDriver "\$@"
RUN
chmod +x "$out/run"
echo '{"id":1,"cmd":"hello"}' | "$out/run" | grep -q "\"version\":\"$STAN_VERSION\"" || {
    echo "build.sh: the driver did not answer hello with java-nats-streaming $STAN_VERSION" >&2; exit 1; }
echo "java-nats-streaming driver $STAN_VERSION built in $out" >&2

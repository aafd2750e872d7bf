#!/usr/bin/env bash
# Builds the io.nats:jnats driver: build.sh SOURCE_DIR OUT_DIR
#
# Maven (3.8, Java 17) compiles the driver against the pinned jnats from Maven Central, or against
# LIBRARY_VERSION when set, into OUT_DIR: driver.jar, lib/ (jnats, Jackson and their
# dependencies), driver.jsa (a class-data archive that shortens JVM start) and run, the executable
# the harness starts. Maven's local repository is the default ~/.m2/repository (MAVEN_OPTS=
# -Dmaven.repo.local=DIR moves it). Build logs go to stderr.
set -euo pipefail

JNATS_VERSION="${LIBRARY_VERSION:-2.26.2}"

if [ "$#" -ne 2 ]; then
    echo "usage: $0 SOURCE_DIR OUT_DIR" >&2
    exit 2
fi
src="$(cd "$1" && pwd)"
mkdir -p "$2"
out="$(cd "$2" && pwd)"
# The run script names this JVM by its real path: the class-data archive only fits the JVM that made it.
if [ -n "${JAVA_HOME:-}" ]; then
    java="$JAVA_HOME/bin/java"
else
    java="$(command -v java)"
fi
java="$(readlink -f "$java")"

# Maven writes target/ beside the pom: build a copy so the source tree stays clean.
work="$out/build"
rm -rf "$work" "$out/lib" "$out/driver.jar" "$out/driver.jsa" "$out/run"
mkdir -p "$work"
cp -R "$src/pom.xml" "$src/src" "$work/"
mvn --batch-mode --no-transfer-progress -f "$work/pom.xml" \
    -Djnats.version="$JNATS_VERSION" -Dmaven.test.skip=true package >&2

mv "$work/target/lib" "$out/lib"
mv "$work/target/driver.jar" "$out/driver.jar"
rm -rf "$work"

classpath="$out/driver.jar"
for jar in "$out"/lib/*.jar; do
    classpath="$classpath:$jar"
done
# C1 only and the serial collector: the driver does little work, so start time is what counts.
# JVM warnings (e.g. an unusable class-data archive) go to stderr, never into the protocol.
jvm_options="-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xlog:disable -Xlog:all=warning:stderr"

# A short session without a server records the classes the driver loads (AppCDS); it also
# checks that the build answers the protocol at all.
printf '%s\n' '{"id":1,"cmd":"hello"}' \
    '{"id":2,"cmd":"encode_headers","headers":[["a","b"]]}' \
    '{"id":3,"cmd":"decode_headers","block_b64":"TkFUUy8xLjAgNTAzDQphOiBiDQoNCg=="}' \
    '{"id":4,"cmd":"validate_subject","subject":"a.b","use":"publish"}' \
    '{"id":5,"cmd":"validate_name","production":"stream-name","name":"s"}' \
    '{"id":6,"cmd":"connect","url":"nats://127.0.0.1:1","options":{"timeout_ms":100}}' \
    '{"id":7,"cmd":"exit"}' |
    "$java" $jvm_options -Xlog:cds=error:stderr -XX:ArchiveClassesAtExit="$out/driver.jsa" -cp "$classpath" \
        nats.conformance.Driver >"$out/check.out"
grep -q '"protocol":"nats-conformance-driver/2"' "$out/check.out" || {
    echo "the built driver did not answer hello:" >&2
    cat "$out/check.out" >&2
    exit 1
}
rm -f "$out/check.out"

cat >"$out/run" <<EOF
#!/bin/sh
# jnats driver (nats-conformance-driver/2 on stdin/stdout), built by build.sh for jnats $JNATS_VERSION.
exec "$java" $jvm_options -XX:SharedArchiveFile="$out/driver.jsa" -cp "$classpath" nats.conformance.Driver "\$@"
EOF
chmod +x "$out/run"
echo "jnats driver $JNATS_VERSION built in $out" >&2

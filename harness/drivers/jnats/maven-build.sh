#!/usr/bin/env bash
# Shared by the Java drivers' build.sh (jnats, java-nats-streaming):
#   maven-build.sh SOURCE_DIR OUT_DIR ARTIFACT VERSION MAIN_CLASS
#
# Maven (Java 17) compiles the driver in SOURCE_DIR (pom.xml, src/) against io.nats:ARTIFACT at
# VERSION from Maven Central (the pom's property ARTIFACT.version) into OUT_DIR: driver.jar, lib/
# (the library and its dependencies), driver.jsa (a class-data archive that shortens JVM start)
# and run, the executable the harness starts. LIBRARY_SOURCE, when set, is a local checkout of
# the library (its sources in src/main/java, as in the library's repository): it is compiled
# against the dependencies VERSION has, takes that release's place in lib/ as
# ARTIFACT-local.jar, and the driver is compiled again against it. Maven's local repository is
# the default ~/.m2/repository (MAVEN_OPTS=-Dmaven.repo.local=DIR moves it). SOURCE_DIR/
# session.jsonl is the short session, without a server, that records the classes the driver
# loads (AppCDS) and checks that the build answers the protocol. Build logs go to stderr.
set -euo pipefail

[ "$#" -eq 5 ] || { echo "usage: $0 SOURCE_DIR OUT_DIR ARTIFACT VERSION MAIN_CLASS" >&2; exit 2; }
src="$(cd "$1" && pwd)"
mkdir -p "$2"
out="$(cd "$2" && pwd)"
artifact=$3 version=$4 main=$5
# The run script names this JVM by its real path: the class-data archive only fits the JVM that
# made it.
java="$(readlink -f "${JAVA_HOME:+$JAVA_HOME/bin/java}${JAVA_HOME:-$(command -v java)}")"

# Maven writes target/ beside the pom: build a copy so the source tree stays clean.
work="$out/build"
rm -rf "$work" "$out/lib" "$out/driver.jar" "$out/driver.jsa" "$out/run"
mkdir -p "$work"
cp -R "$src/pom.xml" "$src/src" "$work/"
mvn --batch-mode --no-transfer-progress -f "$work/pom.xml" \
    -D"$artifact.version=$version" -Dmaven.test.skip=true package >&2
mv "$work/target/lib" "$out/lib"
mv "$work/target/driver.jar" "$out/driver.jar"

# javac_jar JAR SOURCES_DIR CLASSPATH: compile the Java sources under SOURCES_DIR into JAR.
javac_jar() {
    local classes="$work/classes-${1##*/}"
    mkdir -p "$classes"
    find "$2" -name '*.java' ! -name module-info.java >"$work/sources"
    javac --release 17 -nowarn -encoding UTF-8 -d "$classes" -cp "$3" @"$work/sources" >&2
    if [ -d "$2/../resources" ]; then cp -R "$2/../resources/." "$classes/"; fi
    jar --create --file "$1" -C "$classes" .
}
if [ -n "${LIBRARY_SOURCE:-}" ]; then
    rm "$out/lib/$artifact-$version.jar"
    javac_jar "$out/lib/$artifact-local.jar" "$LIBRARY_SOURCE/src/main/java" "$out/lib/*"
    javac_jar "$out/driver.jar" "$src/src/main/java" "$out/lib/*"
fi
rm -rf "$work"

classpath="$out/driver.jar"
for jar in "$out"/lib/*.jar; do
    classpath="$classpath:$jar"
done
# C1 only and the serial collector: the driver does little work, so start time is what counts.
# JVM warnings (e.g. an unusable class-data archive) go to stderr, never into the protocol.
jvm_options="-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xlog:disable -Xlog:all=warning:stderr"
# shellcheck disable=SC2086  # one word per option
"$java" $jvm_options -Xlog:cds=error:stderr -XX:ArchiveClassesAtExit="$out/driver.jsa" \
    -cp "$classpath" "$main" <"$src/session.jsonl" >"$out/check.out"
# The hello must name a protocol and, for a release, the version asked for.
want='"protocol":"nats-conformance-'
grep -q "$want" "$out/check.out" && { [ -n "${LIBRARY_SOURCE:-}" ] ||
    grep -q "\"version\":\"$version\"" "$out/check.out"; } || {
    echo "maven-build.sh: the built driver did not answer hello with $artifact $version:" >&2
    cat "$out/check.out" >&2
    exit 1
}
rm -f "$out/check.out"

cat >"$out/run" <<RUN
#!/bin/sh
# $artifact driver, built by maven-build.sh for $artifact ${LIBRARY_SOURCE:-$version}.
exec "$java" $jvm_options -XX:SharedArchiveFile="$out/driver.jsa" -cp "$classpath" $main "\$@"
RUN
chmod +x "$out/run"
echo "$artifact driver (${LIBRARY_SOURCE:-$version}) built in $out" >&2

#!/usr/bin/env bash
# Before/after of the per-packet path on a noisy machine: PacketPathBenchmark's invocation for two builds in one
# JVM, each in a class loader of its own, invocations interleaved (AbMain), run twice with the builds' places
# swapped. JMH runs one build at a time, and on a shared 2-core box the load between two runs swamps a few percent.
# Usage: scripts/bench-ab.sh BASE_COMMIT [PAYLOAD [WARMUP MEASURED]]   (compares BASE_COMMIT with the work tree)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$NETREDUCE_ROOT"
base_commit="${1:?usage: scripts/bench-ab.sh BASE_COMMIT [PAYLOAD [WARMUP MEASURED]]}"
payload="${2:-1024}" warmup="${3:-400}" measured="${4:-2000}"
base="$(mktemp -d)"
trap 'rm -rf "$base"' EXIT
git archive "$base_commit" | tar -x -C "$base"
build() { (cd "$1" && ./mvnw -B -ntp -o -q -pl protocol,dataplane -am test-compile dependency:build-classpath \
  -Dmdep.includeScope=test -Dmdep.outputFile=target/bench.classpath >"$base/build.log" 2>&1) \
  || { echo "bench-ab: building $1 failed:" >&2; tail -n 30 "$base/build.log" >&2; exit 1; }; }
build "$base"
build "$NETREDUCE_ROOT"
driver="$base/driver/io/netreduce/dataplane/bench"
mkdir -p "$driver"
cp dataplane/target/test-classes/io/netreduce/dataplane/bench/AbDriver*.class "$driver/"
cp_of() { local r="$1"
  echo "$base/driver:$r/protocol/target/test-classes:$r/protocol/target/classes:$r/dataplane/target/test-classes:$r/dataplane/target/classes:$(cat "$r/protocol/target/bench.classpath"):$(cat "$r/dataplane/target/bench.classpath")"; }
FLAGS="--enable-native-access=ALL-UNNAMED --add-opens java.base/jdk.internal.misc=ALL-UNNAMED --add-modules jdk.incubator.vector"
main="dataplane/target/test-classes"
echo "== A = $base_commit, B = work tree"
# shellcheck disable=SC2086
"$JAVA_HOME/bin/java" $FLAGS -cp "$main" io.netreduce.dataplane.bench.AbMain "$payload" "$warmup" "$measured" \
  "$(cp_of "$base")" "$(cp_of "$NETREDUCE_ROOT")"
echo "== places swapped: A = work tree, B = $base_commit (B/A below is before/after)"
# shellcheck disable=SC2086
"$JAVA_HOME/bin/java" $FLAGS -cp "$main" io.netreduce.dataplane.bench.AbMain "$payload" "$warmup" "$measured" \
  "$(cp_of "$NETREDUCE_ROOT")" "$(cp_of "$base")"

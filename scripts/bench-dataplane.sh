#!/usr/bin/env bash
# Run the dataplane JMH benchmarks: summation kernels vs memcpy (protocol module) and the whole per-packet path on
# a memory port (dataplane module). A benchmark, not a test: run it alone on a quiet machine.
# Usage: [BENCH=regex] scripts/bench-dataplane.sh [JMH options...]
#   e.g. scripts/bench-dataplane.sh -f 1 -wi 3 -i 5
#        BENCH=PacketPathBenchmark scripts/bench-dataplane.sh -f 1 -wi 5 -i 10 -p payload=4096
#        BENCH=SumKernelBenchmark scripts/bench-dataplane.sh -f 1 -wi 2 -i 3 -r 1s -w 1s -p type=FP16,BF16
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$NETREDUCE_ROOT"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
# One reactor build compiles both modules' tests and writes each module's test class path (Maven Central is used
# for whatever ~/.m2 lacks on a fresh machine).
if ! ./mvnw -B -ntp -q -pl protocol,dataplane -am test-compile dependency:build-classpath \
    -Dmdep.includeScope=test -Dmdep.outputFile=target/bench.classpath >"$log" 2>&1; then
  echo "bench-dataplane: building the benchmarks failed (needs JDK 25 at \$JAVA_HOME and Maven Central or a" \
    "filled ~/.m2); Maven said:" >&2
  tail -n 40 "$log" >&2
  exit 1
fi
if [ $# -eq 0 ]; then set -- -f 1 -wi 3 -i 5; fi
CP="protocol/target/test-classes:protocol/target/classes:dataplane/target/test-classes:dataplane/target/classes"
CP="$CP:$(cat protocol/target/bench.classpath):$(cat dataplane/target/bench.classpath)"
FLAGS="--enable-native-access=ALL-UNNAMED --add-opens java.base/jdk.internal.misc=ALL-UNNAMED --add-modules jdk.incubator.vector"
# shellcheck disable=SC2086 # the flag string is meant to split into words
exec "$JAVA_HOME/bin/java" $FLAGS -cp "$CP" org.openjdk.jmh.Main -jvmArgsAppend "$FLAGS" \
  "$@" "io.netreduce.(dataplane|protocol).bench.${BENCH:-.*}"

#!/usr/bin/env bash
# Run the worker-side JMH benchmarks (host module): SwitchML's fp32 block fixed point per packet, the Vector API
# quantizer against the scalar version it replaced (QuantizerBenchmark). A benchmark, not a test: run it alone on a
# quiet machine.
# Usage: [BENCH=regex] scripts/bench-host.sh [JMH options...]
#   e.g. scripts/bench-host.sh -f 1 -wi 3 -i 5
#        BENCH=QuantizerBenchmark scripts/bench-host.sh -f 1 -wi 3 -i 5 -p elements=2048
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$NETREDUCE_ROOT"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
# One reactor build compiles the module's tests and writes its test class path (Maven Central is used for whatever
# ~/.m2 lacks on a fresh machine).
if ! ./mvnw -B -ntp -q -pl host -am test-compile dependency:build-classpath \
    -Dmdep.includeScope=test -Dmdep.outputFile=target/bench.classpath >"$log" 2>&1; then
  echo "bench-host: building the benchmarks failed (needs JDK 25 at \$JAVA_HOME and Maven Central or a" \
    "filled ~/.m2); Maven said:" >&2
  tail -n 40 "$log" >&2
  exit 1
fi
if [ $# -eq 0 ]; then set -- -f 1 -wi 3 -i 5; fi
CP="host/target/test-classes:host/target/classes:$(cat host/target/bench.classpath)"
FLAGS=$(sed -n 's:.*<netreduce.jvm.flags>\(.*\)</netreduce.jvm.flags>.*:\1:p' pom.xml | head -1)
# shellcheck disable=SC2086 # the flag string is meant to split into words
exec "$JAVA_HOME/bin/java" $FLAGS -cp "$CP" org.openjdk.jmh.Main -jvmArgsAppend "$FLAGS" \
  "$@" "io.netreduce.host.bench.${BENCH:-.*}"

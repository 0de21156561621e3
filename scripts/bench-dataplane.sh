#!/usr/bin/env bash
# Run the dataplane JMH benchmarks (summation kernel vs memcpy; whole per-packet path on a memory port).
# Usage: [BENCH=regex] scripts/bench-dataplane.sh [JMH options...]
#   e.g. scripts/bench-dataplane.sh -f 1 -wi 2 -i 3 -r 1s -w 1s
#        BENCH=SumKernelBenchmark scripts/bench-dataplane.sh -f 1 -wi 2 -i 3 -r 1s -w 1s -p type=FP16,BF16
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$NETREDUCE_ROOT"
./mvnw -B -ntp -o -q -pl dataplane -am test-compile -DskipTests
./mvnw -B -ntp -o -q -pl dataplane dependency:build-classpath -Dmdep.includeScope=test \
  -Dmdep.outputFile=target/bench.classpath >/dev/null
if [ $# -eq 0 ]; then set -- -f 1 -wi 2 -i 3 -r 1s -w 1s; fi
CP="dataplane/target/test-classes:dataplane/target/classes:$(cat dataplane/target/bench.classpath)"
exec "$JAVA_HOME/bin/java" --enable-native-access=ALL-UNNAMED --add-opens java.base/jdk.internal.misc=ALL-UNNAMED \
  --add-modules jdk.incubator.vector -cp "$CP" org.openjdk.jmh.Main \
  -jvmArgsAppend "--enable-native-access=ALL-UNNAMED --add-opens java.base/jdk.internal.misc=ALL-UNNAMED --add-modules jdk.incubator.vector" \
  "$@" "io.netreduce.dataplane.bench.${BENCH:-.*}"

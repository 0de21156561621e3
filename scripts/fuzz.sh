#!/usr/bin/env bash
# The long fuzz run (the test command runs the same fuzz targets briefly): the frame path on a memory port and the
# configuration loader, mutating a corpus seeded from the project's captures, valid ring traffic and the example
# configurations. A failure prints its seed; replay it with -Dnetreduce.test.seed=SEED. Any crash or hang found
# becomes a test that stays.
# usage: scripts/fuzz.sh [ITERATIONS] [SEED]     (default 200000 iterations per target, a fresh seed)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$NETREDUCE_ROOT"
iterations="${1:-200000}"
seed_arg=()
[ -n "${2:-}" ] && seed_arg=("-Dnetreduce.test.seed=$2")
exec ./mvnw -B -ntp test -pl protocol,dataplane,controlplane -am \
  -Dtest='FramePathFuzzTest,ConfigLoaderFuzzTest' -Dsurefire.failIfNoSpecifiedTests=false \
  -Dnetreduce.fuzz.iterations="$iterations" "${seed_arg[@]}"

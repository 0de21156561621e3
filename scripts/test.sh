#!/usr/bin/env bash
# The test command: installs prerequisites, then builds and runs every test (unit, property,
# namespace and capture tests; the namespace tests need root).
set -euo pipefail
source "$(dirname "$0")/env.sh"
cd "$NETREDUCE_ROOT"
bash scripts/setup.sh
./mvnw -B -ntp verify "$@"

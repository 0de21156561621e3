#!/usr/bin/env bash
# The test command: installs prerequisites, then builds and runs every test: the Java modules' unit, property,
# namespace and capture tests (the namespace tests need root), then the Python package's tests (pytest, with
# Debian's python3).
set -euo pipefail
source "$(dirname "$0")/env.sh"
cd "$NETREDUCE_ROOT"
bash scripts/setup.sh
./mvnw -B -ntp verify "$@"
"$NETREDUCE_PYTHON" -m pytest -q -p no:cacheprovider python/tests

#!/usr/bin/env bash
# The test command: installs prerequisites, then builds and runs every test: the Java modules' unit, property,
# namespace and capture tests (the namespace tests need root), then, as root, makes the JVMs' ahead-of-time caches
# for the jars just built (scripts/aot-train.sh: a training run on the test bed, which is a test of its own), then
# the Python package's tests (pytest, with Debian's python3), whose sidecars and daemon start with those caches.
set -euo pipefail
source "$(dirname "$0")/env.sh"
cd "$NETREDUCE_ROOT"
bash scripts/setup.sh
./mvnw -B -ntp verify "$@"
if [ "$(id -u)" -eq 0 ]; then
  bash scripts/aot-train.sh
else
  echo "test: not root: no ahead-of-time caches (scripts/aot-train.sh needs the namespace test bed)" >&2
fi
"$NETREDUCE_PYTHON" -m pytest -q -p no:cacheprovider python/tests

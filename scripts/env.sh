# Sourced by every netreduce script: one place for the JDK and the JVM flags.
# shellcheck shell=bash
NETREDUCE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export NETREDUCE_ROOT
if [ -z "${JAVA_HOME:-}" ] || ! "$JAVA_HOME/bin/java" -version 2>&1 | grep -q '"25'; then
  export JAVA_HOME=/usr/lib/jvm/temurin-25-jdk-amd64
fi
export PATH="$JAVA_HOME/bin:$PATH"
# Debian's python (sees python3-scapy), not a pyenv shim first on PATH.
export NETREDUCE_PYTHON="${NETREDUCE_PYTHON:-/usr/bin/python3}"

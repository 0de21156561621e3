#!/usr/bin/env bash
# Benchmark (not a test): AF_PACKET port round-trip latency percentiles with a TPACKET_V2 receive ring next to
# TPACKET_V3 (netreduce worker port-lat), one frame in flight, over a veth pair between two network namespaces;
# then the per-frame cost of draining a full ring and the receive rate of a flood, for both. Needs root and the shaded jar (./mvnw -B -ntp -o package -DskipTests).
# Usage: scripts/bench-port-latency.sh [--size BYTES] [--count N] [--flood-count N] [--mtu MTU]
set -euo pipefail
source "$(dirname "$0")/env.sh"
cd "$NETREDUCE_ROOT"
SIZE=64 COUNT=2000 FLOOD_COUNT=1000000 MTU=9000
while [ $# -gt 0 ]; do
  case "$1" in
    --size) SIZE=$2; shift 2 ;;
    --count) COUNT=$2; shift 2 ;;
    --flood-count) FLOOD_COUNT=$2; shift 2 ;;
    --mtu) MTU=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
JAR=worker/target/netreduce-worker.jar
[ -f "$JAR" ] || { echo "bench: $JAR missing; build with ./mvnw -B -ntp -o package -DskipTests" >&2; exit 1; }
FLAGS=$(sed -n 's:.*<netreduce.jvm.flags>\(.*\)</netreduce.jvm.flags>.*:\1:p' pom.xml | head -1)
A=nrl-a-$$ B=nrl-b-$$
cleanup() {
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
}
trap cleanup EXIT
ip netns add "$A"; ip netns add "$B"
for ns in "$A" "$B"; do
  # No IPv6: the kernel then sends nothing of its own on the link.
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
done
ip -n "$A" link add eth0 mtu "$MTU" type veth peer name eth0 mtu "$MTU" netns "$B"
ip -n "$A" link set eth0 up; ip -n "$B" link set eth0 up

port_lat() {
  # shellcheck disable=SC2086
  java $FLAGS -jar "$JAR" port-lat \
    --ns-a "$A" --dev-a eth0 --ns-b "$B" --dev-b eth0 "$@" 2>&1 | grep '^port-lat' || true
}

echo "# round trips, one ${SIZE}-byte frame in flight"
port_lat --rx-ring V2 --size "$SIZE" --count "$COUNT"
port_lat --rx-ring V3 --size "$SIZE" --count "$COUNT"
port_lat --rx-ring V3 --size "$SIZE" --count "$COUNT" --rx-block-size 16384 --rx-blocks 1024
# 1500 frames fit both rings at MTU 9000 (a V2 ring of 16 MiB holds 1792 MTU-sized slots).
echo "# drain 1500 queued frames, 200 rounds"
for size in 64 1024; do
  port_lat --rx-ring V2 --drain --size "$size" --count 1500
  port_lat --rx-ring V3 --drain --size "$size" --count 1500
done
echo "# flood of $FLOOD_COUNT frames"
for size in 64 1024; do
  port_lat --rx-ring V2 --flood --size "$size" --count "$FLOOD_COUNT"
  port_lat --rx-ring V3 --flood --size "$size" --count "$FLOOD_COUNT"
done

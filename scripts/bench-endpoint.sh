#!/usr/bin/env bash
# Benchmark (not a test): RC endpoint goodput (netreduce worker write-bw) next to iperf3 UDP goodput over the
# same veth pair between two network namespaces, in one run, and their ratio. Needs root, iperf3 (scripts/setup.sh)
# and the shaded jar (./mvnw -B -ntp -o package -DskipTests).
# Usage: scripts/bench-endpoint.sh [--size BYTES] [--iterations N] [--pmtu P] [--op write|send] [--seconds S]
set -euo pipefail
source "$(dirname "$0")/env.sh"
cd "$NETREDUCE_ROOT"
SIZE=1048576 ITERATIONS=256 PMTU=4096 OP=write SECONDS_IPERF=5
while [ $# -gt 0 ]; do
  case "$1" in
    --size) SIZE=$2; shift 2 ;;
    --iterations) ITERATIONS=$2; shift 2 ;;
    --pmtu) PMTU=$2; shift 2 ;;
    --op) OP=$2; shift 2 ;;
    --seconds) SECONDS_IPERF=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
JAR=worker/target/netreduce-worker.jar
[ -f "$JAR" ] || { echo "bench: $JAR missing; build with ./mvnw -B -ntp -o package -DskipTests" >&2; exit 1; }
command -v iperf3 >/dev/null || { echo "bench: iperf3 missing; run scripts/setup.sh" >&2; exit 1; }
FLAGS=$(sed -n 's:.*<netreduce.jvm.flags>\(.*\)</netreduce.jvm.flags>.*:\1:p' pom.xml | head -1)
A=nrb-a-$$ B=nrb-b-$$
cleanup() {
  [ -n "${IPERF_PID:-}" ] && kill "$IPERF_PID" 2>/dev/null || true
  [ -n "${SERVER_PID:-}" ] && kill "$SERVER_PID" 2>/dev/null || true
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
}
trap cleanup EXIT
ip netns add "$A"; ip netns add "$B"
ip link add "nba$$" type veth peer name "nbb$$"
ip link set "nba$$" netns "$A"; ip link set "nbb$$" netns "$B"
ip -n "$A" link set "nba$$" name eth0; ip -n "$B" link set "nbb$$" name eth0
for ns in "$A" "$B"; do ip -n "$ns" link set eth0 mtu 9000 up; ip -n "$ns" link set lo up; done
ip -n "$A" addr add 10.98.0.1/24 dev eth0; ip -n "$B" addr add 10.98.0.2/24 dev eth0

# shellcheck disable=SC2086
ip netns exec "$B" java $FLAGS -jar "$JAR" write-bw --server --dev eth0 > /tmp/bench-endpoint-server.$$ 2>&1 &
SERVER_PID=$!
# shellcheck disable=SC2086
RC_LINE=$(ip netns exec "$A" java $FLAGS -jar "$JAR" write-bw --connect 10.98.0.2 --dev eth0 \
  --size "$SIZE" --iterations "$ITERATIONS" --pmtu "$PMTU" --op "$OP" 2>&1 | grep '^write-bw role=client')
wait "$SERVER_PID" || true; SERVER_PID=
echo "$RC_LINE"
RC_GBPS=$(sed -n 's/.*goodput_gbps=\([0-9.]*\).*/\1/p' <<<"$RC_LINE")

ip netns exec "$B" iperf3 -s -1 >/dev/null 2>&1 &
IPERF_PID=$!
sleep 0.5
# UDP datagrams of PMTU-sized payload at unlimited rate; goodput = what the receiver got.
IPERF_JSON=$(ip netns exec "$A" iperf3 -c 10.98.0.2 -u -b 0 -l "$PMTU" -t "$SECONDS_IPERF" -J)
wait "$IPERF_PID" || true; IPERF_PID=
# Newer iperf3 reports the receiver's side as end.sum_received; older ones only end.sum (sender rate + loss).
IPERF_GBPS=$(/usr/bin/python3 -c '
import json, sys
e = json.load(sys.stdin)["end"]; s = e["sum"]; lost = s.get("lost_percent", 0)
r = e.get("sum_received")
bps = r["bits_per_second"] if r else s["bits_per_second"] * (1 - lost / 100)
print("%.3f %.2f" % (bps / 1e9, lost))' <<<"$IPERF_JSON")
echo "iperf3 udp -l $PMTU: receiver goodput_gbps=${IPERF_GBPS% *} lost_percent=${IPERF_GBPS#* }"
/usr/bin/python3 -c "print('ratio rc/iperf3 = %.2f' % ($RC_GBPS / ${IPERF_GBPS% *}))"

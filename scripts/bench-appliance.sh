#!/usr/bin/env bash
# The appliance alone (a benchmark, not a test): `netreduce worker loadgen` plays W ranks' ring traffic from one
# namespace into the daemon over a veth pair (MTU 9000) and checks every result; no W endpoints share the cores.
# Reports, per W and payload: gradient Gbit/s and Mpps into the appliance, and the daemon's CPU-seconds per GiB of
# gradient it received (utime + stime from /proc/PID/stat over the run).
#
# usage: scripts/bench-appliance.sh [--workers "2 4 8"] [--payloads "1024 4096"] [--cycles 4] [--no-build]
#                                   [--out docs/bench/appliance.csv] [--prefix P]
# Needs root.
set -euo pipefail
source "$(dirname "$0")/env.sh"
cd "$NETREDUCE_ROOT"

workers_list="2 4 8"
payloads="1024 4096"
cycles=4
build=1
out="docs/bench/appliance.csv"
prefix=nrap
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) workers_list="$2"; shift 2 ;;
    --payloads) payloads="$2"; shift 2 ;;
    --cycles) cycles="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    --out) out="$2"; shift 2 ;;
    --prefix) prefix="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-appliance: unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "bench-appliance: needs root (namespaces)" >&2; exit 2; }
netreduce="$NETREDUCE_ROOT/aggregator-daemon/target/netreduce"
if [ "$build" -eq 1 ]; then
  bash scripts/setup.sh
  ./mvnw -B -ntp -q -DskipTests package
fi
[ -x "$netreduce" ] || { echo "bench-appliance: $netreduce missing: build with ./mvnw -B -ntp -DskipTests package" >&2; exit 1; }

lg="${prefix}-lg"
ap="${prefix}-ap"
work="$(mktemp -d /tmp/netreduce-bench-appliance.XXXXXX)"
daemon_pid=""
cleanup() {
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null || true
  ip netns del "$lg" 2>/dev/null || true
  ip netns del "$ap" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
cleanup; work="$(mktemp -d /tmp/netreduce-bench-appliance.XXXXXX)"
ip netns add "$lg"
ip netns add "$ap"
ip link add "${prefix}lg0" type veth peer name "${prefix}ap0"
ip link set "${prefix}lg0" netns "$lg" name eth0 mtu 9000 up
ip link set "${prefix}ap0" netns "$ap" name eth0 mtu 9000 up
ip -n "$lg" link set lo up
ip -n "$ap" link set lo up

mkdir -p "$(dirname "$out")"
echo "world,payload,msg_len,window,ok,gradient_gbps_in,mpps_in,appliance_cpu_s,gradient_gib,cpu_s_per_gib" > "$out"
hz="$(getconf CLK_TCK)"
for world in $workers_list; do
  for payload in $payloads; do
    msg_len=16   # a window of 8 such messages per rank stays within the appliance's receive ring
    {
      echo "appliance:"
      echo "  ports: [ { name: eth0, mtu: 9000 } ]"
      echo "  memoryBudget: 512MiB"
      echo "  api: { listen: \"unix:$work/api.sock\" }"
      echo "  metrics: { listen: \"127.0.0.1:0\" }"
      echo "jobs:"
      echo "  - name: load"
      echo "    rings:"
      echo "      - { id: 1, elementType: int32, window: 8, msgLen: $msg_len, payloadSize: $payload, pmtu: $payload,"
      echo "          members: ["
      for r in $(seq 0 $(( world - 1 ))); do
        sep=","; [ "$r" -eq $(( world - 1 )) ] && sep=""
        printf '            { rank: %d, ip: 10.122.0.%d, mac: "02:7a:00:00:00:%02x", qpn: %d }%s\n' \
          "$r" $(( r + 1 )) $(( r + 1 )) $(( 0x100 + r )) "$sep"
      done
      echo "          ] }"
    } > "$work/netreduce.yaml"
    ip netns exec "$ap" "$netreduce" daemon --config "$work/netreduce.yaml" > "$work/daemon.log" 2>&1 &
    daemon_pid=$!
    for _ in $(seq 100); do
      "$netreduce" ctl --api "unix:$work/api.sock" --timeout 1 rings >/dev/null 2>&1 && break
      sleep 0.2
    done
    before=$(awk '{print $14 + $15}' "/proc/$daemon_pid/stat")
    result="$(ip netns exec "$lg" "$netreduce" worker loadgen --dev eth0 --world "$world" --payload "$payload" \
      --msg-len "$msg_len" --window 8 --cycles "$cycles" | tail -n 1)" || true
    after=$(awk '{print $14 + $15}' "/proc/$daemon_pid/stat")
    kill "$daemon_pid" 2>/dev/null || true; wait "$daemon_pid" 2>/dev/null || true; daemon_pid=""
    echo "$result"
    "$NETREDUCE_PYTHON" - "$result" "$world" "$payload" "$msg_len" $(( after - before )) "$hz" >> "$out" <<'PY'
import re, sys
line, world, payload, msg_len, ticks, hz = sys.argv[1:]
fields = dict(re.findall(r"(\w+)=(\S+)", line))
cpu = int(ticks) / int(hz)
gib = int(fields.get("gradient_bytes", 0)) / 2**30
ok = fields.get("ok", "false")
print(f"{world},{payload},{msg_len},8,{ok},{fields.get('gradient_gbps_in', 0)},{fields.get('mpps_in', 0)},"
      f"{cpu:.2f},{gib:.3f},{cpu / gib if gib else 0:.3f}")
PY
  done
done
echo "bench-appliance: results in $out"
column -s, -t "$out"

#!/usr/bin/env bash
# The unmodified p4app-switchML client (its allreduce_benchmark, built by scripts/interop/switchml-client.sh build)
# through the netreduce appliance on the namespace test bed: W worker namespaces, each running the published
# client on a TAP joined to its eth0 (switchml-client.sh attach), the daemon in the appliance namespace serving the
# bed's SwitchML address (10.77.0.254) and the controller's gRPC service on its management interface
# (10.77.0.253:50099), where the clients register as they would with the Tofino's controller.
#
# Exit status 0 only if every worker printed the benchmark's "Data verified successfully." (its exit status says
# nothing: it is 0 when verification fails) and the appliance summed every packet once. Not part of CI: it needs
# the DPDK build (docs/interop.md, "The published SwitchML client").
#
# usage: scripts/interop/switchml-bed.sh [--workers W (2)] [--numel 64|256 (256)] [--tensor-numel N (262144)]
#                                         [--jobs J (4)] [--type int32|float (int32)] [--prefix P (ix)]
#                                         [--timeout-ms T (100)]
# T is the client's retransmission timeout. Keep it well above what the bed's round trip can be: W clients that
# busy-poll a core each share this machine's cores with the appliance, and a first-batch retransmission of the
# published client goes to the wrong slot (its pkt_id + 1 bug, docs/interop.md), which corrupts the job's data.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../env.sh"
source "$here/../lib/appliance.sh"
cd "$NETREDUCE_ROOT"

workers=2 numel=256 tensor=262144 jobs=4 type=int32 prefix=ix timeout_ms=100
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) workers="$2"; shift 2 ;;
    --numel) numel="$2"; shift 2 ;;
    --tensor-numel) tensor="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --type) type="$2"; shift 2 ;;
    --prefix) prefix="$2"; shift 2 ;;
    --timeout-ms) timeout_ms="$2"; shift 2 ;;
    *) echo "switchml-bed: unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "switchml-bed: needs root" >&2; exit 2; }
client="$here/switchml-client.sh"
benchmark="$("$client" path)"
[ -x "$benchmark" ] || { echo "switchml-bed: build the client first: $client build" >&2; exit 2; }
netreduce="$NETREDUCE_ROOT/aggregator-daemon/target/netreduce"
work="$(mktemp -d /tmp/netreduce-switchml-bed.XXXXXX)"
daemon_pid=""
pids=()
cleanup() {
  local status=$?
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  [ -n "$daemon_pid" ] && { kill "$daemon_pid" 2>/dev/null || true; wait "$daemon_pid" 2>/dev/null || true; }
  bash scripts/testbed.sh down --prefix "$prefix" >/dev/null 2>&1 || true
  if [ "$status" -ne 0 ]; then echo "switchml-bed: logs kept in $work" >&2; else rm -rf "$work"; fi
  exit "$status"
}
trap cleanup EXIT

bash scripts/testbed.sh up -w "$workers" --mtu 9000 --prefix "$prefix" >/dev/null
bed_switchml_config "$work/netreduce.yaml" "unix:$work/api.sock" ""
bed_start_daemon "$prefix" "$netreduce" "$work/netreduce.yaml" "unix:$work/api.sock" "$work" switchml-bed >/dev/null
for i in $(seq 0 $(( workers - 1 ))); do
  mac="$("$client" attach --netns "$prefix-w$i" --tap "swml$i")"
  mkdir -p "$work/w$i"
  "$client" config --rank "$i" --workers "$workers" --worker-ip "10.77.0.$(( i + 1 ))" --tap "swml$i" --mac "$mac" \
    --controller 10.77.0.253:50099 --numel "$numel" --timeout-ms "$timeout_ms" --out "$work/w$i/switchml.cfg" >/dev/null
done
echo "switchml-bed: $workers published clients, $numel elements per packet, $jobs jobs of $tensor $type elements"
for i in $(seq 0 $(( workers - 1 ))); do
  ( cd "$work/w$i" && GLOG_logtostderr=1 exec timeout 300 ip netns exec "$prefix-w$i" "$benchmark" \
      --tensor-numel "$tensor" --tensor-type "$type" --num-jobs "$jobs" --num-warmup-jobs 0 --verify 1 --err 0 \
      > "$work/w$i/out.log" 2>&1 ) &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || true; done
pids=()
ok=1
for i in $(seq 0 $(( workers - 1 ))); do
  if grep -q "Data verified successfully" "$work/w$i/out.log"; then
    echo "worker $i: $(grep -c '^Job(s)' "$work/w$i/out.log") jobs, data verified successfully"
  else
    ok=0; echo "worker $i: NOT verified"; tail -n 5 "$work/w$i/out.log"
  fi
done
"$netreduce" ctl --api "unix:$work/api.sock" switchml
"$netreduce" ctl --api "unix:$work/api.sock" counters 2>/dev/null | awk '$NF != "0"'
[ "$ok" -eq 1 ]

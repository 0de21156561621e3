#!/usr/bin/env bash
# The main job: NetReduce all-reduce across worker namespaces through the appliance.
#
#   1. builds netreduce (scripts/setup.sh installs missing packages; ./mvnw package) and makes the JVMs'
#      ahead-of-time caches for the new jars (scripts/aot-train.sh, about 50 s; nothing when they are fresh),
#   2. brings the namespace test bed up (scripts/testbed.sh: W workers, switch with the UDP 4791 redirect,
#      appliance namespace; MTU 9000 so that 4096-byte RoCE payloads fit),
#   3. starts the daemon in the appliance namespace with a generated configuration (one ring of the W workers'
#      addresses 10.77.0.1..W, fp32, window 16, MsgLen 16, payload 4096 = PMTU),
#   4. runs W `netreduce worker allreduce` processes, one per worker namespace, each all-reducing a 64 MiB fp32
#      tensor ITERATIONS times and checking every result against the exact rank-order sum,
#   5. prints per-worker goodput and bytes on the wire, the appliance's counters and CPU time, and a summary,
#   6. tears everything down (on success, failure or interrupt).
#
# With --racks R (paper §3.3): the bed has R racks of W/R workers, each with its switch and leaf appliance, and a
# spine switch with the spine appliance (testbed.sh --racks); three or more daemons (leaf-a, leaf-b, ..., spine)
# start from ONE topology file, each with `--name`; the workers check every result against the hierarchy's sum
# (`worker allreduce --racks`: each rack in rank order, then the racks); the demo also prints the bytes on each
# rack's spine link (uplink) per call and `ctl ctt` of every appliance.
#
# With --trees T (PANAMA §4.1, several aggregation trees per job): the bed's switch has T appliances (testbed.sh
# --trees), each tree's RoCE steered to its own by the tree's UDP source port; T daemons (tree-a, tree-b, ...) start
# from ONE topology file whose rings each name their appliance; the workers spread every call's messages round robin
# over the T rings (`worker allreduce --trees T`, tree t = ring 1 + t, each with its own ECN window); the demo prints
# each tree's line of every worker and the bytes each appliance's port received and sent, and their balance.
#
# With --protocol switchml (SwitchML, NSDI '21): the same job over SwitchML's UDP protocol instead: the daemon serves
# the bed's SwitchML address and its controller on the appliance's management interface; each worker registers with
# the controller as p4app-switchML's client does (which opens the session's job on the appliance) and sends its
# packets to the "switch"; fp32 goes in SwitchML's block fixed point (each result within the documented bound),
# int32 (--type int32) exactly; --elements picks the packet size (64, 256 as the published client; default 1024).
#
# Exit status: 0 when every worker's every result was exact (or, SwitchML fp32, within its bound), 1 otherwise, 2 on
# a usage error.
#
# usage: scripts/demo.sh [--size BYTES|64MiB] [--iterations N] [--workers W] [--racks R | --trees T] [--prefix P]
#                        [--no-build]
#                        [--timeout SECONDS] [--idle busy-spin|yield|backoff|sleep|poll]
#                        [--worker-idle poll|yield] [--port-type af_packet|af_xdp]
#                        [--protocol netreduce|switchml] [--type fp32|int32] [--elements N (switchml)]
# --port-type af_xdp (or NETREDUCE_PORT_TYPE=af_xdp) opens the appliance's port as an AF_XDP socket with the
# daemon's XDP program (copy mode on the bed's veths) instead of AF_PACKET.
# Needs root (network namespaces). On the shared 2-core development machine the default run (W=4, 64 MiB, 3
# iterations) takes about 30-40 s after the build (workers: ~12-25 s).
set -euo pipefail
source "$(dirname "$0")/env.sh"
source "$(dirname "$0")/lib/appliance.sh"
cd "$NETREDUCE_ROOT"

size=$((64 << 20))
iterations=3
workers=4
prefix=nr
build=1
timeout=600
idle=""
worker_idle=""
window=16
msg_len=16
payload=4096
ring_id=1
racks=0
trees=1
protocol=netreduce
type=fp32
elements=1024

to_bytes() { # 64MiB, 1GiB, 512KiB or plain bytes
  local v="$1"
  case "$v" in
    *GiB) echo $(( ${v%GiB} << 30 )) ;;
    *MiB) echo $(( ${v%MiB} << 20 )) ;;
    *KiB) echo $(( ${v%KiB} << 10 )) ;;
    *[!0-9]*|'') echo "demo: not a size: $v" >&2; exit 2 ;;
    *) echo "$v" ;;
  esac
}

while [ $# -gt 0 ]; do
  case "$1" in
    --size) size="$(to_bytes "$2")"; shift 2 ;;
    --iterations) iterations="$2"; shift 2 ;;
    -w|--workers) workers="$2"; shift 2 ;;
    --prefix) prefix="$2"; shift 2 ;;
    --racks) racks="$2"; shift 2 ;;
    --trees) trees="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    --timeout) timeout="$2"; shift 2 ;;
    --idle) idle="$2"; shift 2 ;;
    --worker-idle) worker_idle="$2"; shift 2 ;;
    --port-type) export NETREDUCE_PORT_TYPE="$2"; shift 2 ;;
    --protocol) protocol="$2"; shift 2 ;;
    --type) type="$2"; shift 2 ;;
    --elements) elements="$2"; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "demo: unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "demo: needs root (network namespaces, veth, tc)" >&2; exit 2; }
case "$protocol" in netreduce|switchml) ;; *) echo "demo: --protocol netreduce or switchml" >&2; exit 2 ;; esac
case "$type" in fp32|int32) ;; *) echo "demo: --type fp32 or int32" >&2; exit 2 ;; esac
[ "$protocol" = netreduce ] && [ "$type" != fp32 ] && { echo "demo: --type int32 goes with --protocol switchml" >&2; exit 2; }
[ "$protocol" = switchml ] && [ "$racks" -ne 0 ] && { echo "demo: --racks goes with --protocol netreduce" >&2; exit 2; }
[ "$trees" -ge 1 ] && [ "$trees" -le 16 ] || { echo "demo: --trees must be 1..16" >&2; exit 2; }
[ "$trees" -gt 1 ] && { [ "$protocol" = switchml ] || [ "$racks" -ne 0 ]; } && \
  { echo "demo: --trees goes with --protocol netreduce on a flat bed (not --racks)" >&2; exit 2; }

netreduce="$NETREDUCE_ROOT/aggregator-daemon/target/netreduce"
work="$(mktemp -d /tmp/netreduce-demo.XXXXXX)"
api="unix:$work/api.sock"
daemon_pid=""
daemon_pids=()
worker_pids=()
api_port=9740
token="$work/api.token"

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  for pid in "${worker_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in ${daemon_pid:+"$daemon_pid"} "${daemon_pids[@]}"; do
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  bash scripts/testbed.sh down --prefix "$prefix" >/dev/null 2>&1 || true
  if [ "$status" -ne 0 ] && [ -d "$work" ]; then
    mkdir -p /tmp/netreduce-demo-logs
    cp "$work"/*.log /tmp/netreduce-demo-logs/ 2>/dev/null || true
    echo "demo: logs kept in /tmp/netreduce-demo-logs" >&2
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'echo "demo: interrupted" >&2; exit 130' INT TERM

step() { printf '\n== %s\n' "$*"; }

if [ "$build" -eq 1 ]; then
  step "build"
  bash scripts/setup.sh
  ./mvnw -B -ntp -q -DskipTests package
  bash scripts/aot-train.sh   # the JVMs' start-up caches for the jars just built (docs/operations.md)
fi
[ -x "$netreduce" ] || { echo "demo: $netreduce missing (build first)" >&2; exit 2; }

appliance_ns=()   # multi-rack: the appliance namespaces, leaves in rack order then the spine
appliance_name=()
if [ "$trees" -gt 1 ]; then
  step "test bed: $workers workers, MTU 9000, $trees appliances on the switch (one per tree)"
  bash scripts/testbed.sh up -w "$workers" --mtu 9000 --trees "$trees" --prefix "$prefix"

  for t in $(seq 0 $(( trees - 1 ))); do
    if [ "$t" -eq 0 ]; then appliance_ns+=("${prefix}-app"); else appliance_ns+=("${prefix}-app$t"); fi
    appliance_name+=("$(bed_tree_name "$t")")
  done
  step "appliances: ${appliance_name[*]}, one topology file, each daemon with --name"
  ( umask 077; head -c 24 /dev/urandom | base64 > "$token" )
  bed_trees_config "$work/netreduce.yaml" "$api_port" "$token" demo "$workers" "$trees" "$ring_id" "$window" \
    "$msg_len" "$payload" "$idle"
  cat "$work/netreduce.yaml"
  for a in "${!appliance_ns[@]}"; do
    bed_start_named_daemon "${appliance_ns[$a]}" "$netreduce" "$work/netreduce.yaml" "${appliance_name[$a]}" \
      "$api_port" "$token" "$work/daemon-${appliance_name[$a]}.log"
    daemon_pids+=("$daemon_pid")
    daemon_pid=""
  done
elif [ "$racks" -eq 0 ]; then
  step "test bed: $workers workers, MTU 9000"
  bash scripts/testbed.sh up -w "$workers" --mtu 9000 --prefix "$prefix"

  step "appliance: daemon in ${prefix}-app"
  if [ "$protocol" = switchml ]; then
    bed_switchml_config "$work/netreduce.yaml" "$api" "$idle"
  else
    bed_ring_config "$work/netreduce.yaml" "$api" demo "$workers" "$ring_id" "$window" "$msg_len" "$payload" "$idle"
  fi
  bed_start_daemon "$prefix" "$netreduce" "$work/netreduce.yaml" "$api" "$work" demo
  grep -ho 'port eth0: AF_XDP .*' "$work/daemon.log" || true   # how an af_xdp port was bound
  daemon_pids=("$daemon_pid")
  daemon_pid=""
else
  step "test bed: $workers workers in $racks racks, MTU 9000"
  bash scripts/testbed.sh up -w "$workers" --racks "$racks" --mtu 9000 --prefix "$prefix"

  for k in $(seq 0 $(( racks - 1 ))); do
    appliance_ns+=("${prefix}-app$k"); appliance_name+=("$(bed_leaf_name "$k")")
  done
  appliance_ns+=("${prefix}-spine"); appliance_name+=(spine)
  step "appliances: ${appliance_name[*]}, one topology file, each daemon with --name"
  # The API's bearer token, shared by the daemons (each reads it; none has to create it).
  ( umask 077; head -c 24 /dev/urandom | base64 > "$token" )
  bed_racks_config "$work/netreduce.yaml" "$api_port" "$token" demo "$workers" "$racks" "$ring_id" "$window" \
    "$msg_len" "$payload" "$idle"
  cat "$work/netreduce.yaml"
  for a in "${!appliance_ns[@]}"; do
    bed_start_named_daemon "${appliance_ns[$a]}" "$netreduce" "$work/netreduce.yaml" "${appliance_name[$a]}" \
      "$api_port" "$token" "$work/daemon-${appliance_name[$a]}.log"
    daemon_pids+=("$daemon_pid")
    daemon_pid=""
  done
fi
ctl_at() { # index of appliance_ns (multi-rack) or empty (flat), then ctl arguments
  local a="$1"; shift
  if [ -z "$a" ]; then "$netreduce" ctl --api "$api" "$@"; return; fi
  ip netns exec "${appliance_ns[$a]}" "$netreduce" ctl --api "127.0.0.1:$api_port" --token-file "$token" "$@"
}
# Bytes on rack k's spine link (uplink, in the rack switch): tx is what went up, rx what came down.
uplink_bytes() { # k tx|rx
  ip netns exec "${prefix}-sw$1" cat "/sys/class/net/uplink/statistics/$2_bytes"
}
uplink_before=()
for k in $(seq 0 $(( racks - 1 ))); do uplink_before+=("$(uplink_bytes "$k" tx) $(uplink_bytes "$k" rx)"); done

# The appliances' CPU time (user + system clock ticks, fields 14 and 15 of /proc/PID/stat), and its system part
# alone (the kernel's share: AF_PACKET rings, veth, the transmit kick, poll(2)), summed over the daemons.
cpu_ticks() { local t=0 p; for p in "${daemon_pids[@]}"; do t=$(( t + $(awk '{print $14 + $15}' "/proc/$p/stat") )); done; echo "$t"; }
sys_ticks() { local t=0 p; for p in "${daemon_pids[@]}"; do t=$(( t + $(awk '{print $15}' "/proc/$p/stat") )); done; echo "$t"; }
ticks_before="$(cpu_ticks)"
sys_before="$(sys_ticks)"
racks_option=()
[ "$racks" -eq 0 ] || racks_option=(--racks "$(bed_racks_spec "$workers" "$racks")")
[ "$trees" -eq 1 ] || racks_option=(--trees "$trees")
# Bytes each appliance's port received and sent (its dataplane's port counters), for the trees' balance.
port_bytes() { # index of appliance_ns, rx|tx
  ctl_at "$1" counters 2>/dev/null | awk -v c="port eth0 $2_bytes" 'index($0, c) == 1 { print $NF }'
}
appliance_before=()
if [ "$trees" -gt 1 ]; then
  for a in "${!appliance_ns[@]}"; do appliance_before+=("$(port_bytes "$a" rx) $(port_bytes "$a" tx)"); done
fi

protocol_options=(--ring-id "$ring_id" --mode netreduce --window "$window" --msg-len "$msg_len" --pmtu "$payload")
[ "$protocol" = netreduce ] || protocol_options=(--protocol switchml --controller 10.77.0.253:50099 \
  --elements "$elements")
step "workers: $workers x netreduce worker allreduce, $protocol, $type, $size bytes, $iterations iterations"
start_ns="$(date +%s%N)"
for i in $(seq 0 $(( workers - 1 ))); do
  timeout --signal=TERM --kill-after=10 "$timeout" \
    ip netns exec "${prefix}-w$i" "$netreduce" worker allreduce --rank "$i" --world "$workers" --dev eth0 \
      --type "$type" --size "$size" --iterations "$iterations" --timeout 30 --json "${protocol_options[@]}" \
      ${worker_idle:+--idle "$worker_idle"} "${racks_option[@]}" \
      > "$work/worker$i.log" 2>&1 &
  worker_pids+=($!)
done
failed=0
for i in "${!worker_pids[@]}"; do
  if ! wait "${worker_pids[$i]}"; then
    failed=1
  fi
done
worker_pids=()
elapsed_ms=$(( ($(date +%s%N) - start_ns) / 1000000 ))
ticks_after="$(cpu_ticks)"
sys_after="$(sys_ticks)"
hz="$(getconf CLK_TCK)"
export DEMO_APPLIANCE_SYS_TICKS=$(( sys_after - sys_before ))

for i in $(seq 0 $(( workers - 1 ))); do
  printf '\n-- worker %d\n' "$i"
  grep -E '^(iteration|summary|tree [0-9])' "$work/worker$i.log" || tail -n 20 "$work/worker$i.log"
done

if [ "$trees" -gt 1 ]; then
  for a in "${!appliance_ns[@]}"; do
    step "${appliance_name[$a]} (${appliance_ns[$a]}): counters (non-zero)"
    ctl_at "$a" counters 2>/dev/null | awk 'NR == 1 || $NF != "0"'
  done
  step "bytes through each tree's appliance (its port's counters during the calls; |U| = $size bytes per call)"
  rx_all=()
  for a in "${!appliance_ns[@]}"; do
    read -r rx0 tx0 <<< "${appliance_before[$a]}"
    rx=$(( $(port_bytes "$a" rx) - rx0 )); tx=$(( $(port_bytes "$a" tx) - tx0 ))
    rx_all+=("$rx")
    awk -v t="$a" -v n="${appliance_name[$a]}" -v rx="$rx" -v tx="$tx" -v it="$iterations" -v u="$size" -v w="$workers" 'BEGIN {
      printf "tree %d (%s): received %d bytes (%.3f |U| per call per worker), sent %d bytes\n",
        t, n, rx, rx / it / u / w, tx }'
  done
  printf '%s\n' "${rx_all[@]}" | awk '{ v[NR] = $1; s += $1; if (NR == 1 || $1 > mx) mx = $1; if (NR == 1 || $1 < mn) mn = $1 }
    END { printf "balance: smallest / largest tree = %.3f (1.000 = every tree the same bytes)\n", mn / mx }'
elif [ "$racks" -eq 0 ]; then
  if [ "$protocol" = switchml ]; then
    step "appliance: ctl switchml"
    ctl_at "" switchml 2>&1 || true
  fi
  step "appliance counters (non-zero)"
  ctl_at "" counters 2>/dev/null | awk 'NR == 1 || $NF != "0"'
else
  for a in "${!appliance_ns[@]}"; do
    step "${appliance_name[$a]} (${appliance_ns[$a]}): ctl ctt"
    ctl_at "$a" ctt 2>&1 || true
    step "${appliance_name[$a]}: counters (non-zero)"
    ctl_at "$a" counters 2>/dev/null | awk 'NR == 1 || $NF != "0"'
  done
  step "bytes on the spine links (each rack's uplink; |U| = $size bytes per call; set-up and ACKs included)"
  for k in $(seq 0 $(( racks - 1 ))); do
    read -r tx0 rx0 <<< "${uplink_before[$k]}"
    tx=$(( $(uplink_bytes "$k" tx) - tx0 )); rx=$(( $(uplink_bytes "$k" rx) - rx0 ))
    awk -v k="$k" -v n="$(bed_leaf_name "$k")" -v tx="$tx" -v rx="$rx" -v it="$iterations" -v u="$size" 'BEGIN {
      printf "rack %d (%s): up %d bytes (%.0f per call = %.3f |U|), down %d bytes (%.0f per call = %.3f |U|)\n",
        k, n, tx, tx / it, tx / it / u, rx, rx / it, rx / it / u }'
  done
fi

step "summary"
summary_status=0
"$NETREDUCE_PYTHON" - "$work" "$workers" "$size" "$iterations" "$elapsed_ms" \
    "$(( ticks_after - ticks_before ))" "$hz" "$protocol" "$type" <<'EOF' || summary_status=$?
import json, os, sys
work, workers, size, iterations, elapsed_ms, ticks, hz, protocol, dtype = sys.argv[1:]
bounded = protocol == "switchml" and dtype == "fp32"
passed = "within bound" if bounded else "exact"
workers, size, iterations, elapsed_ms, ticks, hz = int(workers), int(size), int(iterations), int(elapsed_ms), int(ticks), int(hz)
rows, ok_all = [], True
for rank in range(workers):
    summary = None
    with open(os.path.join(work, f"worker{rank}.log"), encoding="utf-8", errors="replace") as log:
        for line in log:
            if line.startswith("{"):
                summary = json.loads(line)
    if summary is None:
        ok_all = False
        rows.append((rank, "-", "-", "-", "-", "-", "-", "-", "no summary (crashed or timed out)"))
        continue
    ok_all &= bool(summary["ok"])
    verdict = passed if summary["ok"] else (summary.get("error") or summary.get("first_mismatch") or "mismatch")
    rows.append((rank, f'{summary["matched"]}/{iterations}', f'{summary["mean_ms"]:.0f}', f'{summary["best_ms"]:.0f}',
                 f'{summary["goodput_gbps"]:.3f}', f'{summary.get("rdma_bytes_sent", summary.get("payload_bytes_sent", 0)) / (size * iterations):.3f}',
                 f'{summary["wire_bytes_sent"] / 2**20:.1f}', f'{summary["retransmitted_packets"]}', verdict[:60]))
head = ("rank", "exact", "mean ms", "best ms", "Gbit/s", "sent/|U|", "wire MiB (all calls)", "retx", "result")
widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
for row in (head, *rows):
    print("  ".join(str(x).rjust(w) if i < len(row) - 1 else str(x) for i, (x, w) in enumerate(zip(row, widths))))
cpu = ticks / hz
print(f"\ntensor {size} bytes {dtype} x {iterations} iterations, {workers} workers over {protocol}; wall time {elapsed_ms / 1000:.1f} s "
      f"(JVM start-up and connection set-up included)")
system = int(os.environ.get("DEMO_APPLIANCE_SYS_TICKS", "0")) / hz
gib_in = workers * size * iterations / 2**30
print(f"appliance CPU time during the run: {cpu:.1f} s ({100 * cpu / max(elapsed_ms / 1000, 1e-9):.0f} % of one core; "
      f"{system:.1f} s of it in the kernel), {cpu / gib_in:.2f} CPU-s per GiB of gradient received")
print("sent/|U|: payload each worker sent per all-reduce (RDMA payload; SwitchML: elements, retransmissions")
print("included), in tensors (INA: 1 + padding; a ring all-reduce would send 2(W-1)/W = %.2f)" % (2 * (workers - 1) / workers))
if bounded:
    print("RESULT: " + ("every worker's every result is within SwitchML's quantization bound of the exact sum" if ok_all
                        else "FAILED: not every result was within the bound"))
else:
    print("RESULT: " + ("every worker's every result is the exact sum" if ok_all else "FAILED: not every result was exact"))
sys.exit(0 if ok_all else 1)
EOF
[ "$failed" -eq 0 ] && [ "$summary_status" -eq 0 ]

#!/usr/bin/env bash
# NetReduce all-reduce vs ring all-reduce on the namespace test bed, in one run.
#
# For every link rate (tbf on every worker link, both directions; "none" = unshaped), one test bed with the
# largest W, one appliance daemon (no job at start). For every W and tensor size:
#   netreduce: `ctl add-job` a ring of ranks 0..W-1 (fp32, window 16, MsgLen 16, payload 4096 = PMTU), run W
#              `netreduce worker allreduce --mode netreduce` processes, `ctl remove-job`;
#   ring:      no ring installed, run W `netreduce worker allreduce --mode ring` processes over the same kind of
#              RC connections. The switch's redirect stays in place, so ring traffic takes the same path through
#              the appliance (passed through untouched): both algorithms pay the same per-hop costs.
#   ring-direct (with --ring-path direct or both): the ring all-reduce with the switch's redirect removed, so its
#              traffic goes worker -> bridge -> worker and never through the software appliance.
#   gloo:      what users run today: torch.distributed's all-reduce with the gloo backend (Debian's python3-torch),
#              one process per worker namespace (scripts/bench/gloo_allreduce.py), over TCP on the same shaped links.
#   netreduce-ecn: netreduce with the bed's links marking ECN (scripts/testbed.sh ecn on: a model of each link's
#              shaper, its bucket drained at 100 % of the link rate, on both ends of every worker link, CE while it
#              queues more than --ecn-threshold BYTES, default 262144;
#              netreduce-ecn-K and netreduce-ecn-K-F name the threshold K and the drain fraction F per mode): the
#              appliance carries the marks into the results and the workers' windows adapt (PANAMA). Not in the
#              default modes; needs clang (scripts/setup.sh). The CSV's last columns: shaper_dropped (tbf drops on the
#              bed during the run), marked_results (results that came back CE, summed over the ranks), window_min
#              (the smallest window any rank had).
#   switchml-N: SwitchML (NSDI '21) through the appliance: W `netreduce worker allreduce --protocol switchml` processes
#              with N elements per packet (64 and 256 as p4app-switchML's client sends; up to 2048, ours), each
#              registering with the daemon's SwitchML controller (on the bed's mgmt0) as the published client does,
#              which opens the session's job; fp32 in SwitchML's block fixed point (within its bound), int32 exact.
# --modes "netreduce ring gloo switchml-1024" picks the modes directly; --type fp32|int32 the elements of every mode. --cpu-load starts one CPU-bound process beside each worker
# (in its namespace) for every mode: the trainer a real worker shares its host with.
# Every worker checks its results against the exact sum; a run that is not exact is reported (ok=false).
#
# Measured per run: per call the slowest rank's time; over the calls after the first (--warmup): median, p90 and
# mean, and best; every call's time is kept in the CSV (call_ms, ';'-separated); goodput
# (tensor bytes / best time), RDMA payload and wire bytes sent per worker per call, retransmissions, and the
# appliance's CPU time (utime + stime of the daemon from /proc/PID/stat) during the run, and the workers' (all
# ranks, user + system, start-up and JIT included; GNU time, where installed), and a rank's CPU time during a call
# (its process's, threads included; the ranks' mean, median over the calls after the first), and of that the thread
# that drove the endpoint (endpoint_cpu_ms_per_call, the CSV's last column: its packet work to the nanosecond, where
# the process's count comes in the kernel's 10 ms ticks and includes the JIT's, the collector's and the bench's
# checking threads; worker allreduce modes only).
#
# usage: scripts/bench-allreduce.sh [--rates "none 1gbit 5gbit"] [--workers "2 4 8"] [--sizes-mib "1 4 16 64"]
#                                   [--iterations 3] [--out docs/bench/allreduce.csv] [--no-build] [--prefix P]
#                                   [--ring-path appliance|direct|both] [--modes "netreduce ring gloo"]
#                                   [--cpu-load] [--rto-us MICROSECONDS (default 400000)] [--type fp32|int32]
#                                   [--switchml-outstanding K: SwitchML packets in flight per worker (the worker's
#                                    default, 128)]
#                                   [--window N (default 16)] [--msg-len L (default 16)]
#                                   [--ecn-threshold BYTES: the marking threshold of netreduce-ecn (default 262144)]
#                                   [--offload on|off (default on): segmentation offload on the workers (--segmentation-offload)]
#                                   [--appliance-offload on|off (default on): on the appliance's port too
#                                    (segmentation_offload: results leave batched; see docs/performance.md)]
#                                   [--trace-dir DIR: per-call timelines of the netreduce ranks, DIR/RATE-wW-SIZE-rR.csv]
#                                   [--warmup N (default 1): calls of every mode left out of the statistics, which are
#                                    over the ITERATIONS - N calls after them; every call stays in call_ms]
#                                   [--nice N: the workers' endpoint threads at nice N (--endpoint-nice; default theirs, -10)]
#                                   [--lane-nice N: the appliance's lanes at nice N (dataplane.laneNice; default -10)]
#                                   [--gloo-nice N: gloo's processes under `nice -n N` (default: not reniced, 0)]
# The CSV's nice column is what the mode's workers' packet work ran at (lane_nice: the appliance's); load_cpu_s is
# the CPU the --cpu-load processes (the stand-in trainers) got during the run, load_cores_in_calls the cores they got
# during the timed calls (after the warm-up): what a mode's priority took from them.
# Needs root. Writes the CSV and prints a table; plot with /usr/bin/python3 scripts/bench/plot_allreduce.py OUT.png CSV...
# (time vs size) or scripts/bench/plot_calls.py OUT.png CSV... (per-call boxes per mode).
set -euo pipefail
source "$(dirname "$0")/env.sh"
source "$(dirname "$0")/lib/appliance.sh"
cd "$NETREDUCE_ROOT"

rates="none 1gbit 5gbit"
type=fp32
switchml_outstanding=""
workers_list="2 4 8"
sizes_mib="1 4 16 64"
iterations=3
out="docs/bench/allreduce.csv"
build=1
prefix=nrb
ring_path=appliance
window=16
msg_len=16
payload=4096
modes_opt=""
cpu_load=0
rto_us=400000
trace_dir=""
offload=on
appliance_offload=on
warmup=1
nice=""
lane_nice=""
gloo_nice=""
ecn_threshold=262144

while [ $# -gt 0 ]; do
  case "$1" in
    --rates) rates="$2"; shift 2 ;;
    --workers) workers_list="$2"; shift 2 ;;
    --sizes-mib) sizes_mib="$2"; shift 2 ;;
    --iterations) iterations="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    --prefix) prefix="$2"; shift 2 ;;
    --ring-path) ring_path="$2"; shift 2 ;;
    --modes) modes_opt="$2"; shift 2 ;;
    --cpu-load) cpu_load=1; shift ;;
    --rto-us) rto_us="$2"; shift 2 ;;
    --window) window="$2"; shift 2 ;;
    --trace-dir) trace_dir="$2"; shift 2 ;;
    --msg-len) msg_len="$2"; shift 2 ;;
    --offload) offload="$2"; shift 2 ;;
    --appliance-offload) appliance_offload="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --nice) nice="$2"; shift 2 ;;
    --lane-nice) lane_nice="$2"; shift 2 ;;
    --gloo-nice) gloo_nice="$2"; shift 2 ;;
    --ecn-threshold) ecn_threshold="$2"; shift 2 ;;
    --type) type="$2"; shift 2 ;;
    --switchml-outstanding) switchml_outstanding="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-allreduce: unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "bench-allreduce: needs root" >&2; exit 2; }
case "$ring_path" in
  appliance) modes="netreduce ring" ;;
  direct) modes="netreduce ring-direct" ;;
  both) modes="netreduce ring ring-direct" ;;
  *) echo "bench-allreduce: --ring-path appliance|direct|both" >&2; exit 2 ;;
esac
[ -n "$modes_opt" ] && modes="$modes_opt"
case "$type" in fp32|int32) ;; *) echo "bench-allreduce: --type fp32 or int32" >&2; exit 2 ;; esac
for mode in $modes; do
  case "$mode" in
    netreduce|ring|ring-direct) ;;
    netreduce-ecn|netreduce-ecn-[0-9]*) command -v clang >/dev/null || {
        echo "bench-allreduce: netreduce-ecn needs clang for the bed's ECN marker: scripts/setup.sh" >&2; exit 2; } ;;
    switchml-[0-9]*) ;;
    gloo)
      "$NETREDUCE_PYTHON" -c 'import torch.distributed' 2>/dev/null || {
        echo "bench-allreduce: gloo mode needs PyTorch for $NETREDUCE_PYTHON: apt-get install python3-torch" >&2
        exit 2; } ;;
    *) echo "bench-allreduce: unknown mode $mode (netreduce, ring, ring-direct, gloo, switchml-N)" >&2; exit 2 ;;
  esac
done

netreduce="$NETREDUCE_ROOT/aggregator-daemon/target/netreduce"
work="$(mktemp -d /tmp/netreduce-bench.XXXXXX)"
api="unix:$work/api.sock"
daemon_pid=""
worker_pids=()
max_w=0
for w in $workers_list; do [ "$w" -gt "$max_w" ] && max_w="$w"; done

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  for pid in "${worker_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  bed_stop_daemon
  bash scripts/testbed.sh down --prefix "$prefix" >/dev/null 2>&1 || true
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'echo "bench-allreduce: interrupted" >&2; exit 130' INT TERM

if [ "$build" -eq 1 ]; then
  bash scripts/setup.sh
  ./mvnw -B -ntp -q -DskipTests package
  bash scripts/aot-train.sh   # the JVMs' start-up caches for the jars just built (docs/operations.md)
fi

mkdir -p "$(dirname "$out")"
echo "rate,world,mode,cpu_load,size_bytes,iterations,ok,median_ms,p90_ms,mean_ms,best_ms,goodput_gbps,rdma_bytes_per_call,wire_bytes_per_call,sent_per_tensor,retransmitted,timeouts,worker_rx_ring_dropped,appliance_cpu_s,run_wall_s,workers_cpu_s,worker_cpu_ms_per_call,warmup,nice,lane_nice,load_cpu_s,load_cores_in_calls,call_ms,shaper_dropped,marked_results,window_min,endpoint_cpu_ms_per_call" > "$out"

cpu_ticks() { awk '{print $14 + $15}' "/proc/$daemon_pid/stat"; }
# Packets the bed's shapers (tbf on both ends of every worker link) have dropped so far: "WORKERS SWITCHES", the
# workers' egress (towards the switch) and the switches' (towards the workers, and the uplinks).
shaper_drops() {
  local ns workers=0 switches=0 d
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^${prefix}-(w[0-9]+|sw[0-9]*|ssw)$"); do
    d="$(ip netns exec "$ns" tc -s qdisc show 2>/dev/null | awk '/^qdisc tbf/ { t = 1; next } /^qdisc/ { t = 0 }
      t && /dropped/ { gsub(",", "", $7); s += $7 } END { print s + 0 }')"
    case "$ns" in "${prefix}"-w*) workers=$(( workers + d )) ;; *) switches=$(( switches + d )) ;; esac
  done
  echo "$workers $switches"
}
hz="$(getconf CLK_TCK)"

start_daemon() {
  cat > "$work/netreduce.yaml" <<EOF
appliance:
  ports:
    - name: eth0
      mtu: 9000
      segmentation_offload: $([ "$appliance_offload" = on ] && echo true || echo false)
  memoryBudget: 512MiB
  api:
    listen: $api
  metrics:
    listen: 127.0.0.1:0
  switchml:
    mac: "02:77:00:00:00:fe"
    ip: 10.77.0.254
    controller:
      listen: 10.77.0.253:50099
      allow: [10.77.0.0/24]
EOF
  [ -n "$lane_nice" ] && printf '  dataplane:\n    laneNice: %s\n' "$lane_nice" >> "$work/netreduce.yaml"
  rm -f "$work/api.sock"
  ip netns exec "${prefix}-app" "$netreduce" daemon --config "$work/netreduce.yaml" > "$work/daemon.log" 2>&1 &
  daemon_pid=$!
  for _ in $(seq 120); do
    "$netreduce" ctl --api "$api" --timeout 1 jobs >/dev/null 2>&1 && return 0
    kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/daemon.log" >&2; return 1; }
    sleep 0.5
  done
  echo "bench-allreduce: daemon API did not come up" >&2
  return 1
}

job_file() { # world
  {
    echo "name: bench"
    echo "rings:"
    echo "  - id: 1"
    echo "    elementType: $type"
    echo "    window: $window"
    echo "    msgLen: $msg_len"
    echo "    payloadSize: $payload"
    echo "    pmtu: $payload"
    echo "    members:"
    for i in $(seq 0 $(( $1 - 1 ))); do echo "      - { rank: $i, ip: 10.77.0.$(( i + 1 )) }"; done
  } > "$work/job.yaml"
}

run_one() { # rate world mode size
  local rate="$1" world="$2" mode="$3" size="$4"
  local cli_mode="$mode"
  local ecn=0
  if [ "${mode#netreduce-ecn}" != "$mode" ]; then
    [ "$rate" != none ] || { echo "bench-allreduce: $mode needs a shaped rate, skipped at none" >&2; return 0; }
    # netreduce-ecn, netreduce-ecn-K or netreduce-ecn-K-F: the threshold K bytes and drain fraction F of this mode
    local spec="${mode#netreduce-ecn}" k="$ecn_threshold" f=1.0
    spec="${spec#-}"
    if [ -n "$spec" ]; then k="${spec%%-*}"; [ "$spec" = "$k" ] || f="${spec#*-}"; fi
    bash scripts/testbed.sh ecn on --ecn-threshold "$k" --ecn-fraction "$f" --prefix "$prefix" >/dev/null
    cli_mode=netreduce
    ecn=1
  fi
  if [ "$cli_mode" = netreduce ]; then
    job_file "$world"
    "$netreduce" ctl --api "$api" add-job "$work/job.yaml" >/dev/null 2>&1
  fi
  if [ "$mode" = ring-direct ]; then
    cli_mode=ring
    bash scripts/testbed.sh redirect off --prefix "$prefix" >/dev/null
  fi
  local before t0 load_pids=() sampler_pid=""
  rm -f "$work/load.samples"
  if [ "$cpu_load" -eq 1 ]; then
    for i in $(seq 0 $(( world - 1 ))); do
      ip netns exec "${prefix}-w$i" sh -c 'while :; do :; done' &
      load_pids+=($!)
    done
    "$NETREDUCE_PYTHON" scripts/bench/cpu_sampler.py "$work/load.samples" 20 "${load_pids[@]}" &
    sampler_pid=$!
  fi
  before="$(cpu_ticks)"
  local shaped_before; shaped_before="$(shaper_drops)"
  t0="$(date +%s%N)"
  worker_pids=()
  for i in $(seq 0 $(( world - 1 ))); do
    # Each worker's CPU time (user + system, its JVM's compiler and GC threads included), where GNU time is there.
    local cpu_time=()
    rm -f "$work/w$i.cpu"
    [ -x /usr/bin/time ] && cpu_time=(/usr/bin/time -f "%U %S" -o "$work/w$i.cpu")
    if [ "$mode" = gloo ]; then
      timeout --signal=TERM --kill-after=10 900 \
        ip netns exec "${prefix}-w$i" "${cpu_time[@]}" ${gloo_nice:+nice -n "$gloo_nice"} "$NETREDUCE_PYTHON" scripts/bench/gloo_allreduce.py --rank "$i" \
          --world "$world" --master 10.77.0.1 --size "$size" --iterations "$iterations" --warmup 0 --type "$type" \
          > "$work/w$i.log" 2>&1 &
    elif [ "${mode#switchml-}" != "$mode" ]; then
      timeout --signal=TERM --kill-after=10 900 \
        ip netns exec "${prefix}-w$i" "${cpu_time[@]}" "$netreduce" worker allreduce --rank "$i" --world "$world" \
          --dev eth0 --protocol switchml --controller 10.77.0.253:50099 --elements "${mode#switchml-}" \
          --type "$type" --size "$size" --iterations "$iterations" --timeout 60 --json \
          ${switchml_outstanding:+--outstanding "$switchml_outstanding"} ${nice:+--endpoint-nice "$nice"} \
          > "$work/w$i.log" 2>&1 &
    else
      timeout --signal=TERM --kill-after=10 900 \
        ip netns exec "${prefix}-w$i" "${cpu_time[@]}" "$netreduce" worker allreduce --rank "$i" --world "$world" --dev eth0 \
          --ring-id 1 --mode "$cli_mode" --type "$type" --size "$size" --iterations "$iterations" --window "$window" \
          --msg-len "$msg_len" --pmtu "$payload" --timeout 60 --rto-us "$rto_us" --json \
          $([ "$offload" = on ] && echo --segmentation-offload || echo --no-segmentation-offload) \
          ${trace_dir:+--trace "$trace_dir/$rate-w$world-$size-$mode-r$i.csv"} \
          ${nice:+--endpoint-nice "$nice"} \
          > "$work/w$i.log" 2>&1 &
    fi
    worker_pids+=($!)
  done
  for pid in "${worker_pids[@]}"; do wait "$pid" || true; done
  worker_pids=()
  # Stop sampling the stand-in trainers' CPU, then them.
  if [ -n "$sampler_pid" ]; then kill -TERM "$sampler_pid" 2>/dev/null || true; wait "$sampler_pid" 2>/dev/null || true; fi
  for pid in "${load_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  local wall_ms cpu_ticks_used
  wall_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  cpu_ticks_used=$(( $(cpu_ticks) - before ))
  local shaped_after shaper_dropped
  shaped_after="$(shaper_drops)"
  shaper_dropped=$(( ${shaped_after% *} + ${shaped_after#* } - ${shaped_before% *} - ${shaped_before#* } ))
  echo "bench-allreduce: $rate w$world $size $mode: shapers dropped $shaper_dropped packets" \
    "($(( ${shaped_after% *} - ${shaped_before% *} )) at the workers' egress," \
    "$(( ${shaped_after#* } - ${shaped_before#* } )) at the switches')" >&2
  [ "$ecn" -eq 0 ] || bash scripts/testbed.sh ecn off --prefix "$prefix" >/dev/null
  if [ "$cli_mode" = netreduce ]; then
    # Loss census: the appliance's drop, ring-full and truncation counters that moved (cumulative per daemon).
    "$netreduce" ctl --api "$api" counters 2>/dev/null |
      awk -v run="$rate w$world $size" '(ENVIRON["NETREDUCE_BENCH_ALL_COUNTERS"] != "" || /drop|full|truncat|unsupported|error/) && $NF ~ /^[1-9][0-9]*$/ {
        print "bench-allreduce: " run ": appliance " $0 }' >&2 || true
    "$netreduce" ctl --api "$api" remove-job bench >/dev/null 2>&1 || true
    # ... and each rank's port: ring drops, truncations, offload frames it could not split, a full transmit ring.
    for i in $(seq 0 $(( world - 1 ))); do
      grep -h '^port \|qp: \|^endpoint ' "$work/w$i.log" 2>/dev/null | tr ',{}' '   ' |
        awk -v run="$rate w$world $size rank $i" '{ where = $1 " " $2
          for (f = 3; f <= NF; f++) if ($f ~ /^(rx_dropped|rx_truncated|rx_gso_unsupported|tx_ring_full|tx_errors|naksSent|outOfSequence|icrcErrors|malformed|notForUs|unknownQp|receiveDrops|cqFull|txRingFull)=[1-9]/)
            print "bench-allreduce: " run ": " where " " $f }' >&2 || true
    done
  fi
  if [ "$mode" = ring-direct ]; then
    bash scripts/testbed.sh redirect on --prefix "$prefix" >/dev/null
  fi
  "$NETREDUCE_PYTHON" - "$work" "$rate" "$world" "$mode" "$size" "$iterations" "$wall_ms" "$cpu_ticks_used" "$hz" \
      "$cpu_load" "$warmup" "$gloo_nice" "$shaper_dropped" >> "$out" <<'EOF'
import json, os, re, sys
work, rate, world, mode, size, iterations, wall_ms, ticks, hz, cpu_load, warmup, gloo_nice, shaper_dropped = sys.argv[1:]
world, size, iterations, wall_ms, ticks, hz = int(world), int(size), int(iterations), int(wall_ms), int(ticks), int(hz)
warmup = int(warmup)
runs = []
for rank in range(world):
    summary = None
    with open(os.path.join(work, f"w{rank}.log"), encoding="utf-8", errors="replace") as log:
        for line in log:
            if line.startswith("{"):
                summary = json.loads(line)
    runs.append(summary)
ok = all(r is not None and r["ok"] for r in runs)
done = [r for r in runs if r is not None and r["matched"] > 0]
mean = max((r["mean_ms"] for r in done), default=0.0)
best = max((r["best_ms"] for r in done), default=0.0)
goodput = size * 8 / (best / 1e3) / 1e9 if best > 0 else 0.0
# SwitchML: the elements its packets carried (retransmissions included), in place of RDMA payload.
rdma = sum(r.get("rdma_bytes_sent", r.get("payload_bytes_sent", 0)) for r in done) / max(len(done), 1) / iterations
wire = sum(r["wire_bytes_sent"] for r in done) / max(len(done), 1) / iterations
retx = sum(r["retransmitted_packets"] for r in runs if r is not None)
timeouts = sum(r.get("timeouts", 0) for r in runs if r is not None)
rx_dropped = sum(r.get("rx_ring_dropped", 0) for r in runs if r is not None)
# Per call, the slowest rank's time; the statistics skip the first WARMUP calls (JIT and connection warm-up), the
# same number for every mode (gloo_allreduce.py runs no untimed call of its own: --warmup 0).
per_rank = [r.get("call_ms", []) for r in done]
calls = [max(times) for times in zip(*per_rank)] if per_rank else []
steady = sorted(calls[warmup:] if len(calls) > warmup else calls)
def quantile(q):
    return steady[min(len(steady) - 1, int(q * len(steady)))] if steady else 0.0
median, p90 = (steady[len(steady) // 2] if steady else 0.0), quantile(0.9)
def per_call_cpu(key):
    """Per call, the ranks' mean of the JSON's list KEY; the median over the calls after the warm-up ("" where a rank
    has none)."""
    per_rank = [r.get(key, []) for r in done]
    if not per_rank or not all(per_rank):
        return ""
    mean = [sum(c) / len(c) for c in zip(*per_rank)]
    steady_mean = sorted(mean[warmup:] if len(mean) > warmup else mean)
    return f"{steady_mean[len(steady_mean) // 2]:.1f}"
# Each process's own CPU count (threads included), and the thread's that drove each rank's endpoint (worker
# allreduce's JSON; gloo's has none).
cpu_per_call = per_call_cpu("cpu_ms")
endpoint_per_call = per_call_cpu("endpoint_cpu_ms")
workers_cpu = ""
try:
    cpu = 0.0
    for rank in range(world):
        with open(os.path.join(work, f"w{rank}.cpu")) as times:
            cpu += sum(float(v) for v in times.read().split()[-2:])
    workers_cpu = f"{cpu:.2f}"
except (OSError, ValueError):
    pass
# The nice values the packet work ran at, as they took effect: the ranks' endpoint threads (their JSON; null when the
# kernel refused) or gloo's processes (as the bench started them), and the appliance's lanes (its log).
if mode == "gloo":
    mode_nice = gloo_nice or "0"
else:
    applied = {r.get("endpoint_nice") for r in runs if r is not None}
    mode_nice = "refused" if None in applied else ";".join(str(v) for v in sorted(applied))
with open(os.path.join(work, "daemon.log"), encoding="utf-8", errors="replace") as daemon_log:
    text = daemon_log.read()
lane = re.search(r"lane\(s\) at nice (-?\d+)", text)
lane_nice = "refused" if "keeps its nice value" in text else lane.group(1) if lane else ""
# With --cpu-load: the CPU the stand-in trainers got over the run, and the cores they got, on average, during the
# timed calls after the warm-up (their CPU time, sampled every 20 ms, interpolated at each call's start and end;
# rank 0's starts, the slowest rank's time).
load_cpu, load_cores = 0.0, ""
try:
    samples = [tuple(map(int, line.split())) for line in open(os.path.join(work, "load.samples"))]
    load_cpu = (samples[-1][1] - samples[0][1]) / 1e9
    def load_at(t):
        for (t0, c0), (t1, c1) in zip(samples, samples[1:]):
            if t0 <= t <= t1:
                return c0 + (c1 - c0) * (t - t0) / max(t1 - t0, 1)
        raise ValueError("call outside the samples")
    starts = done[0]["call_start_ns"] if done else []
    windows = [(s0, s0 + c * 1e6) for s0, c in zip(starts, calls)][warmup:]
    used = sum(load_at(b) - load_at(a) for a, b in windows)
    span = sum(b - a for a, b in windows)
    load_cores = f"{used / span:.2f}" if span > 0 else ""
except (OSError, ValueError, KeyError, IndexError):
    pass
print(f"{rate},{world},{mode},{cpu_load},{size},{iterations},{str(ok).lower()},{median:.2f},{p90:.2f},{mean:.2f},"
      f"{best:.2f},{goodput:.4f},{rdma:.0f},{wire:.0f},{rdma / size:.4f},{retx},{timeouts},{rx_dropped},{ticks / hz:.2f},"
      f"{wall_ms / 1e3:.1f},{workers_cpu},{cpu_per_call},{warmup},{mode_nice},{lane_nice},"
      f"{load_cpu:.2f},{load_cores},{';'.join(f'{c:.1f}' for c in calls)},{shaper_dropped},"
      f"{sum(r['ecn']['marked_results'] for r in runs if r is not None and 'ecn' in r)},"
      f"{min((r['ecn']['window_min'] for r in runs if r is not None and 'ecn' in r), default='')},"
      f"{endpoint_per_call}")
EOF
  tail -n 1 "$out"
  if tail -n 1 "$out" | grep -q ',false,'; then
    local keep="/tmp/netreduce-bench-failures/${rate}-w${world}-${mode}-${size}"
    mkdir -p "$keep"
    cp "$work"/w*.log "$work/daemon.log" "$keep/" 2>/dev/null || true
    echo "bench-allreduce: run not exact or failed; worker logs kept in $keep" >&2
  fi
}

bench_start="$(date +%s)"
for rate in $rates; do
  rate_opt=()
  [ "$rate" = none ] || rate_opt=(--rate "$rate")
  bash scripts/testbed.sh up -w "$max_w" --mtu 9000 --prefix "$prefix" "${rate_opt[@]}" >/dev/null
  start_daemon
  for world in $workers_list; do
    for mib in $sizes_mib; do
      for mode in $modes; do
        run_one "$rate" "$world" "$mode" $(( mib << 20 ))
      done
    done
  done
  bed_stop_daemon
  bash scripts/testbed.sh down --prefix "$prefix" >/dev/null
done
echo "bench-allreduce: $(( $(date +%s) - bench_start )) s; results in $out"
"$NETREDUCE_PYTHON" - "$out" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
cols = ["rate", "world", "mode", "cpu_load", "size_bytes", "ok", "median_ms", "p90_ms", "best_ms", "goodput_gbps",
        "sent_per_tensor", "retransmitted", "timeouts", "worker_rx_ring_dropped", "appliance_cpu_s", "workers_cpu_s", "worker_cpu_ms_per_call", "endpoint_cpu_ms_per_call", "nice", "lane_nice", "load_cores_in_calls",
        "shaper_dropped", "marked_results", "window_min"]
print("| " + " | ".join(cols) + " |")
print("|" + "---|" * len(cols))
for r in rows:
    print("| " + " | ".join(r[c] for c in cols) + " |")
EOF

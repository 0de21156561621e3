#!/usr/bin/env bash
# What a training job does to the other traffic on its links (PANAMA, MLSys '22: short flows' completion time, a long
# flow's share, two jobs' fairness), on the namespace bed's 1 Gbit/s links, every mode in one run:
#
#   none:          no job: the other traffic alone
#   gloo:          W gloo ranks (scripts/bench/gloo_allreduce.py), back-to-back 64 MiB all-reduces
#   netreduce:     W `netreduce worker allreduce` ranks through the appliance, the links not marking
#   netreduce-ecn: the same with the links marking ECN (testbed.sh ecn on: a model of each link's shaper drained at
#                  --ecn-fraction of the link rate, CE while it queues more than --ecn-threshold bytes); the
#                  appliance ORs the marks into the results, the workers' windows adapt (PANAMA §4.2), and the TCP
#                  flows negotiate ECN (tcp_ecn=1)
#   netreduce-ecn-minN: netreduce-ecn with the workers' windows never cut below N messages (--ecn-min-window N;
#                  netreduce-ecn is the law's own floor, 1); several floors compare in one run
#   two-netreduce, two-netreduce-ecn: two jobs (rings 1 and 2, the same W workers), each its own ranks, at once,
#                  without the other traffic: each job's goodput and Jain's index of the two
#
# Beside each job (not the two-job modes): short TCP request/response flows from w0 to a server in w1 (10 KB, 100 KB
# and 1 MB in turn, Poisson arrivals at --flow-rate per second, a new connection each), one long TCP flow w2 -> w3,
# and an ICMP probe w0 -> w1 every 10 ms (kernel-answered and kernel-stamped: the network's share of a delay,
# apart from the CPU's). Both directions of every worker link carry the job too: a flow's request leaves w0 beside
# w0's contributions and its response comes back beside w0's results. Only flows that start during the job's calls
# count (from rank 0's first call to the last call's end). --flow-nice N runs the flows, their server and the probe
# at nice N: on this 2-core bed the endpoints, the appliance and the flows share the cores, and a flow at a higher
# priority than the endpoints shows the network's share (the issue's baseline: at default priority the short flows
# lost to the CPU, not to the links). --flow-rt P runs the short flows, their server and the probe in the real-time
# class (SCHED_FIFO P): they preempt every endpoint at once, where nice only weighs their share of the cores; the long
# flow and its sink stay at --flow-nice.
#
# TCP: every worker namespace's TCP (the flows and gloo's) uses --tcp-cc (default reno). PANAMA's other traffic runs
# DCTCP, which reacts to the marks; this kernel has no DCTCP, and its default, BBR, ignores ECN: with it the marked
# modes measured a network in which only the ring answered the marks, and a long flow kept its queue at the marking
# threshold whatever the ring did. reno answers a mark as it answers a loss (classic ECN, RFC 3168). A namespace may
# use only the laws the host allows (tcp_allowed_congestion_control: reno and bbr here); "default" keeps the host's.
# --endpoint-nice N runs every netreduce rank's endpoint thread (worker allreduce --endpoint-nice) and the appliance's
# lanes (dataplane.laneNice) at nice N; default -10, both commands' own default. gloo's counterpart of that work is the
# kernel's TCP, which runs in softirq beside the other traffic's; at -10 the packet threads also run ahead of ksoftirqd
# (nice 0), where the kernel's deferred receive work for the other traffic waits. 0 puts them at gloo's priority.
# --keep-logs DIR keeps each mode's rank logs, the daemon's and the flows' files (DIR/wW-MODE-PASS).
#
# Prints one line per mode and writes the CSV (--out, with each mode's window floor in ecn_min_window) and a plot
# beside it (.png); its last line says what the goal asks: per W, the short flows' p99 under netreduce-ecn against
# gloo, the job's call time marked against unmarked, the long flow's share, Jain's index and RC timeouts (and, for
# each netreduce-ecn-minN mode run, its call marked against unmarked and the long flow's share).
# A mode may be named more than once (passes in turn, every row in the CSV); the summary and the plot take its last.
#
# usage: scripts/bench-shared.sh [--workers "4 8"] [--iterations 30] [--seconds 20 (mode none)]
#                                [--modes "none gloo netreduce netreduce-ecn two-netreduce two-netreduce-ecn",
#                                         also netreduce-ecn-minN, N in 1..99]
#                                [--flow-rate 30] [--flow-nice N] [--window 16] [--ecn-threshold 262144]
#                                [--ecn-fraction 1.0] [--flow-rt P] [--tcp-cc reno|bbr|default] [--keep-logs DIR]
#                                [--appliance-ecn F (dataplane.ecnBacklog; the daemon's default unless given)]
#                                [--endpoint-nice N (-20..19; default -10)]
#                                [--out docs/bench/shared.csv] [--no-build] [--prefix P]
# Needs root, 4 or more workers.
set -euo pipefail
source "$(dirname "$0")/env.sh"
cd "$NETREDUCE_ROOT"
source scripts/lib/appliance.sh

workers_list="4 8"
iterations=30
seconds=20
modes="none gloo netreduce netreduce-ecn two-netreduce two-netreduce-ecn"
flow_rate=30
flow_nice=""
endpoint_nice=-10
flow_rt=""
tcp_cc=reno
keep_logs=""
window=16
msg_len=16
payload=4096
ecn_threshold=262144
ecn_fraction=1.0
appliance_ecn=""
out=docs/bench/shared.csv
build=1
prefix=nrsh
size=$(( 64 << 20 ))
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) workers_list="$2"; shift 2 ;;
    --iterations) iterations="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --modes) modes="$2"; shift 2 ;;
    --flow-rate) flow_rate="$2"; shift 2 ;;
    --flow-nice) flow_nice="$2"; shift 2 ;;
    --flow-rt) flow_rt="$2"; shift 2 ;;
    --tcp-cc) tcp_cc="$2"; shift 2 ;;
    --keep-logs) keep_logs="$2"; shift 2 ;;
    --window) window="$2"; shift 2 ;;
    --ecn-threshold) ecn_threshold="$2"; shift 2 ;;
    --ecn-fraction) ecn_fraction="$2"; shift 2 ;;
    --appliance-ecn) appliance_ecn="$2"; shift 2 ;;
    --endpoint-nice) endpoint_nice="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    --prefix) prefix="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-shared: unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "bench-shared: needs root" >&2; exit 2; }
for w in $workers_list; do [ "$w" -ge 4 ] || { echo "bench-shared: 4 or more workers" >&2; exit 2; }; done
for mode in $modes; do
  case "$mode" in
    none|gloo|netreduce|netreduce-ecn|two-netreduce|two-netreduce-ecn) ;;
    netreduce-ecn-min[1-9]|netreduce-ecn-min[1-9][0-9]) ;;
    *) echo "bench-shared: unknown mode $mode" >&2; exit 2 ;;
  esac
done
# A worker namespace may choose only the congestion controls the host allows (tcp_allowed_congestion_control);
# "default" leaves the namespaces at the host's default.
if [ "$tcp_cc" != default ] && ! grep -qw -- "$tcp_cc" /proc/sys/net/ipv4/tcp_allowed_congestion_control; then
  echo "bench-shared: --tcp-cc $tcp_cc: a namespace may use" \
    "$(cat /proc/sys/net/ipv4/tcp_allowed_congestion_control)" >&2
  exit 2
fi
[[ "$endpoint_nice" =~ ^-?[0-9]+$ ]] && [ "$endpoint_nice" -ge -20 ] && [ "$endpoint_nice" -le 19 ] ||
  { echo "bench-shared: --endpoint-nice takes a nice value, -20..19" >&2; exit 2; }
case "$flow_rt" in
  ''|[1-9]|[1-9][0-9]) ;;
  *) echo "bench-shared: --flow-rt takes a SCHED_FIFO priority, 1..99" >&2; exit 2 ;;
esac
# The long flow and its sink run at --flow-nice; the short flows, their server and the probe too, or in the real-time
# class with --flow-rt (chrt -f: they preempt every endpoint at once, where nice only weighs their share).
nice_cmd=()
[ -n "$flow_nice" ] && nice_cmd=(nice -n "$flow_nice")
short_cmd=("${nice_cmd[@]}")
[ -n "$flow_rt" ] && short_cmd+=(chrt -f "$flow_rt")

netreduce="$NETREDUCE_ROOT/aggregator-daemon/target/netreduce"
flows="$NETREDUCE_PYTHON scripts/bench/shared_flows.py"
work="$(mktemp -d /tmp/netreduce-shared.XXXXXX)"
# The short flows and their server: scripts/lib/short_flows.c, one epoll loop each (the Python generator's threads
# put 0.4 ms on a 10 KB flow's median with no job at all).
short_flows="$work/short_flows"
command -v "${CC:-cc}" >/dev/null || { echo "bench-shared: needs a C compiler (\$CC or cc)" >&2; exit 1; }
"${CC:-cc}" -O2 -Wall -o "$short_flows" scripts/lib/short_flows.c -lm ||
  { echo "bench-shared: scripts/lib/short_flows.c did not build" >&2; exit 1; }
api="unix:$work/api.sock"
daemon_pid=""
bg_pids=()

kill_bg() {
  for pid in "${bg_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${bg_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  bg_pids=()
}
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  kill_bg
  bed_stop_daemon
  bash scripts/testbed.sh down --prefix "$prefix" >/dev/null 2>&1 || true
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'echo "bench-shared: interrupted" >&2; exit 130' INT TERM

if [ "$build" -eq 1 ]; then
  bash scripts/setup.sh
  ./mvnw -B -ntp -q -DskipTests package
  bash scripts/aot-train.sh
fi

# The plot's package (Debian's, for /usr/bin/python3), as train.sh installs its own.
if ! "$NETREDUCE_PYTHON" -c 'import matplotlib' >/dev/null 2>&1; then
  echo "bench-shared: installing python3-matplotlib (for the plot)"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-matplotlib >/dev/null ||
    echo "bench-shared: could not install python3-matplotlib: no plot" >&2
fi

start_daemon() {
  cat > "$work/netreduce.yaml" <<EOF
appliance:
  ports:
    - name: eth0
      mtu: 9000
  memoryBudget: 512MiB
  api:
    listen: $api
  metrics:
    listen: 127.0.0.1:0
EOF
  printf '  dataplane:\n    laneNice: %s\n' "$endpoint_nice" >> "$work/netreduce.yaml"
  [ -z "$appliance_ecn" ] || printf '    ecnBacklog: %s\n' "$appliance_ecn" >> "$work/netreduce.yaml"
  rm -f "$work/api.sock"
  bed_start_daemon "$prefix" "$netreduce" "$work/netreduce.yaml" "$api" "$work" bench-shared >/dev/null
}

job_file() { # world ring_id file
  {
    echo "name: shared$2"
    echo "rings:"
    echo "  - id: $2"
    echo "    elementType: fp32"
    echo "    window: $window"
    echo "    msgLen: $msg_len"
    echo "    payloadSize: $payload"
    echo "    pmtu: $payload"
    echo "    members:"
    for i in $(seq 0 $(( $1 - 1 ))); do echo "      - { rank: $i, ip: 10.77.0.$(( i + 1 )) }"; done
  } > "$3"
}

# ranks MODE WORLD RING_ID LOG_PREFIX: start the job's W ranks in the background (pids in job_pids). A second job's
# ranks share their hosts' interfaces with the first's: their own bootstrap ports and QP numbers (--first-qpn).
job_pids=()
ranks() {
  local mode="$1" world="$2" ring="$3" logs="$4" i floor=1
  case "$mode" in *-ecn-min*) floor="${mode##*-ecn-min}" ;; esac
  for i in $(seq 0 $(( world - 1 ))); do
    if [ "$mode" = gloo ]; then
      timeout --signal=TERM --kill-after=10 900 ip netns exec "${prefix}-w$i" "$NETREDUCE_PYTHON" \
        scripts/bench/gloo_allreduce.py --rank "$i" --world "$world" --master 10.77.0.1 --size "$size" \
        --iterations "$iterations" --warmup 0 > "$logs$i.log" 2>&1 &
    else
      timeout --signal=TERM --kill-after=10 900 ip netns exec "${prefix}-w$i" "$netreduce" worker allreduce \
        --rank "$i" --world "$world" --dev eth0 --ring-id "$ring" --mode netreduce --size "$size" \
        --iterations "$iterations" --window "$window" --msg-len "$msg_len" --pmtu "$payload" --timeout 60 \
        --port $(( 18700 + (ring - 1) * 100 )) --first-qpn $(( 0x11 + (ring - 1) * 0x10000 )) \
        --ecn-min-window "$floor" --endpoint-nice "$endpoint_nice" --segmentation-offload --json > "$logs$i.log" 2>&1 &
    fi
    job_pids+=($!)
  done
}

markers() { # ECN markers (egress bpf filters) attached anywhere on the bed
  local ns dev n=0
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^${prefix}-" || true); do
    for dev in $(ip netns exec "$ns" ls /sys/class/net); do
      # captured, not piped into grep -q: under pipefail an early exit of grep could hide a marker
      [[ "$(ip netns exec "$ns" tc filter show dev "$dev" egress 2>/dev/null || true)" == *bpf* ]] && n=$(( n + 1 ))
    done
  done
  echo "$n"
}

flows_up() { # world: the server and sink (they live for the whole W)
  ip netns exec "${prefix}-w1" "${short_cmd[@]}" "$short_flows" server --port 45001 > "$work/server.log" 2>&1 &
  bg_pids+=($!)
  sleep 0.5
}

mkdir -p "$(dirname "$out")"
echo "world,mode,window,ecn_threshold,ecn_fraction,ecn_min_window,flow_nice,flow_rate,ok,job_median_ms,job_p90_ms,job_calls,retransmitted,timeouts,marked_results,window_min,flows,flows_failed,fct10k_p50_ms,fct10k_p99_ms,fct100k_p50_ms,fct100k_p99_ms,fct1m_p50_ms,fct1m_p99_ms,long_mbps,long_share,probe_p50_ms,probe_p99_ms,probe_lost,job1_gbps,job2_gbps,jain,flow_rt,tcp_cc,appliance_ecn,appliance_marked,appliance_rx_dropped,endpoint_nice" > "$out"

run_mode() { # world mode
  local world="$1" mode="$2" ecn=0 two=0 stop="$work/stop"
  case "$mode" in *-ecn|*-ecn-min*) ecn=1 ;; esac
  case "$mode" in two-*) two=1 ;; esac
  rm -f "$stop" "$work"/j1-*.log "$work"/j2-*.log "$work/short.csv" "$work/sink.csv" "$work/probe.csv"
  local tcp_ecn=2
  if [ "$ecn" -eq 1 ]; then
    bash scripts/testbed.sh ecn on --ecn-threshold "$ecn_threshold" --ecn-fraction "$ecn_fraction" \
      --prefix "$prefix" >/dev/null
    tcp_ecn=1
  fi
  for i in $(seq 0 $(( world - 1 ))); do
    ip netns exec "${prefix}-w$i" sysctl -qw "net.ipv4.tcp_ecn=$tcp_ecn"
    [ "$tcp_cc" = default ] || ip netns exec "${prefix}-w$i" sysctl -qw "net.ipv4.tcp_congestion_control=$tcp_cc"
  done
  if [ "$mode" != none ] && [ "$mode" != gloo ]; then
    job_file "$world" 1 "$work/job1.yaml"
    "$netreduce" ctl --api "$api" add-job "$work/job1.yaml" >/dev/null
    if [ "$two" -eq 1 ]; then
      job_file "$world" 2 "$work/job2.yaml"
      "$netreduce" ctl --api "$api" add-job "$work/job2.yaml" >/dev/null
    fi
  fi
  local other=()
  if [ "$two" -eq 0 ]; then
    ip netns exec "${prefix}-w3" "${nice_cmd[@]}" $flows sink --port 45002 --out "$work/sink.csv" \
      > "$work/sink.log" 2>&1 &
    other+=($!)
    sleep 0.3
    ip netns exec "${prefix}-w2" "${nice_cmd[@]}" $flows long --server 10.77.0.4:45002 --seconds 900 \
      --until "$stop" > "$work/long.log" 2>&1 &
    other+=($!)
    ip netns exec "${prefix}-w0" "${short_cmd[@]}" "$short_flows" short --server 10.77.0.2:45001 --seconds 900 \
      --rate "$flow_rate" --out "$work/short.csv" --until "$stop" > "$work/short.log" 2>&1 &
    other+=($!)
    ip netns exec "${prefix}-w0" "${short_cmd[@]}" $flows probe --to 10.77.0.2 --out "$work/probe.csv" \
      --seconds 900 --until "$stop" > "$work/probe.log" 2>&1 &
    other+=($!)
  fi
  local t0 t1 counters0 counters1
  counters0="$("$netreduce" ctl --api "$api" --json counters 2>/dev/null || echo '{}')"
  t0="$("$NETREDUCE_PYTHON" -c 'import time; print(time.monotonic())')"
  job_pids=()
  if [ "$mode" = none ]; then
    sleep "$seconds"
  else
    ranks "${mode#two-}" "$world" 1 "$work/j1-"
    [ "$two" -eq 0 ] || ranks "${mode#two-}" "$world" 2 "$work/j2-"
    for pid in "${job_pids[@]}"; do wait "$pid" || true; done
  fi
  t1="$("$NETREDUCE_PYTHON" -c 'import time; print(time.monotonic())')"
  counters1="$("$netreduce" ctl --api "$api" --json counters 2>/dev/null || echo '{}')"
  touch "$stop"
  # The generators stop at the stop file (their flows in flight end first); the sink when the sender closes. Whatever
  # still runs 30 s later is stuck, and killed (a sink whose sender never connected).
  local pid
  for _ in $(seq 300); do
    local alive=0
    for pid in "${other[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" -eq 1 ] || break
    sleep 0.1
  done
  for pid in "${other[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  [ "$ecn" -eq 0 ] || bash scripts/testbed.sh ecn off --prefix "$prefix" >/dev/null
  local left; left="$(markers)"
  if [ "$left" -ne 0 ]; then
    echo "bench-shared: $left ECN markers still attached after $mode: taking them off again" >&2
    bash scripts/testbed.sh ecn off --prefix "$prefix" >/dev/null
    left="$(markers)"
    [ "$left" -eq 0 ] || { echo "bench-shared: $left ECN markers will not come off" >&2; exit 1; }
  fi
  if [ "$mode" != none ] && [ "$mode" != gloo ]; then
    "$netreduce" ctl --api "$api" remove-job shared1 >/dev/null 2>&1 || true
    [ "$two" -eq 0 ] || "$netreduce" ctl --api "$api" remove-job shared2 >/dev/null 2>&1 || true
  fi
  local flow_json="{}"
  if [ "$two" -eq 0 ]; then
    local from="$t0" to="$t1"
    if [ "$mode" != none ]; then
      # the job's calls: rank 0's first call's start to the end of its last (CLOCK_MONOTONIC, as the flows stamp)
      read -r from to < <("$NETREDUCE_PYTHON" - "$work/j1-0.log" <<'EOF'
import json, sys
summary = [json.loads(l) for l in open(sys.argv[1], errors="replace") if l.startswith("{")]
starts, calls = (summary[-1].get("call_start_ns", []), summary[-1].get("call_ms", [])) if summary else ([], [])
print(f"{starts[0] / 1e9:.4f} {(starts[-1] / 1e9 + calls[-1] / 1e3):.4f}" if starts else "0 0")
EOF
)
    fi
    flow_json="$($flows summary --short "$work/short.csv" --sink "$work/sink.csv" --probe "$work/probe.csv" \
      --from "$from" --to "$to" --link-bps 1e9)"
  fi
  "$NETREDUCE_PYTHON" - "$work" "$world" "$mode" "$window" "$ecn_threshold" "$ecn_fraction" "${flow_nice:-0}" \
    "$flow_rate" "$size" "$flow_json" "$flow_rt" \
    "$(ip netns exec "${prefix}-w0" sysctl -n net.ipv4.tcp_congestion_control)" "${appliance_ecn:-default}" \
    "$counters0" "$counters1" "$endpoint_nice" >> "$out" <<'EOF'
import json, os, sys
work, world, mode, window, k, f, nice, rate, size, flow_json, rt, cc, appliance_ecn, c0, c1, endpoint_nice = sys.argv[1:]
world, size = int(world), int(size)
marking = mode.endswith("ecn") or "-ecn-min" in mode
floor = int(mode.rsplit("-ecn-min", 1)[1]) if "-ecn-min" in mode else 1
flow = json.loads(flow_json)

def counter(text, name):
    """The sum of the daemon's counters whose series name holds NAME (ctl --json counters)."""
    try:
        answer = json.loads(text)
    except ValueError:
        return 0
    items = answer.items() if isinstance(answer, dict) else []
    return sum(int(v.get("value", 0)) for key, v in items if name in key and isinstance(v, dict))

# the appliance's own marks (dataplane.ecnBacklog) and its ports' kernel drops (ring full) over the mode
appliance_marked = counter(c1, "ecn_ce_queue") - counter(c0, "ecn_ce_queue")
appliance_dropped = counter(c1, "rx_dropped") - counter(c0, "rx_dropped")

def job(prefix):
    runs = []
    for rank in range(world):
        path = os.path.join(work, f"{prefix}{rank}.log")
        summary = None
        if os.path.exists(path):
            for line in open(path, errors="replace"):
                if line.startswith("{"):
                    summary = json.loads(line)
        runs.append(summary)
    ok = all(r is not None and r["ok"] for r in runs)
    done = [r for r in runs if r is not None and r.get("call_ms")]
    calls = [max(t) for t in zip(*[r["call_ms"] for r in done])] if done else []
    steady = sorted(calls[1:] if len(calls) > 1 else calls)
    median = steady[len(steady) // 2] if steady else 0.0
    p90 = steady[min(len(steady) - 1, int(0.9 * len(steady)))] if steady else 0.0
    retx = sum(r.get("retransmitted_packets", 0) for r in runs if r)
    timeouts = sum(r.get("timeouts", 0) for r in runs if r)
    marked = sum(r["ecn"]["marked_results"] for r in runs if r and "ecn" in r)
    wmin = min((r["ecn"]["window_min"] for r in runs if r and "ecn" in r), default="")
    floors = {r["ecn"].get("floor") for r in runs if r and "ecn" in r}
    if floors - {min(floor, int(window))}:
        print(f"bench-shared: {mode}: the ranks' window floors {sorted(floors)}, not {floor}", file=sys.stderr)
        ok = False
    gbps = size * 8 * len(steady) / (sum(steady) / 1e3) / 1e9 if steady else 0.0
    return ok, median, p90, len(calls), retx, timeouts, marked, wmin, gbps

def fmt(v):
    return "" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)

if mode == "none":
    ok, median, p90, ncalls, retx, timeouts, marked, wmin, g1 = True, 0.0, 0.0, 0, 0, 0, 0, "", 0.0
else:
    ok, median, p90, ncalls, retx, timeouts, marked, wmin, g1 = job("j1-")
g2 = jain = None
if mode.startswith("two-"):
    ok2, m2, p2, n2, r2, t2, mk2, w2, g2 = job("j2-")
    ok, retx, timeouts, marked = ok and ok2, retx + r2, timeouts + t2, marked + mk2
    wmin = min([w for w in (wmin, w2) if w != ""], default="")
    jain = (g1 + g2) ** 2 / (2 * (g1 * g1 + g2 * g2)) if g1 + g2 > 0 else None
sizes = flow.get("sizes", {})
def fct(size, q):
    return fmt(sizes.get(size, {}).get(q))
probe = flow.get("probe", {})
long_bps = flow.get("long_bps")
if not marking and marked and not appliance_marked:
    ok = False  # an unmarked mode whose results came back marked, not by the appliance, measured something else
row = [world, mode, window, k if marking else "", f if marking else "", floor if mode not in ("none", "gloo") else "",
       nice, rate,
       str(ok and flow.get("failed", 0) == 0).lower(), fmt(median), fmt(p90), ncalls, retx, timeouts, marked, wmin,
       flow.get("flows", ""), flow.get("failed", ""), fct("10000", "p50_ms"), fct("10000", "p99_ms"),
       fct("100000", "p50_ms"), fct("100000", "p99_ms"), fct("1000000", "p50_ms"), fct("1000000", "p99_ms"),
       fmt(long_bps / 1e6 if long_bps is not None else None), fmt(flow.get("long_share")),
       fmt(probe.get("p50_ms")), fmt(probe.get("p99_ms")), probe.get("lost", ""),
       fmt(g1 if mode != "none" else None), fmt(g2), fmt(jain), rt, cc, appliance_ecn, appliance_marked,
       appliance_dropped, endpoint_nice if mode not in ("none", "gloo") else ""]
print(",".join(str(v) for v in row))
EOF
  if [ -n "$keep_logs" ]; then
    local pass=1
    while [ -e "$keep_logs/w$world-$mode-$pass" ]; do pass=$((pass + 1)); done
    mkdir -p "$keep_logs/w$world-$mode-$pass"
    cp "$work"/*.log "$work"/*.csv "$keep_logs/w$world-$mode-$pass/" 2>/dev/null || true
  fi
  tail -n 1 "$out"
}

for world in $workers_list; do
  bash scripts/testbed.sh up -w "$world" --mtu 9000 --rate 1gbit --prefix "$prefix" >/dev/null
  start_daemon
  flows_up "$world"
  for mode in $modes; do
    echo "bench-shared: W=$world $mode" >&2
    run_mode "$world" "$mode"
  done
  kill_bg
  bed_stop_daemon
  bash scripts/testbed.sh down --prefix "$prefix" >/dev/null
done

# The goal's figures, per W: short flows' p99 (the 10 KB flows) with netreduce-ecn against gloo, the job's median call
# marked against unmarked, the long flow's share beside the marked job, Jain's index of two marked jobs, RC timeouts
# of the marked modes.
"$NETREDUCE_PYTHON" - "$out" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
parts = []
for world in sorted({r["world"] for r in rows}, key=int):
    by = {r["mode"]: r for r in rows if r["world"] == world}
    def num(mode, key):
        try:
            return float(by[mode][key])
        except (KeyError, ValueError):
            return None
    bits = []
    g, e = num("gloo", "fct10k_p99_ms"), num("netreduce-ecn", "fct10k_p99_ms")
    if g and e is not None:
        bits.append(f"10KB p99 ecn/gloo {e / g:.2f}")
    m, u = num("netreduce-ecn", "job_median_ms"), num("netreduce", "job_median_ms")
    if m and u:
        bits.append(f"call marked/unmarked {m / u:.2f}")
    s = num("netreduce-ecn", "long_share")
    if s is not None:
        bits.append(f"long flow share {s:.2f}")
    j = num("two-netreduce-ecn", "jain")
    if j is not None:
        bits.append(f"Jain {j:.3f}")
    t = sum(int(by[m]["timeouts"] or 0) for m in ("netreduce-ecn", "two-netreduce-ecn") if m in by)
    bits.append(f"RC timeouts marked {t}")
    for mode in sorted((m for m in by if m.startswith("netreduce-ecn-min")), key=lambda m: int(m[17:])):
        f, s = num(mode, "job_median_ms"), num(mode, "long_share")
        if f and u:
            share = "?" if s is None else f"{s:.2f}"
            bits.append(f"floor {mode[17:]}: call marked/unmarked {f / u:.2f}, long flow share {share}, "
                        f"RC timeouts {by[mode]['timeouts']}")
    parts.append(f"W={world}: " + ", ".join(bits))
print("bench-shared: " + "; ".join(parts))
EOF
if plot_err="$("$NETREDUCE_PYTHON" scripts/bench/plot_shared.py "$out" "${out%.csv}.png" 2>&1)"; then
  echo "bench-shared: plot ${out%.csv}.png"
else
  echo "bench-shared: no plot: $(printf '%s\n' "$plot_err" | tail -1)"
fi

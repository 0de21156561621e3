#!/usr/bin/env bash
# A soak (not part of the test command): the daemon on the namespace bed for MINUTES, its dataplane dropping LOSS of
# the RoCEv2 frames it receives (fault injection), while rounds of work run back to back:
#   - every round: W `netreduce worker allreduce` processes (new queue pairs each: a client that opens new QPs per
#     call), 3 calls of 4 MiB fp32 on ring 1, results checked by the workers against the rank-order sum;
#   - every 3rd round: W Python ranks open a netreduce.Session (sidecar), make 4 calls checked bit for bit, close;
#   - every 5th round: a job `soak-extra` (ring 2, same members) is added, all-reduced once, and removed;
#   - every RELOAD seconds: the configuration file gains or loses a job `soak-reloaded` (ring 3) and `ctl reload`
#     applies it.
# Every SAMPLE seconds the daemon's RSS, heap and off-heap memory (native memory tracking: committed, less the Java
# heap), open fds, threads, CLT entries and rings are sampled (CSV + plot). After the run: every round must have
# passed, and after the warm-up (the first quarter) RSS, off-heap memory, fds and threads must stay within a margin
# of their warm-up values, and the CLT must not grow without bound (entries of replaced connections expire). Exit status 0 when all holds.
#
# usage: scripts/soak.sh [--minutes M] [--workers W] [--loss P] [--sample S] [--reload S] [--out DIR]
#                        [--prefix P] [--no-build]
#   defaults: 30 minutes, 4 workers, loss 0.01, sample every 10 s, reload every 180 s, results in /tmp/netreduce-soak
#   (soak.csv, soak.png, rounds.log, counters.txt), prefix nrsoak. Replaced connections' CLT entries expire after
#   the daemon's 60 s.
# Needs root.
set -euo pipefail
source "$(dirname "$0")/env.sh"
source "$(dirname "$0")/lib/appliance.sh"
cd "$NETREDUCE_ROOT"

minutes=30 workers=4 loss=0.01 sample=10 reload=180 out=/tmp/netreduce-soak prefix=nrsoak build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes="$2"; shift 2 ;;
    -w|--workers) workers="$2"; shift 2 ;;
    --loss) loss="$2"; shift 2 ;;
    --sample) sample="$2"; shift 2 ;;
    --reload) reload="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --prefix) prefix="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "soak: unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "soak: needs root (namespaces)" >&2; exit 2; }
netreduce="$NETREDUCE_ROOT/aggregator-daemon/target/netreduce"
if [ "$build" -eq 1 ]; then
  bash scripts/setup.sh
  ./mvnw -B -ntp -q -DskipTests package
fi
[ -x "$netreduce" ] || { echo "soak: $netreduce missing (build first)" >&2; exit 1; }
"$NETREDUCE_PYTHON" -c 'import torch' 2>/dev/null || { echo "soak: needs PyTorch for $NETREDUCE_PYTHON" >&2; exit 1; }

work="$(mktemp -d /tmp/netreduce-soak.XXXXXX)"
api="unix:$work/api.sock"
daemon_pid="" sampler_pid=""
mkdir -p "$out"
cleanup() {
  [ -n "$sampler_pid" ] && kill "$sampler_pid" 2>/dev/null
  pkill -f "scripts/soak/session_round.py" 2>/dev/null || true
  bed_stop "$prefix" "$work"
}
trap cleanup EXIT

config() { # config FILE WITH_RELOADED
  bed_ring_config "$1" "$api" soak "$workers" 1 16 16 4096
  # The fault injection and the CLT idle time go into the appliance's dataplane section.
  sed -i "s|^  memoryBudget: 256MiB|  memoryBudget: 256MiB\n  dataplane:\n    dropProbability: $loss|" "$1"
  if [ "$2" -eq 1 ]; then
    job_yaml soak-reloaded 3 | awk 'NR == 1 { print "  - " $0; next } { print "    " $0 }' >> "$1"
  fi
}
job_yaml() { # job_yaml NAME RING: one job of the bed's members
  printf 'name: %s\nrings:\n  - id: %s\n    elementType: fp32\n    window: 16\n    msgLen: 16\n    payloadSize: 4096\n    pmtu: 4096\n    members:\n' "$1" "$2"
  local i
  for i in $(seq 0 $(( workers - 1 ))); do printf '      - { rank: %d, ip: 10.77.0.%d }\n' "$i" $(( i + 1 )); done
}

bash scripts/testbed.sh up -w "$workers" --mtu 9000 --prefix "$prefix" >/dev/null
config "$work/netreduce.yaml" 0
NETREDUCE_JAVA_OPTS="${NETREDUCE_JAVA_OPTS:-} -XX:NativeMemoryTracking=summary" \
  bed_start_daemon "$prefix" "$netreduce" "$work/netreduce.yaml" "$api" "$work" soak >/dev/null
echo "soak: daemon pid $daemon_pid, $minutes min, W=$workers, loss $loss; results in $out"

sample_once() { # one CSV line
  local t rss fds threads nmt heap offheap clt rings
  t="$(date +%s)"
  rss="$(awk '/^VmRSS/ {print $2}' "/proc/$daemon_pid/status")"
  fds="$(ls "/proc/$daemon_pid/fd" | wc -l)"
  threads="$(awk '/^Threads/ {print $2}' "/proc/$daemon_pid/status")"
  nmt="$("$JAVA_HOME/bin/jcmd" "$daemon_pid" VM.native_memory summary 2>/dev/null || true)"
  total="$(sed -n 's/^Total: reserved=[0-9]*KB, committed=\([0-9]*\)KB.*/\1/p' <<< "$nmt" | head -n 1)"
  heap="$(grep -A1 -- '- *Java Heap' <<< "$nmt" | sed -n 's/.*committed=\([0-9]*\)KB.*/\1/p' | head -n 1)"
  offheap=$(( ${total:-0} - ${heap:-0} ))
  clt="$("$netreduce" ctl --api "$api" --json clt 2>/dev/null | "$NETREDUCE_PYTHON" -c \
    'import json,sys; d=json.load(sys.stdin); print(len(d) if isinstance(d, list) else len(d.get("entries", d.get("connections", []))))' \
    2>/dev/null || echo -1)"
  rings="$("$netreduce" ctl --api "$api" --json rings 2>/dev/null | "$NETREDUCE_PYTHON" -c \
    'import json,sys; d=json.load(sys.stdin); print(len(d) if isinstance(d, list) else len(d.get("rings", [])))' \
    2>/dev/null || echo -1)"
  echo "$t,$rss,${heap:-0},$offheap,$fds,$threads,$clt,$rings"
}
echo "time,rss_kb,heap_committed_kb,offheap_committed_kb,fds,threads,clt_entries,rings" > "$out/soak.csv"
( while kill -0 "$daemon_pid" 2>/dev/null; do sample_once >> "$out/soak.csv"; sleep "$sample"; done ) &
sampler_pid=$!

run_workers() { # run_workers RING LABEL: W worker allreduce processes; 0 when every rank's results were right
  local ring="$1" label="$2" pids=() i failed=0
  for i in $(seq 0 $(( workers - 1 ))); do
    timeout --kill-after=10 120 ip netns exec "${prefix}-w$i" "$netreduce" worker allreduce --rank "$i" \
      --world "$workers" --dev eth0 --type fp32 --size $((4 << 20)) --iterations 3 --timeout 30 \
      --ring-id "$ring" --mode netreduce --window 16 --msg-len 16 --pmtu 4096 > "$work/$label-w$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do wait "${pids[$i]}" || { failed=1; tail -n 5 "$work/$label-w$i.log" >> "$out/rounds.log"; }; done
  return "$failed"
}
run_sessions() { # run_sessions ROUND
  local pids=() i failed=0
  for i in $(seq 0 $(( workers - 1 ))); do
    timeout --kill-after=10 180 ip netns exec "${prefix}-w$i" env TMPDIR="$work" "$NETREDUCE_PYTHON" \
      scripts/soak/session_round.py --rank "$i" --world "$workers" --port $(( 29600 + $1 % 300 )) --api "$api" \
      --netreduce "$netreduce" --seed "$1" > "$work/session-w$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do wait "${pids[$i]}" || { failed=1; tail -n 5 "$work/session-w$i.log" >> "$out/rounds.log"; }; done
  return "$failed"
}

: > "$out/rounds.log"
end=$(( $(date +%s) + minutes * 60 ))
next_reload=$(( $(date +%s) + reload ))
round=0 failures=0 reloads=0 with_reloaded=0 sessions=0 extras=0
while [ "$(date +%s)" -lt "$end" ]; do
  round=$(( round + 1 ))
  status=ok
  run_workers 1 "round$round" || status=FAILED
  if [ $(( round % 3 )) -eq 0 ]; then
    sessions=$(( sessions + 1 ))
    run_sessions "$round" || status="FAILED (session)"
  fi
  if [ $(( round % 5 )) -eq 0 ]; then
    extras=$(( extras + 1 ))
    job_yaml soak-extra 2 > "$work/extra.yaml"
    if "$netreduce" ctl --api "$api" add-job "$work/extra.yaml" > /dev/null; then
      run_workers 2 "extra$round" || status="FAILED (extra job)"
      "$netreduce" ctl --api "$api" remove-job soak-extra > /dev/null || status="FAILED (remove-job)"
    else
      status="FAILED (add-job)"
    fi
  fi
  if [ "$(date +%s)" -ge "$next_reload" ]; then
    with_reloaded=$(( 1 - with_reloaded ))
    config "$work/netreduce.yaml" "$with_reloaded"
    "$netreduce" ctl --api "$api" reload > /dev/null || status="FAILED (reload)"
    reloads=$(( reloads + 1 ))
    next_reload=$(( $(date +%s) + reload ))
  fi
  [ "$status" = ok ] || failures=$(( failures + 1 ))
  echo "$(date +%T) round $round: $status" >> "$out/rounds.log"
  kill -0 "$daemon_pid" 2>/dev/null || { echo "soak: the daemon died" >&2; failures=$(( failures + 1 )); break; }
done
sample_once >> "$out/soak.csv"
"$netreduce" ctl --api "$api" counters > "$out/counters.txt" 2>/dev/null || true
kill "$sampler_pid" 2>/dev/null || true; sampler_pid=""

echo "soak: $round rounds ($sessions with sessions, $extras with an extra job), $reloads reloads, $failures failed"
"$NETREDUCE_PYTHON" - "$out/soak.csv" "$out/soak.png" "$failures" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
failures = int(sys.argv[3])
t0 = int(rows[0]["time"])
keys = ["rss_kb", "offheap_committed_kb", "heap_committed_kb", "fds", "threads", "clt_entries", "rings"]
series = {k: [int(r[k]) for r in rows] for k in keys}
minutes = [(int(r["time"]) - t0) / 60 for r in rows]
warm = max(1, len(rows) // 4)
problems = []
# Memory is compared between samples with the configuration's own rings only: an extra job's aggregator memory is
# allocated while it exists (its sample is higher) and freed when it is removed.
steady = [i for i, r in enumerate(series["rings"]) if r == series["rings"][0]]
def base_and_top(key):
    before = [series[key][i] for i in steady if i < warm] or series[key][:warm]
    after = [series[key][i] for i in steady if i >= warm] or series[key][-1:]
    return max(before[-1], 1), max(after)
for key, margin in (("rss_kb", 0.10), ("offheap_committed_kb", 0.10), ("fds", 0.0), ("threads", 0.0)):
    base, top = base_and_top(key)
    slack = max(base * margin, {"fds": 8, "threads": 4}.get(key, 4096))
    verdict = "flat" if top <= base + slack else "GREW"
    print(f"  {key:22s} after warm-up {base:>9d}, highest later {top:>9d} ({verdict}, margin {slack:.0f})")
    if verdict != "flat":
        problems.append(key)
clt = series["clt_entries"]
print(f"  clt_entries            highest {max(clt)}, at the end {clt[-1]} (replaced connections expire)")
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(len(keys), 1, figsize=(8, 2 * len(keys)), sharex=True)
    for ax, key in zip(axes, keys):
        ax.plot(minutes, series[key]); ax.set_ylabel(key, fontsize=7); ax.axvline(minutes[warm - 1], ls=":")
    axes[-1].set_xlabel("minutes")
    fig.tight_layout(); fig.savefig(sys.argv[2], dpi=90)
    print(f"  plot: {sys.argv[2]}")
except ImportError:
    print("  (no matplotlib: no plot)")
if failures or problems:
    print(f"soak: FAILED ({failures} failed rounds; grew: {', '.join(problems) or 'nothing'})")
    sys.exit(1)
print("soak: passed")
PY

#!/usr/bin/env bash
# A soak (not part of the test command): the daemon on the namespace bed for MINUTES, its dataplane dropping LOSS of
# the RoCEv2 frames it receives (fault injection), while rounds of work run back to back:
#   - every round: W `netreduce worker allreduce` processes (new queue pairs each: a client that opens new QPs per
#     call), 3 calls of 4 MiB fp32 on ring 1, results checked by the workers against the rank-order sum;
#   - every 3rd round: W Python ranks open a netreduce.Session (sidecar), make 4 calls checked bit for bit, close;
#   - every 5th round: a job `soak-extra` (ring 2, same members) is added, all-reduced once, and removed;
#   - every RELOAD seconds: the configuration file gains or loses a job `soak-reloaded` (ring 3) and `ctl reload`
#     applies it.
# Every SAMPLE seconds the daemon's RSS, off-heap memory (native memory tracking: committed, less the Java heap and
# NMT's own bookkeeping), the rings' aggregator memory, open fds, threads and the CLT, CTT, job and ring tables are
# sampled (scripts/soak/sample.py: soak.csv, nmt.csv per NMT category, jit.csv with the JVM's class and compilation
# counts, plot); every GC_EVERY-th sample first runs a full GC and records the live heap. The daemon runs with the shipped unit's heap options (systemd/netreduce.env:
# -Xms1g -Xmx1g -XX:+AlwaysPreTouch, so the heap is resident and constant from the start) and NMT in detail mode: a
# baseline is taken when the warm-up (WARMUP minutes, default a quarter of the run) ends, and its summary and detail
# diffs are written at the end (nmt-summary.diff, nmt-detail.diff).
# After the run: every round must have passed, and over the samples after the warm-up:
#   - off-heap less the rings' aggregator memory, and RSS less the heap, each less the JIT's code and the class
#     metadata (which grow while the JIT still compiles and profiles: bounded by the classes loaded, so judged by the
#     live class count instead): the least-squares slope must stay under a bound (MiB per hour; --bound-offheap,
#     --bound-rss), its 95 % interval printed beside it (a 30-minute run resolves a few MiB/h at best: the bound says
#     what was ruled out, no more); the raw slopes are printed too;
#   - the live heap after a full GC, idle at the end, against the warm-up's lowest (--bound-heap MiB/h allowed);
#   - live classes (loaded less unloaded): at the end no more than 1 % above the warm-up's highest;
#   - fds and threads: no sample above the last warm-up sample plus a small slack;
#   - the CLT: no more entries than two connections per rank per ring (a rank's live and its replaced one), and
#     replaced connections' entries expire (clt_stale_expired counts them).
# Samples whose ring set changed while they were taken are left out (marked consistent=0). Exit status 0 when all
# holds.
#
# usage: scripts/soak.sh [--minutes M] [--workers W] [--loss P] [--sample S] [--reload S] [--out DIR]
#                        [--prefix P] [--no-build] [--warmup M] [--gc-every N]
#                        [--bound-offheap MIB_H] [--bound-rss MIB_H] [--bound-heap MIB_H]
#   defaults: 30 minutes, 4 workers, loss 0.01, sample every 10 s, reload every 180 s, warm-up a quarter of the run,
#   a full GC every 6th sample, bounds 4 MiB/h (off-heap, RSS) and 2 MiB/h (live heap), results in
#   /tmp/netreduce-soak (soak.csv, nmt.csv, soak.png, nmt-*.diff, rounds.log, counters.txt, verdict.txt), prefix
#   nrsoak. Replaced connections' CLT entries expire after the daemon's 60 s.
# Needs root.
set -euo pipefail
source "$(dirname "$0")/env.sh"
source "$(dirname "$0")/lib/appliance.sh"
cd "$NETREDUCE_ROOT"

minutes=30 workers=4 loss=0.01 sample=10 reload=180 out=/tmp/netreduce-soak prefix=nrsoak build=1 warmup="" gc_every=6
bound_offheap=4 bound_rss=4 bound_heap=2
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
    --warmup) warmup="$2"; shift 2 ;;
    --gc-every) gc_every="$2"; shift 2 ;;
    --bound-offheap) bound_offheap="$2"; shift 2 ;;
    --bound-rss) bound_rss="$2"; shift 2 ;;
    --bound-heap) bound_heap="$2"; shift 2 ;;
    -h|--help) sed -n '2,38p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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
# The shipped unit's heap options (a soak of another heap says little about the unit's), NMT in detail mode for the
# diffs (its own bookkeeping is left out of the off-heap figure).
shipped_opts="$(sed -n 's/^NETREDUCE_JAVA_OPTS=//p' systemd/netreduce.env)"
NETREDUCE_JAVA_OPTS="${NETREDUCE_JAVA_OPTS:-$shipped_opts} -XX:NativeMemoryTracking=detail" \
  bed_start_daemon "$prefix" "$netreduce" "$work/netreduce.yaml" "$api" "$work" soak >/dev/null
echo "soak: daemon pid $daemon_pid, $minutes min, W=$workers, loss $loss; results in $out"
[ -n "$warmup" ] || warmup="$(awk -v m="$minutes" 'BEGIN { print m / 4 }')"

jcmd_() { "$JAVA_HOME/bin/jcmd" "$daemon_pid" "$@" 2>&1; }
rm -f "$out"/nmt-*.diff "$out/verdict.txt"
"$NETREDUCE_PYTHON" scripts/soak/sample.py --header --pid 0 --sock - --jcmd - --csv "$out/soak.csv" \
  --nmt-csv "$out/nmt.csv"
started="$(date +%s)"
warm_end=$(( started + ${warmup%.*} * 60 + $(awk -v w="$warmup" 'BEGIN { printf "%d", (w - int(w)) * 60 }') ))
echo "$warm_end" > "$work/warm_end"
(
  n=0 baselined=0
  while kill -0 "$daemon_pid" 2>/dev/null; do
    gc=(); [ $(( n % gc_every )) -eq 0 ] && gc=(--gc)
    "$NETREDUCE_PYTHON" scripts/soak/sample.py --pid "$daemon_pid" --sock "$work/api.sock" \
      --jcmd "$JAVA_HOME/bin/jcmd" --csv "$out/soak.csv" --nmt-csv "$out/nmt.csv" "${gc[@]}" \
      2>> "$out/sampler.err" || true
    if [ "$baselined" -eq 0 ] && [ "$(date +%s)" -ge "$warm_end" ]; then
      jcmd_ VM.native_memory baseline > "$out/nmt-baseline.txt"; baselined=1
    fi
    n=$(( n + 1 )); sleep "$sample"
  done
) &
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
kill "$sampler_pid" 2>/dev/null || true; sampler_pid=""; sleep 2
# Idle past the CLT's 60 s so that entries of replaced connections expire, then the last sample (with a full GC)
# and the NMT diffs against the warm-up's baseline.
sleep 65
"$NETREDUCE_PYTHON" scripts/soak/sample.py --pid "$daemon_pid" --sock "$work/api.sock" --jcmd "$JAVA_HOME/bin/jcmd" \
  --csv "$out/soak.csv" --nmt-csv "$out/nmt.csv" --gc 2>> "$out/sampler.err" || true
if [ -s "$out/nmt-baseline.txt" ]; then
  jcmd_ VM.native_memory summary.diff > "$out/nmt-summary.diff"
  jcmd_ VM.native_memory detail.diff > "$out/nmt-detail.diff"
fi
"$netreduce" ctl --api "$api" counters > "$out/counters.txt" 2>/dev/null || true
"$netreduce" ctl --api "$api" --json counters > "$out/counters.json" 2>/dev/null || true
cp "$work/daemon.log" "$out/daemon.log" 2>/dev/null || true

echo "soak: $round rounds ($sessions with sessions, $extras with an extra job), $reloads reloads, $failures failed"
"$NETREDUCE_PYTHON" scripts/soak/verdict.py --csv "$out/soak.csv" --nmt-csv "$out/nmt.csv" --png "$out/soak.png" \
  --failures "$failures" --warm-end "$(cat "$work/warm_end")" --workers "$workers" \
  --counters "$out/counters.json" --bound-offheap "$bound_offheap" --bound-rss "$bound_rss" \
  --bound-heap "$bound_heap" | tee "$out/verdict.txt"
exit "${PIPESTATUS[0]}"

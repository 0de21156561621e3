#!/usr/bin/env bash
# Where the time of one all-reduce call through netreduce.Session goes (a benchmark, not a test): W trainers in
# worker namespaces, each with its sidecar, through the daemon; the sidecar's calls through the call doorbell and as
# JSON requests, and gloo's all_reduce, alternating in the same run (scripts/bench/session_calls.py says what is
# timed; every result is checked exact). Prints rank 0's JSON lines, one per size and mode: median, p90 and the
# Session path's parts; --out appends them to a CSV.
#
# Each line also has the CPU per call (the rank's process and its sidecar), then a line with the sidecar's CPU over
# its life by kind of thread (the JIT's compilers, the endpoint, ...), and after rank 0's lines one such line for each
# other rank's sidecar ({"rank": R, "sidecar_thread_cpu_ms": ...}).
#
# usage: scripts/bench-session.sh [--workers W] [--bytes "B ..."] [--calls N] [--warmup N] [--jit N] [--rate RATE]
#                                 [--modes "doorbell json gloo"] [--out CSV] [--label L] [--no-build] [--prefix P]
#                                 [--sidecar-java-opts "JVM FLAGS"] [--sidecar-launcher PATH]
#   --sidecar-java-opts: JVM flags for the sidecars only (NETREDUCE_JAVA_OPTS of `netreduce worker serve`; the
#   daemon runs without them), e.g. "-XX:TieredStopAtLevel=1" to see what C2 costs and brings
#   --sidecar-launcher: the sidecars run another build's launcher (and so its flags, jars and AOT caches, e.g. a copy
#   of the tree before a change, its caches made there by `scripts/aot-train.sh --launcher PATH`); the daemon stays
#   this tree's. Runs of the two, alternated, are a before-and-after of the sidecar alone.
# Needs root.
set -euo pipefail
source "$(dirname "$0")/env.sh"
source "$(dirname "$0")/lib/appliance.sh"
cd "$NETREDUCE_ROOT"
workers=4
bytes=287016
calls=50
warmup=10
jit=0
modes="doorbell json gloo"
out=""
label=""
rate=""
build=1
prefix=nrses
sidecar_java_opts=""
sidecar_launcher=""
while [ $# -gt 0 ]; do
  case "$1" in
    -w|--workers) workers="$2"; shift 2 ;;
    --bytes) bytes="$2"; shift 2 ;;
    --calls) calls="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --jit) jit="$2"; shift 2 ;;
    --modes) modes="$2"; shift 2 ;;
    --out) out="$(realpath -m "$2")"; shift 2 ;;
    --label) label="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    --prefix) prefix="$2"; shift 2 ;;
    --sidecar-java-opts) sidecar_java_opts="$2"; shift 2 ;;
    --sidecar-launcher) sidecar_launcher="$(realpath "$2")"; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-session: unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "bench-session: needs root (namespaces)" >&2; exit 2; }
netreduce="$NETREDUCE_ROOT/aggregator-daemon/target/netreduce"
if [ "$build" -eq 1 ]; then
  bash scripts/setup.sh
  ./mvnw -B -ntp -q -DskipTests package
  bash scripts/aot-train.sh   # the JVMs' start-up caches for the jars just built (docs/operations.md)
fi
[ -x "$netreduce" ] || { echo "bench-session: $netreduce missing (build first)" >&2; exit 1; }
[ -z "$sidecar_launcher" ] || [ -x "$sidecar_launcher" ] ||
  { echo "bench-session: --sidecar-launcher $sidecar_launcher is not an executable" >&2; exit 2; }
work="$(mktemp -d /tmp/netreduce-bench-session.XXXXXX)"
daemon_pid=""
trap 'bed_stop "$prefix" "$work"' EXIT
bash scripts/testbed.sh up -w "$workers" --mtu 9000 --prefix "$prefix" ${rate:+--rate "$rate"} >/dev/null
# window 16, MsgLen 16, 4 KiB payloads: the Session's defaults, which it checks against the ring
bed_ring_config "$work/netreduce.yaml" "unix:$work/api.sock" bench "$workers" 1 16 16 4096
bed_start_daemon "$prefix" "$netreduce" "$work/netreduce.yaml" "unix:$work/api.sock" "$work" bench-session >/dev/null
pids=()
for i in $(seq 0 $(( workers - 1 ))); do
  ip netns exec "${prefix}-w$i" env TMPDIR="$work" SIDECAR_JAVA_OPTS="$sidecar_java_opts" \
    "$NETREDUCE_PYTHON" scripts/bench/session_calls.py --rank "$i" \
    --world "$workers" --api "unix:$work/api.sock" --netreduce "${sidecar_launcher:-$netreduce}" --sizes "$bytes" --calls "$calls" \
    --warmup "$warmup" --jit "$jit" --modes "$modes" --label "$label" ${out:+--csv "$out"} \
    > "$work/rank$i.log" 2>&1 &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
if [ "$status" -ne 0 ]; then tail -n 20 "$work"/rank*.log >&2; exit 1; fi
grep '^{' "$work/rank0.log"
# the other sidecars' CPU by kind of thread (their JIT), one line each
for i in $(seq 1 $(( workers - 1 ))); do grep '^{"rank"' "$work/rank$i.log" || true; done

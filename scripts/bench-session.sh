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
#                                 [--sidecar-java-opts "JVM FLAGS"] [--sidecar-launcher PATH] [--agent]
#                                 [--appliance-served] [--agent-sessions N]
#   --sidecar-java-opts: JVM flags for the sidecars only (NETREDUCE_JAVA_OPTS of `netreduce worker serve`; the
#   daemon runs without them), e.g. "-XX:TieredStopAtLevel=1" to see what C2 costs and brings; with --agent the
#   agents' (where @I@ stands for the agent's index, e.g. "-Xlog:jit+compilation=debug:file=/tmp/agent-@I@.jit")
#   --sidecar-launcher: the sidecars run another build's launcher (and so its flags, jars and AOT caches, e.g. a copy
#   of the tree before a change, its caches made there by `scripts/aot-train.sh --launcher PATH`); the daemon stays
#   this tree's (with --agent the agents, and the served job's sidecars, run it). Runs of the two, alternated, are a
#   before-and-after of the sidecar alone.
#   --agent: each rank's sidecar is a session of a sidecar agent (`netreduce worker agent`, one per worker namespace,
#   started after the daemon and waited for, its start warm-up done, as a host runs it under systemd); the sidecar's
#   CPU figures are then the agent's. --appliance-served: before the measured calls (with --agent, before the agents
#   start), one short run of the same calls with a sidecar per rank, so that the measured sidecars (or the agents'
#   sessions) meet a daemon that has served a job, as a deployed appliance has.
#   --agent-sessions N (with --agent, default 1): N runs of the calls, each a new set of trainer processes taking new
#   sessions of the same agents (a host's first, second, ... training), labelled L-s1, L-s2, ...
# The parts (session_calls.py) are one transport call's: for a tensor larger than the shared memory, which the Session
# sums in pieces, they are its last piece's (copy_in then holds the pieces before it), and only the call's total counts.
# Each row has first_ms, the first call of its size and mode (with --jit 0 and one size: the first call a trainer
# makes on this bed), beside the median and p90 of the calls after --warmup.
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
use_agent=0
appliance_served=0
agent_sessions=1
agent_pids=()
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
    --agent) use_agent=1; shift ;;
    --appliance-served) appliance_served=1; shift ;;
    --agent-sessions) agent_sessions="$2"; shift 2 ;;
    -h|--help) sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-session: unknown option $1" >&2; exit 2 ;;
  esac
done
case "$agent_sessions" in ''|*[!0-9]*|0) echo "bench-session: --agent-sessions must be a number of at least 1" >&2; exit 2 ;; esac
[ "$agent_sessions" -eq 1 ] || [ "$use_agent" -eq 1 ] ||
  { echo "bench-session: --agent-sessions goes with --agent" >&2; exit 2; }
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
stop_agents() {
  local pid
  for pid in "${agent_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${agent_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap 'stop_agents; bed_stop "$prefix" "$work"' EXIT
bash scripts/testbed.sh up -w "$workers" --mtu 9000 --prefix "$prefix" ${rate:+--rate "$rate"} >/dev/null
# window 16, MsgLen 16, 4 KiB payloads: the Session's defaults, which it checks against the ring
bed_ring_config "$work/netreduce.yaml" "unix:$work/api.sock" bench "$workers" 1 16 16 4096
bed_start_daemon "$prefix" "$netreduce" "$work/netreduce.yaml" "unix:$work/api.sock" "$work" bench-session >/dev/null
# run_ranks TAG [AGENTS [PORT]]: one session_calls.py per worker namespace, their rendezvous on PORT; with AGENTS
# (1) each takes a session of its namespace's agent. Rank i's output in $work/TAG-rank$i.log.
run_ranks() {
  local tag="$1" agents="${2:-0}" port="${3:-29700}" i p status=0 pids=() rank_java_opts="$sidecar_java_opts"
  [ "$use_agent" -eq 0 ] || rank_java_opts=""   # with --agent the flags are for the agents
  for i in $(seq 0 $(( workers - 1 ))); do
    local agent_env=(NETREDUCE_AGENT=off)
    [ "$agents" -eq 1 ] && agent_env=(NETREDUCE_AGENT="$work/agent-$i.sock" BENCH_AGENT_PID="${agent_pids[$i]}")
    ip netns exec "${prefix}-w$i" env TMPDIR="$work" SIDECAR_JAVA_OPTS="$rank_java_opts" "${agent_env[@]}" \
      "$NETREDUCE_PYTHON" scripts/bench/session_calls.py --rank "$i" \
      --world "$workers" --port "$port" --api "unix:$work/api.sock" --netreduce "${sidecar_launcher:-$netreduce}" --sizes "$bytes" --calls "$calls" \
      --warmup "$warmup" --jit "$jit" --modes "$modes" --label "$label" ${out:+--csv "$out"} \
      > "$work/$tag-rank$i.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || status=1; done
  if [ "$status" -ne 0 ]; then tail -n 20 "$work"/"$tag"-rank*.log >&2; exit 1; fi
}
if [ "$appliance_served" -eq 1 ]; then
  # another job first, a sidecar per rank, not reported: the daemon's own first calls
  ( calls=5; warmup=0; jit=0; out=""; label="${label:+$label-}served"; run_ranks served 0 29690 )
  echo "the appliance has served a job (5 calls of each size, a sidecar per rank)" >&2
fi
if [ "$use_agent" -eq 1 ]; then
  bed_start_agents "$prefix" "${sidecar_launcher:-$netreduce}" "$work" "$workers" bench-session "$sidecar_java_opts"
fi
if [ "$use_agent" -eq 0 ] || [ "$agent_sessions" -eq 1 ]; then
  run_ranks calls "$use_agent"
  grep '^{' "$work/calls-rank0.log"
  # the other sidecars' CPU by kind of thread (their JIT), one line each
  for i in $(seq 1 $(( workers - 1 ))); do grep '^{"rank"' "$work/calls-rank$i.log" || true; done
else
  base_label="$label"
  for n in $(seq 1 "$agent_sessions"); do
    label="${base_label:+$base_label-}s$n"
    echo "-- the agents' session $n" >&2
    run_ranks "calls-s$n" 1 $(( 29700 + n ))
    grep '^{' "$work/calls-s$n-rank0.log"
  done
fi

#!/usr/bin/env bash
# The JVMs' start-up and warm-up with and without their ahead-of-time caches (scripts/aot-train.sh), in one run on
# the namespace test bed, the modes alternating run by run so that the machine's load hits them alike:
#
#   daemon:    `netreduce daemon` (one fp32 ring of the W workers, 4 KiB payloads) from exec until its control API
#              answers for the ring (scripts/bench/startup_probe.py), and the dataplane's own warm-up (its log)
#   serve:     `netreduce worker serve` from exec until its "listening" line (what the sidecar transport waits for)
#   session:   W trainers (scripts/bench/session_start.py): netreduce.Session() as the user calls it, after gloo's
#              process group is up, and its parts (the sidecar's start, open, the ring check, connect); then
#              --session-calls all-reduces of 287 KB (one call of the CNN's DDP step) each after a barrier
#   allreduce: W `netreduce worker allreduce` processes, --size-mib MiB fp32, --iterations calls, a call's time
#              the slowest rank's: the first call, the second and the median of the calls from the fourth on
#
# Modes (--modes, in this order every run): aot (the launcher's default: the caches when present and fresh),
# off (NETREDUCE_AOT=off), or NAME:VAR=VALUE, the aot mode with one more environment variable, e.g.
#   'eager:NETREDUCE_JAVA_OPTS=-XX:+UnlockExperimentalVMOptions -XX:+AOTCompileEagerly'
# NETREDUCE_BENCH_LAUNCHER=PATH in a mode runs that mode with another build's launcher (and so its jars and caches),
# e.g. 'main:NETREDUCE_BENCH_LAUNCHER=/tmp/main/aggregator-daemon/target/netreduce' for a before-and-after in one run.
# Prints the medians over the runs per mode; every run's figures go to the CSV. --parts picks what runs (the daemon
# always starts: the others need it).
#
# usage: scripts/bench-startup.sh [--workers W (default 4)] [--runs N (default 3)] [--size-mib M (default 64)]
#                                 [--iterations K (default 8)] [--session-calls C (default 30)]
#                                 [--modes "aot off"] [--mode SPEC (adds one)] [--out docs/bench/startup.csv]
#                                 [--parts "serve session allreduce"]
#                                 [--no-build] [--prefix P]
# Needs root. Builds and trains the caches first unless --no-build (then the caches must be fresh).
set -euo pipefail
source "$(dirname "$0")/env.sh"
source "$(dirname "$0")/lib/appliance.sh"
cd "$NETREDUCE_ROOT"
workers=4
runs=3
size_mib=64
iterations=8
session_calls=30
modes=(aot off)
parts="serve session allreduce"
out=docs/bench/startup.csv
build=1
prefix=nrst
while [ $# -gt 0 ]; do
  case "$1" in
    -w|--workers) workers="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --size-mib) size_mib="$2"; shift 2 ;;
    --iterations) iterations="$2"; shift 2 ;;
    --session-calls) session_calls="$2"; shift 2 ;;
    --modes) read -r -a modes <<< "$2"; shift 2 ;;
    --mode) modes+=("$2"); shift 2 ;;
    --parts) parts="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    --prefix) prefix="$2"; shift 2 ;;
    -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-startup: unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "bench-startup: needs root (namespaces)" >&2; exit 2; }
netreduce="$NETREDUCE_ROOT/aggregator-daemon/target/netreduce"
if [ "$build" -eq 1 ]; then
  bash scripts/setup.sh
  ./mvnw -B -ntp -q -DskipTests package
  bash scripts/aot-train.sh
fi
[ -x "$netreduce" ] || { echo "bench-startup: $netreduce missing (build first)" >&2; exit 1; }
bash scripts/aot-train.sh --check || echo "bench-startup: the aot mode runs without the stale caches" >&2

work="$(mktemp -d /tmp/netreduce-bench-startup.XXXXXX)"
chmod 755 "$work"
daemon_pid=""
stop_daemon() {
  if [ -n "$daemon_pid" ]; then
    kill -- "-$daemon_pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 -- "-$daemon_pid" 2>/dev/null || true
    daemon_pid=""
  fi
}
trap 'stop_daemon; bed_stop "$prefix" "$work"' EXIT
bash scripts/testbed.sh up -w "$workers" --mtu 9000 --prefix "$prefix" >/dev/null
bed_ring_config "$work/netreduce.yaml" "unix:$work/api.sock" startup "$workers" 1 16 16 4096
size=$(( size_mib << 20 ))
mkdir -p "$(dirname "$out")"
: > "$work/rows.jsonl"

# mode_env SPEC: the environment of a mode, one VAR=VALUE a line
mode_env() {
  case "$1" in
    aot) ;;
    off) echo "NETREDUCE_AOT=off" ;;
    *:*=*) echo "${1#*:}" ;;
    *) echo "bench-startup: unknown mode $1" >&2; exit 2 ;;
  esac
}

run_mode() {  # run, mode spec
  local run="$1" spec="$2" name="${2%%:*}" env=() line i pids=() status=0 netreduce="$netreduce" e
  mapfile -t env < <(mode_env "$spec")
  for e in "${env[@]}"; do
    [[ "$e" == NETREDUCE_BENCH_LAUNCHER=* ]] && netreduce="${e#*=}"
  done
  rm -f "$work/api.sock"
  line=$(env "${env[@]}" "$NETREDUCE_PYTHON" scripts/bench/startup_probe.py daemon "${prefix}-app" "$netreduce" \
    "$work/netreduce.yaml" "unix:$work/api.sock" "$work/daemon-$name-$run.log")
  daemon_pid=$(echo "$line" | sed -n 's/.*"pid": \([0-9]*\).*/\1/p')
  [ -n "$daemon_pid" ] || { echo "bench-startup: $line" >&2; tail -n 20 "$work/daemon-$name-$run.log" >&2; exit 1; }
  echo "{\"run\": $run, \"mode\": \"$name\", \"what\": \"daemon\", \"data\": $line}" >> "$work/rows.jsonl"
  if [[ " $parts " == *" serve "* ]]; then
  line=$(ip netns exec "${prefix}-w0" env "${env[@]}" "$NETREDUCE_PYTHON" scripts/bench/startup_probe.py serve \
    "$netreduce")
  echo "{\"run\": $run, \"mode\": \"$name\", \"what\": \"serve\", \"data\": $line}" >> "$work/rows.jsonl"
  fi
  if [[ " $parts " == *" session "* ]]; then
  for i in $(seq 0 $(( workers - 1 ))); do
    ip netns exec "${prefix}-w$i" env "${env[@]}" TMPDIR="$work" "$NETREDUCE_PYTHON" scripts/bench/session_start.py \
      --rank "$i" --world "$workers" --api "unix:$work/api.sock" --netreduce "$netreduce" \
      --calls "$session_calls" > "$work/session-$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do wait "${pids[$i]}" || { status=1; tail -n 20 "$work/session-$i.log" >&2; }; done
  [ "$status" -eq 0 ] || { echo "bench-startup: session ranks failed ($name, run $run)" >&2; exit 1; }
  echo "{\"run\": $run, \"mode\": \"$name\", \"what\": \"session\", \"data\": $(grep '^{' "$work/session-0.log")}" \
    >> "$work/rows.jsonl"
  fi
  if [[ " $parts " == *" allreduce "* ]]; then
  pids=()
  for i in $(seq 0 $(( workers - 1 ))); do
    ip netns exec "${prefix}-w$i" env "${env[@]}" "$netreduce" worker allreduce --rank "$i" --world "$workers" \
      --dev eth0 --pmtu 4096 --size "$size" --iterations "$iterations" --timeout 60 --json > "$work/w$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do wait "${pids[$i]}" || { status=1; tail -n 5 "$work/w$i.log" >&2; }; done
  [ "$status" -eq 0 ] || { echo "bench-startup: allreduce ranks failed ($name, run $run)" >&2; exit 1; }
  echo "{\"run\": $run, \"mode\": \"$name\", \"what\": \"allreduce\", \"data\": [$(grep -h '^{' "$work"/w*.log |
    paste -sd,)]}" >> "$work/rows.jsonl"
  fi
  stop_daemon
}

for run in $(seq 1 "$runs"); do
  for spec in "${modes[@]}"; do
    echo "bench-startup: run $run/$runs, ${spec%%:*}" >&2
    run_mode "$run" "$spec"
  done
done

"$NETREDUCE_PYTHON" - "$work/rows.jsonl" "$out" "$workers" "$size_mib" <<'EOF'
import csv, json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
out, workers, size_mib = sys.argv[2], int(sys.argv[3]), sys.argv[4]
runs = {}
for row in rows:
    runs.setdefault((row["mode"], row["run"]), {})[row["what"]] = row["data"]
fields = ["mode", "run", "workers", "daemon_ready_s", "daemon_cpu_s", "dataplane_warm_up_ms", "serve_listening_s",
          "serve_cpu_s", "gloo_init_s", "session_s", "sidecar_listening_s", "sidecar_cpu_s", "open_s", "check_ring_s",
          "connect_s", "small_first_ms", "small_second_ms", "small_steady_ms", "allreduce_size_mib",
          "allreduce_first_ms", "allreduce_second_ms", "allreduce_steady_ms", "allreduce_first_cpu_ms",
          "allreduce_steady_cpu_ms", "allreduce_call_ms"]
table = []
for (mode, run), d in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    row = {"mode": mode, "run": run, "workers": workers, "allreduce_size_mib": size_mib,
           "daemon_ready_s": d["daemon"]["daemon_ready_s"], "daemon_cpu_s": d["daemon"]["daemon_cpu_s"],
           "dataplane_warm_up_ms": d["daemon"]["dataplane_warm_up_ms"]}
    if "serve" in d:
        row.update({"serve_listening_s": d["serve"]["serve_listening_s"], "serve_cpu_s": d["serve"]["serve_cpu_s"]})
    if "session" in d:
        ranks = d["session"]["ranks"]
        med = lambda key: round(statistics.median(r[key] for r in ranks), 3)
        small = [max(r["calls_ms"][i] for r in ranks) for i in range(len(ranks[0]["calls_ms"]))]
        row.update({"gloo_init_s": max(r["gloo_init_s"] for r in ranks),
                    "session_s": max(r["session_s"] for r in ranks),
                    "sidecar_listening_s": med("sidecar_listening_s"), "sidecar_cpu_s": med("sidecar_cpu_s"),
                    "open_s": med("open_s"), "check_ring_s": med("check_ring_s"), "connect_s": med("connect_s"),
                    "small_first_ms": round(small[0], 2), "small_second_ms": round(small[1], 2),
                    "small_steady_ms": round(statistics.median(small[10:] or small), 2)})
    if "allreduce" in d:
        ar = d["allreduce"]
        assert all(a["ok"] for a in ar), f"{mode} run {run}: an all-reduce was not exact"
        calls = [max(a["call_ms"][i] for a in ar) for i in range(len(ar[0]["call_ms"]))]
        cpu = [statistics.mean(a["cpu_ms"][i] for a in ar) for i in range(len(ar[0]["cpu_ms"]))]
        row.update({"allreduce_first_ms": round(calls[0], 1), "allreduce_second_ms": round(calls[1], 1),
                    "allreduce_steady_ms": round(statistics.median(calls[3:] or calls), 1),
                    "allreduce_first_cpu_ms": round(cpu[0], 1),
                    "allreduce_steady_cpu_ms": round(statistics.median(cpu[3:] or cpu), 1),
                    "allreduce_call_ms": ";".join(f"{c:.1f}" for c in calls)})
    table.append(row)
with open(out, "w", newline="", encoding="utf-8") as f:
    writer = csv.DictWriter(f, fieldnames=fields)
    writer.writeheader()
    writer.writerows(table)
shown = [k for k in fields if k not in ("mode", "run", "workers", "allreduce_size_mib", "allreduce_call_ms")
         and k in table[0]]
modes = list(dict.fromkeys(t["mode"] for t in table))
print(f"medians over {len(table) // len(modes)} runs, W = {workers}, all-reduce of {size_mib} MiB (CSV: {out})")
print(f"{'':24}" + "".join(f"{m:>12}" for m in modes))
for key in shown:
    print(f"{key:24}" + "".join(f"{statistics.median(t[key] for t in table if t['mode'] == m):>12.3f}"
                                for m in modes))
EOF

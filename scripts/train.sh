#!/usr/bin/env bash
# Train with it: DDP training of a small CNN on scikit-learn's 8x8 digits, W workers in network namespaces, once
# through the appliance (netreduce.allreduce_hook) and once with plain gloo, the same seeds; then compare.
#
#   1. builds netreduce (scripts/setup.sh, ./mvnw package, scripts/aot-train.sh for the JVMs' start-up caches;
#      --no-build skips) and installs python3-torch,
#      python3-sklearn and python3-matplotlib if missing (the data set ships in python3-sklearn: no download),
#   2. brings the namespace test bed up (scripts/testbed.sh: W workers, MTU 9000, links shaped to RATE),
#   3. starts the daemon in the appliance namespace with one fp32 ring of the W workers' addresses
#      (window 16, MsgLen 16, payload 4096), as scripts/demo.sh does,
#   4. runs W ranks of scripts/train/ddp_train.py --mode netreduce, one per worker namespace (each starts its
#      `netreduce worker serve` sidecar through netreduce.Session), then W ranks of --mode gloo (DDP's own
#      all-reduce over the same gloo process group), then the same training simulated in one process with the
#      gradients summed in several fixed fp32 orders (the reassociation reference, no network),
#   5. prints loss per step for both modes, time per step (median, p90; warm-up steps left out), each mode's CPU
#      per step by component (trainers, sidecars' endpoints and JIT, the appliance's lanes and JIT:
#      scripts/bench/cpu_by_component.py), bytes each worker's eth0 sent per step, final test accuracies, and checks that the loss curves agree within the
#      tolerance fp32 reassociation allows (scripts/train/compare.py says how it is derived) and that the final
#      accuracies are equal; plots loss, the difference against the tolerance, accuracy and step time to a PNG,
#   6. tears everything down (on success, failure or interrupt).
#
# Exit status: 0 when both runs finished and agree, 1 otherwise, 2 on a usage error.
#
# usage: scripts/train.sh [--workers W] [--rate RATE|none] [--epochs E] [--steps N] [--batch B] [--lr LR]
#                         [--seed S] [--warmup N] [--plot FILE] [--results DIR] [--prefix P] [--no-build]
#                         [--timeout SECONDS] [--model cnn|mlp|dlrm] [--hidden UNITS] [--kill-appliance STEP:DOWN]
#                         [--hot-budgets "BYTES ..."] [--min-frequency auto|F] [--zipf S] [--pooling L]
#                         [--repeats N] [--agent] [--agent-sessions N]
#   --agent: each worker's sidecar is a session of a sidecar agent (`netreduce worker agent`, one per worker
#   namespace, started after the daemon, as a host would run it under systemd; docs/python.md, "The sidecar agent"),
#   and the netreduce run is made at least twice: netreduce-first (each agent's first session, before gloo's run)
#   and, after gloo's run, netreduce (the second training on those hosts: the agents' and the daemon's code already
#   compiled); the comparison is printed for each (cnn, mlp).
#   NETREDUCE_AGENT_OPTIONS in the environment adds options to the agents' command line (e.g. their start warm-up's
#   size: --start-warm-up-frames N).
#   --agent-sessions N (with --agent, default 2): N netreduce runs through the same agents, the first before gloo's
#   run and the others after it (netreduce, then netreduce-s3, ...), each compared with gloo's run.
#   --appliance-served (with --agent): before the agents start, one netreduce training through a sidecar per trainer
#   (netreduce-served: other hosts' job on the same appliance), so that the agents' first sessions meet an appliance
#   that has served a job, as a deployed one has, instead of a daemon started a moment before; compared with gloo's
#   run too.
#   --kill-appliance STEP:DOWN: the netreduce run's sessions fall back to gloo when a call fails and go back to
#   the appliance when it answers again (fallback=True, recover_after 2 s, a call fails after 3 s without
#   progress); the daemon is killed (SIGKILL) once rank 0 has finished step STEP and started again DOWN seconds
#   later. The run must still agree with gloo's; the steps taken on each path are printed.
#   --model mlp: two hidden layers of UNITS (default 1536: 2.47 M parameters, 9.9 MB of gradient per step), where
#   the all-reduce is bandwidth-bound at 1 Gbit/s; the default cnn (287 KB of gradient) is latency-bound.
#   --model dlrm: sparse training (scripts/train/dlrm_train.py): a DLRM-style click model, 4 EmbeddingBag tables of
#   100,000 x 16 with sparse gradients, on synthetic Zipf click data (scripts/train/clicks.py, seeded), 120 steps of
#   256 samples per rank, SGD lr 0.2; four runs in the same bed: netreduce (dense parameters through the appliance
#   with allreduce_hook, the tables through netreduce.sparse.HotColdReducer: hot rows through the appliance, cold
#   rows all-gathered), one more netreduce run for every further --hot-budgets value (default "1048576
#   1048576:auto:fused": the hot block's bytes per step, the second run with the dense gradients in the hot call; with
#   --min-frequency auto the hot set stops at the break-even frequency 1/(W-1); an
#   entry BYTES:F gives that run its own min frequency, e.g. --hot-budgets "1048576 0:0 65536:0 262144:0", and
#   BYTES:F:FLAGS adds flags, comma-separated: fused (no DDP: the dense gradients in the hot rows' appliance call),
#   nofill (the hot block's last message is not filled with more rows), allgather (the cold rows through an
#   all-gather instead of an all-to-all)),
#   gloo-sparse (plain DDP: gloo's sparse all-reduce of the tables), gloo-dense (the tables dense, DDP's gloo ring),
#   then the reference (rank order and the other fixed orders, one process); with --repeats N (default 1) the first
#   hot budget's run and gloo-sparse run N times in turn (netreduce, gloo-sparse, netreduce, ...) before gloo-dense,
#   and the comparison adds each pair's step times and their ratio (the machine's load drifts between runs: the
#   median of the pairs' ratios is the figure to quote); scripts/train/dlrm_compare.py checks
#   that netreduce equals the rank-order reference bit for bit and agrees with both gloo runs within the
#   reassociation tolerance, and prints step times (warm-up: the first 20 steps), bytes and the hot set's share.
#   defaults: 4 workers, 1gbit links, 10 epochs (110 steps with 4 workers x 32 samples), batch 32 per rank,
#   lr 0.05 (momentum 0.9), seed 12, warm-up: the first epoch (left out of the step-time statistics),
#   plot /tmp/netreduce-train-digits.png, results (the three JSON files) in /tmp/netreduce-train,
#   prefix nrtrain (its own bed, beside any other).
# Needs root (network namespaces). On the shared 2-core development machine the default run takes about 25 s
# after the build (netreduce ranks ~9 s with start-up, gloo ranks ~4 s, reference ~4 s).
# --model dlrm: about 2.5 min (each netreduce run ~15-18 s, gloo-sparse ~11 s, gloo-dense ~50-65 s, reference ~30 s).
set -euo pipefail
source "$(dirname "$0")/env.sh"
source "$(dirname "$0")/lib/appliance.sh"
cd "$NETREDUCE_ROOT"

workers=4
rate=1gbit
epochs=10
steps=0
batch=32
lr=0.05
seed=12
warmup=""
plot=/tmp/netreduce-train-digits.png
results=/tmp/netreduce-train
prefix=nrtrain
build=1
timeout=300
window=16
msg_len=16
payload=4096
ring_id=1
model=cnn
hidden=1536
kill_appliance=""
hot_budgets="1048576 1048576:auto:fused"
repeats=1
min_frequency=auto
zipf=1.2
pooling=8
use_agent=0
agents_up=0     # set once the agents listen: from then on the netreduce runs take sessions of them
agent_sessions=2
appliance_served=0
agent_pids=()

while [ $# -gt 0 ]; do
  case "$1" in
    -w|--workers) workers="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --epochs) epochs="$2"; steps=0; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --hidden) hidden="$2"; shift 2 ;;
    --hot-budgets) hot_budgets="$2"; shift 2 ;;
    --min-frequency) min_frequency="$2"; shift 2 ;;
    --zipf) zipf="$2"; shift 2 ;;
    --pooling) pooling="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --lr) lr="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --plot) plot="$2"; shift 2 ;;
    --results) results="$2"; shift 2 ;;
    --prefix) prefix="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    --timeout) timeout="$2"; shift 2 ;;
    --kill-appliance) kill_appliance="$2"; shift 2 ;;
    --agent) use_agent=1; shift ;;
    --agent-sessions) agent_sessions="$2"; shift 2 ;;
    --appliance-served) appliance_served=1; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "train: unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "train: needs root (network namespaces, veth, tc)" >&2; exit 2; }
case "$workers" in ''|*[!0-9]*) echo "train: --workers must be a number" >&2; exit 2 ;; esac
[ "$workers" -ge 2 ] && [ "$workers" -le 64 ] || { echo "train: --workers must be 2..64" >&2; exit 2; }
[ "$rate" = none ] && rate=""
case "$agent_sessions" in ''|*[!0-9]*|0|1) echo "train: --agent-sessions must be a number of at least 2" >&2; exit 2 ;; esac
if [ "$use_agent" -eq 1 ] && { [ "$model" = dlrm ] || [ -n "$kill_appliance" ]; }; then
  echo "train: --agent is for the cnn and mlp runs, without --kill-appliance" >&2; exit 2
fi
if [ "$appliance_served" -eq 1 ] && [ "$use_agent" -eq 0 ]; then
  echo "train: --appliance-served goes with --agent" >&2; exit 2
fi
kill_step="" kill_down=""
if [ -n "$kill_appliance" ]; then
  kill_step="${kill_appliance%%:*}" kill_down="${kill_appliance#*:}"
  case "$kill_step:$kill_down" in
    *[!0-9:]*|:*|*:) echo "train: --kill-appliance takes STEP:DOWN (whole numbers): $kill_appliance" >&2; exit 2 ;;
  esac
fi
case "$repeats" in ''|*[!0-9]*|0) echo "train: --repeats must be a whole number >= 1" >&2; exit 2 ;; esac
case "$model" in cnn|mlp|dlrm) ;; *) echo "train: --model must be cnn, mlp or dlrm" >&2; exit 2 ;; esac
[ "$model" = dlrm ] && [ -n "$kill_step" ] && { echo "train: --kill-appliance is for --model cnn or mlp" >&2; exit 2; }
if [ "$model" = dlrm ]; then
  # the DLRM run's own defaults, unless given
  [ "$steps" -eq 0 ] && steps=120
  [ "$lr" = 0.05 ] && lr=0.2
  [ "$batch" = 32 ] && batch=256
  [ "$plot" = /tmp/netreduce-train-digits.png ] && plot=/tmp/netreduce-train-dlrm.png
  [ "$results" = /tmp/netreduce-train ] && results=/tmp/netreduce-train-dlrm
fi

netreduce="$NETREDUCE_ROOT/aggregator-daemon/target/netreduce"
work="$(mktemp -d /tmp/netreduce-train.XXXXXX)"
api="unix:$work/api.sock"
daemon_pid=""
sampler_pid=""
rank_pids=()

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  # A rank killed before Session.close() leaves its sidecar's shared memory file in /dev/shm (and its sidecar
  # directory in TMPDIR, which is $work): note the files our ranks have mapped, remove them once the ranks are gone.
  local shm_files=() pid child
  for pid in "${rank_pids[@]}"; do
    for child in $(pgrep -P "$pid" 2>/dev/null); do
      shm_files+=($(grep -o '/dev/shm/netreduce-[^ ]*' "/proc/$child/maps" 2>/dev/null | sort -u))
    done
  done
  for pid in "${rank_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${rank_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  for f in "${shm_files[@]}"; do rm -f "$f"; done
  [ -z "$sampler_pid" ] || kill "$sampler_pid" 2>/dev/null || true
  for pid in "${agent_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${agent_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ -n "$daemon_pid" ]; then
    kill "$daemon_pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$daemon_pid" 2>/dev/null || true
  fi
  bash scripts/testbed.sh down --prefix "$prefix" >/dev/null 2>&1 || true
  if [ "$status" -ne 0 ] && [ -d "$work" ]; then
    rm -rf /tmp/netreduce-train-logs  # only this run's: an earlier run's files would read as this one's
    mkdir -p /tmp/netreduce-train-logs
    cp "$work"/*.log "$work"/*.json "$work"/*.yaml "$work"/*.txt "$work"/*.jsonl /tmp/netreduce-train-logs/ 2>/dev/null || true
    echo "train: logs kept in /tmp/netreduce-train-logs" >&2
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'echo "train: interrupted" >&2; exit 130' INT TERM

step() { printf '\n== %s\n' "$*"; }

if [ "$build" -eq 1 ]; then
  step "build"
  bash scripts/setup.sh
  ./mvnw -B -ntp -q -DskipTests package
  bash scripts/aot-train.sh   # the JVMs' start-up caches for the jars just built (docs/operations.md)
fi
[ -x "$netreduce" ] || { echo "train: $netreduce missing (build first)" >&2; exit 2; }

# The trainer's own packages (Debian's, for /usr/bin/python3): PyTorch, the data set, the plot.
need=()
"$NETREDUCE_PYTHON" -c 'import torch' >/dev/null 2>&1 || need+=(python3-torch)
[ "$model" = dlrm ] || "$NETREDUCE_PYTHON" -c 'import sklearn.datasets' >/dev/null 2>&1 || need+=(python3-sklearn)
"$NETREDUCE_PYTHON" -c 'import matplotlib' >/dev/null 2>&1 || need+=(python3-matplotlib)
if [ ${#need[@]} -gt 0 ]; then
  step "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

step "test bed: $workers workers, MTU 9000${rate:+, $rate links}"
bash scripts/testbed.sh up -w "$workers" --mtu 9000 ${rate:+--rate "$rate"} --prefix "$prefix"

step "appliance: daemon in ${prefix}-app"
bed_ring_config "$work/netreduce.yaml" "$api" train "$workers" "$ring_id" "$window" "$msg_len" "$payload"
bed_start_daemon "$prefix" "$netreduce" "$work/netreduce.yaml" "$api" "$work" train

trainer=scripts/train/ddp_train.py
train_args=(--world "$workers" --epochs "$epochs" --steps "$steps" --batch "$batch" --lr "$lr" --seed "$seed"
            --model "$model" --hidden "$hidden")
if [ "$model" = dlrm ]; then
  trainer=scripts/train/dlrm_train.py
  train_args=(--world "$workers" --steps "$steps" --batch "$batch" --lr "$lr" --seed "$seed" --zipf "$zipf"
              --pooling "$pooling")
fi

# CPU accounting, to say where a mode's time goes on a machine whose cores everything shares: the machine's busy
# clock ticks (user, nice, system, irq, softirq of /proc/stat) and the appliance's (fields 14-15 of its stat).
busy_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
daemon_ticks() { awk '{print $14 + $15}' "/proc/$daemon_pid/stat"; }

# With --kill-appliance: once rank 0 has finished step $kill_step, kill the daemon (SIGKILL, as a crash), and start
# it again from the same configuration $kill_down seconds later.
kill_and_restart() {
  local done_step=-1 _
  while :; do
    done_step="$(cat "$work/progress" 2>/dev/null || echo -1)"
    [ "${done_step:--1}" -ge "$kill_step" ] && break
    for pid in "${rank_pids[@]}"; do kill -0 "$pid" 2>/dev/null || return 0; done
    sleep 0.05
  done
  kill -9 "$daemon_pid"; wait "$daemon_pid" 2>/dev/null || true
  echo "appliance: daemon killed after step $done_step"
  mv "$work/daemon.log" "$work/daemon-killed.log"
  sleep "$kill_down"
  bed_start_daemon "$prefix" "$netreduce" "$work/netreduce.yaml" "$api" "$work" train >/dev/null
  echo "appliance: daemon started again ${kill_down} s later, while rank 0 was at step $(cat "$work/progress")"
}

run_mode() { # mode port [name [args...]]: W ranks of the trainer, one per worker namespace; rank 0 writes
             # $work/$name.json (name: the mode's, unless given)
  local mode="$1" port="$2" name="${3:-$1}" failed=0 start_ns busy0 app0 killing=0
  local extra=("${@:4}")
  if [ "$mode" = netreduce ] && [ -n "$kill_step" ]; then
    extra+=(--fallback --recover-after 2 --timeout 3 --progress "$work/progress" --stats-every-step)
    killing=1
  fi
  start_ns="$(date +%s%N)"
  busy0="$(busy_ticks)"; app0="$(daemon_ticks)"
  "$NETREDUCE_PYTHON" scripts/bench/cpu_by_component.py record "$work/$name-cpu.jsonl" & sampler_pid=$!
  rank_pids=()
  for i in $(seq 0 $(( workers - 1 ))); do
    local agent_env=()
    [ "$agents_up" -eq 1 ] && [ "$mode" = netreduce ] && agent_env=(NETREDUCE_AGENT="$work/agent-$i.sock")
    timeout --signal=TERM --kill-after=10 "$timeout" \
      ip netns exec "${prefix}-w$i" env PYTHONPATH="$NETREDUCE_ROOT/python" GLOO_SOCKET_IFNAME=eth0 TMPDIR="$work" \
        "${agent_env[@]}" \
        "$NETREDUCE_PYTHON" "$trainer" --mode "$mode" --rank "$i" --master 10.77.0.1 \
        --port "$port" --dev eth0 "${train_args[@]}" --out "$work/$name.json" \
        --api "$api" --netreduce "$netreduce" --ring-id "$ring_id" --window "$window" --msg-len "$msg_len" \
        --payload "$payload" "${extra[@]}" \
        > "$work/$name-rank$i.log" 2>&1 &
    rank_pids+=($!)
  done
  [ "$killing" -eq 1 ] && kill_and_restart
  for i in "${!rank_pids[@]}"; do
    wait "${rank_pids[$i]}" || { echo "train: $name rank $i failed (exit $?)" >&2; failed=1; }
  done
  rank_pids=()
  kill "$sampler_pid" 2>/dev/null; wait "$sampler_pid" 2>/dev/null || true
  local wall_ms=$(( ($(date +%s%N) - start_ns) / 1000000 )) hz; hz="$(getconf CLK_TCK)"
  echo "$name: $workers ranks done in $wall_ms ms (wall, with start-up); CPU busy $(( ($(busy_ticks) - busy0) * 1000 / hz )) ms of $(( wall_ms * $(nproc) )) available, of which the appliance $(( ($(daemon_ticks) - app0) * 1000 / hz )) ms" | tee "$work/$name-cpu.txt"
  # Whose CPU each step took (trainers, sidecars' endpoints and JIT, the appliance's lanes and JIT), over the timed
  # steps (after the warm-up the comparison leaves out) and over all of them.
  if [ -s "$work/$name.json" ]; then
    local skip
    skip="$(cd scripts/train && "$NETREDUCE_PYTHON" -c 'import json, sys; from compare import warmup_steps; print(warmup_steps(json.load(open(sys.argv[1])), int(sys.argv[2]) if sys.argv[2] else None))' "$work/$name.json" "$warmup")"
    { echo "$name, after the first $skip steps:"
      "$NETREDUCE_PYTHON" scripts/bench/cpu_by_component.py report "$work/$name-cpu.jsonl" --results "$work/$name.json" --skip "$skip"
      echo "$name, every step:"
      "$NETREDUCE_PYTHON" scripts/bench/cpu_by_component.py report "$work/$name-cpu.jsonl" --results "$work/$name.json" --skip 0
    } 2>&1 | tee -a "$work/$name-cpu.txt"
  fi
  if [ "$failed" -ne 0 ] || [ ! -s "$work/$name.json" ]; then
    for i in $(seq 0 $(( workers - 1 ))); do
      printf -- '-- %s rank %d\n' "$name" "$i" >&2
      tail -n 25 "$work/$name-rank$i.log" >&2
    done
    return 1
  fi
}

if [ "$model" = dlrm ]; then
  # Sparse training: netreduce hot/cold (one run per hot budget), gloo's sparse path, gloo dense, the reference.
  nr_runs=()
  port=29500
  for entry in $hot_budgets; do
    IFS=: read -r budget frequency flags <<< "$entry"
    frequency="${frequency:-$min_frequency}"
    options=(); name="netreduce-$budget-$frequency"; label="budget $budget B, min frequency $frequency"
    for flag in ${flags//,/ }; do
      case "$flag" in
        fused) options+=(--fuse-dense); name="$name-fused"; label="$label, dense fused" ;;
        nofill) options+=(--no-fill); name="$name-nofill"; label="$label, last message not filled" ;;
        allgather) options+=(--cold-exchange allgather); name="$name-allgather"; label="$label, cold rows all-gathered" ;;
        *) echo "train: unknown flag $flag in --hot-budgets entry $entry" >&2; exit 2 ;;
      esac
    done
    step "netreduce: $workers ranks, dense parameters through the appliance, tables hot/cold ($label)"
    run_mode netreduce "$port" "$name" --hot-budget "$budget" --min-frequency "$frequency" "${options[@]}" \
      --label "$label" || {
      "$netreduce" ctl --api "$api" counters 2>/dev/null | awk 'NR == 1 || $NF != "0"' >&2 || true
      exit 1
    }
    # the first entry's arguments, for --repeats
    [ "${#nr_runs[@]}" -gt 0 ] || first_args=(--hot-budget "$budget" --min-frequency "$frequency" "${options[@]}")
    nr_runs+=("$work/$name.json")
    port=$(( port + 1 ))
  done
  "$netreduce" ctl --api "$api" counters > "$work/counters.txt" 2>/dev/null || true
  echo "appliance counters (non-zero):"
  awk 'NR == 1 || $NF != "0"' "$work/counters.txt"
  step "gloo-sparse: $workers DDP ranks, gloo's sparse all-reduce of the tables (plain DDP)"
  run_mode gloo-sparse "$port"
  # More pairs of the first budget's run and gloo-sparse, in turn, so that the load's drift hits both alike.
  pairs=()
  for r in $(seq 2 "$repeats"); do
    port=$(( port + 2 ))
    step "repeat $r of $repeats: netreduce (${hot_budgets%% *}), then gloo-sparse"
    run_mode netreduce "$port" "netreduce-r$r" "${first_args[@]}" --label "repeat $r" || exit 1
    run_mode gloo-sparse $(( port + 1 )) "gloo-sparse-r$r" || exit 1
    pairs+=("$work/netreduce-r$r.json:$work/gloo-sparse-r$r.json")
  done
  port=$(( port + 1 ))
  step "gloo-dense: $workers DDP ranks, the tables dense through DDP's gloo ring"
  run_mode gloo-dense $(( port + 1 ))
  step "reference: the same training in one process, gradients summed in fixed fp32 orders"
  "$NETREDUCE_PYTHON" "$trainer" --mode reference "${train_args[@]}" --out "$work/reference.json"
  step "comparison"
  mkdir -p "$results" "$(dirname "$plot")"
  cp "${nr_runs[@]}" "$work/gloo-sparse.json" "$work/gloo-dense.json" "$work/reference.json" "$work"/*-cpu.txt \
    "$results/"
  for pair in "${pairs[@]}"; do cp "${pair%%:*}" "${pair##*:}" "$results/"; done
  "$NETREDUCE_PYTHON" scripts/train/dlrm_compare.py "${nr_runs[0]}" "$work/gloo-sparse.json" "$work/gloo-dense.json" \
    "$work/reference.json" ${nr_runs[1]:+--sweep "${nr_runs[@]:1}"} ${pairs[0]:+--pairs "${pairs[@]}"} \
    ${warmup:+--warmup "$warmup"} --plot "$plot" \
    --rate "${rate:-unshaped}"
  exit $?
fi

nr_name=netreduce
if [ "$appliance_served" -eq 1 ]; then
  # Another job first, each trainer with a sidecar of its own (no agent yet): the daemon then has served a job, as a
  # deployed appliance has before a host's first training.
  step "netreduce-served: $workers DDP ranks through the appliance, a sidecar per trainer (the appliance's earlier job)"
  run_mode netreduce 29490 netreduce-served || exit 1
fi
if [ "$use_agent" -eq 1 ]; then
  step "sidecar agents: one per worker namespace (netreduce worker agent)"
  bed_start_agents "$prefix" "$netreduce" "$work" "$workers" train
  echo "agents listening: $work/agent-*.sock"
  agents_up=1
  nr_name=netreduce-first
fi

nr_what=""; [ "$use_agent" -eq 1 ] && nr_what=" (the agents' first sessions)"
step "netreduce: $workers DDP ranks, allreduce_hook through the appliance$nr_what"
run_mode netreduce 29500 "$nr_name" || {
  "$netreduce" ctl --api "$api" counters 2>/dev/null | awk 'NR == 1 || $NF != "0"' >&2 || true
  exit 1
}
if [ -n "$kill_step" ]; then
  "$NETREDUCE_PYTHON" - "$work/netreduce.json" <<'PY'
import json, sys
result = json.load(open(sys.argv[1]))
paths = result["paths"]
turns = [i for i in range(1, len(paths)) if paths[i] != paths[i - 1]]
recoveries = [rank["stats"]["recoveries"] for rank in result["ranks"]]
print(f"paths: {paths.count('appliance')} steps through the appliance, {paths.count('fallback')} with gloo "
      f"(path changed after steps {', '.join(str(i - 1) for i in turns) or 'never'}); recoveries per rank: "
      f"{recoveries}; fallback calls per rank: {[rank['stats']['fallback_calls'] for rank in result['ranks']]}")
PY
fi
"$netreduce" ctl --api "$api" counters > "$work/counters.txt" 2>/dev/null || true
echo "appliance counters (non-zero):"
awk 'NR == 1 || $NF != "0"' "$work/counters.txt"

step "gloo: $workers DDP ranks, DDP's own all-reduce, the same seeds"
run_mode gloo 29501

if [ "$use_agent" -eq 1 ]; then
  for n in $(seq 2 "$agent_sessions"); do
    name=netreduce; [ "$n" -gt 2 ] && name="netreduce-s$n"
    step "netreduce again: the agents' session $n (training $n on these hosts)"
    run_mode netreduce $(( 29500 + n )) "$name" || exit 1
  done
  for i in $(seq 0 $(( workers - 1 ))); do
    kill -0 "${agent_pids[$i]}" 2>/dev/null || { echo "train: agent $i exited" >&2; cat "$work/agent-$i.log" >&2; exit 1; }
  done
fi

step "reference: the same training in one process, gradients summed in fixed fp32 orders"
"$NETREDUCE_PYTHON" scripts/train/ddp_train.py --mode reference "${train_args[@]}" --out "$work/reference.json"

step "comparison"
mkdir -p "$results" "$(dirname "$plot")"
cp "$work/netreduce.json" "$work/gloo.json" "$work/reference.json" "$work"/*-cpu.txt "$results/"
# compare_with_gloo NAME PLOT [options]: a netreduce run's results against gloo's and the reference
compare_with_gloo() {
  local name="$1" to="$2"
  shift 2
  "$NETREDUCE_PYTHON" scripts/train/compare.py "$work/$name.json" "$work/gloo.json" "$work/reference.json" \
    ${warmup:+--warmup "$warmup"} --plot "$to" --rate "${rate:-unshaped}" "$@"
}
if [ "$appliance_served" -eq 1 ]; then
  cp "$work/netreduce-served.json" "$results/"
  echo "-- the appliance's earlier job (netreduce-served: a sidecar per trainer, the daemon new) against gloo:"
  compare_with_gloo netreduce-served "${plot%.png}-served.png" || exit 1
fi
if [ "$use_agent" -eq 1 ]; then
  cp "$work/netreduce-first.json" "$results/"
  echo "-- the agents' first sessions (netreduce-first) against gloo:"
  compare_with_gloo netreduce-first "${plot%.png}-first.png" || exit 1
  for n in $(seq 3 "$agent_sessions"); do
    cp "$work/netreduce-s$n.json" "$results/"
    echo "-- the agents' session $n (netreduce-s$n) against gloo:"
    compare_with_gloo "netreduce-s$n" "${plot%.png}-s$n.png" || exit 1
  done
  echo "-- the agents' second sessions (netreduce) against gloo:"
fi
compare_with_gloo netreduce "$plot" ${kill_step:+--appliance-lost}

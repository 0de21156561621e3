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
#   5. prints loss per step for both modes, time per step (median, p90; warm-up steps left out), bytes each
#      worker's eth0 sent per step, final test accuracies, and checks that the loss curves agree within the
#      tolerance fp32 reassociation allows (scripts/train/compare.py says how it is derived) and that the final
#      accuracies are equal; plots loss, the difference against the tolerance, accuracy and step time to a PNG,
#   6. tears everything down (on success, failure or interrupt).
#
# Exit status: 0 when both runs finished and agree, 1 otherwise, 2 on a usage error.
#
# usage: scripts/train.sh [--workers W] [--rate RATE|none] [--epochs E] [--steps N] [--batch B] [--lr LR]
#                         [--seed S] [--warmup N] [--plot FILE] [--results DIR] [--prefix P] [--no-build]
#                         [--timeout SECONDS] [--model cnn|mlp] [--hidden UNITS]
#   --model mlp: two hidden layers of UNITS (default 1536: 2.47 M parameters, 9.9 MB of gradient per step), where
#   the all-reduce is bandwidth-bound at 1 Gbit/s; the default cnn (287 KB of gradient) is latency-bound.
#   defaults: 4 workers, 1gbit links, 10 epochs (110 steps with 4 workers x 32 samples), batch 32 per rank,
#   lr 0.05 (momentum 0.9), seed 12, warm-up: the first epoch (left out of the step-time statistics),
#   plot /tmp/netreduce-train-digits.png, results (the three JSON files) in /tmp/netreduce-train,
#   prefix nrtrain (its own bed, beside any other).
# Needs root (network namespaces). On the shared 2-core development machine the default run takes about 25 s
# after the build (netreduce ranks ~9 s with start-up, gloo ranks ~4 s, reference ~4 s).
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

while [ $# -gt 0 ]; do
  case "$1" in
    -w|--workers) workers="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --epochs) epochs="$2"; steps=0; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --hidden) hidden="$2"; shift 2 ;;
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
    -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "train: unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "train: needs root (network namespaces, veth, tc)" >&2; exit 2; }
case "$workers" in ''|*[!0-9]*) echo "train: --workers must be a number" >&2; exit 2 ;; esac
[ "$workers" -ge 2 ] && [ "$workers" -le 64 ] || { echo "train: --workers must be 2..64" >&2; exit 2; }
[ "$rate" = none ] && rate=""

netreduce="$NETREDUCE_ROOT/aggregator-daemon/target/netreduce"
work="$(mktemp -d /tmp/netreduce-train.XXXXXX)"
api="unix:$work/api.sock"
daemon_pid=""
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
  if [ -n "$daemon_pid" ]; then
    kill "$daemon_pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$daemon_pid" 2>/dev/null || true
  fi
  bash scripts/testbed.sh down --prefix "$prefix" >/dev/null 2>&1 || true
  if [ "$status" -ne 0 ] && [ -d "$work" ]; then
    mkdir -p /tmp/netreduce-train-logs
    cp "$work"/*.log "$work"/*.json "$work"/*.yaml /tmp/netreduce-train-logs/ 2>/dev/null || true
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
"$NETREDUCE_PYTHON" -c 'import sklearn.datasets' >/dev/null 2>&1 || need+=(python3-sklearn)
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

train_args=(--world "$workers" --epochs "$epochs" --steps "$steps" --batch "$batch" --lr "$lr" --seed "$seed"
            --model "$model" --hidden "$hidden")

# CPU accounting, to say where a mode's time goes on a machine whose cores everything shares: the machine's busy
# clock ticks (user, nice, system, irq, softirq of /proc/stat) and the appliance's (fields 14-15 of its stat).
busy_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
daemon_ticks() { awk '{print $14 + $15}' "/proc/$daemon_pid/stat"; }

run_mode() { # mode port: W ranks of ddp_train.py, one per worker namespace; rank 0 writes $work/$mode.json
  local mode="$1" port="$2" failed=0 start_ns busy0 app0
  start_ns="$(date +%s%N)"
  busy0="$(busy_ticks)"; app0="$(daemon_ticks)"
  rank_pids=()
  for i in $(seq 0 $(( workers - 1 ))); do
    timeout --signal=TERM --kill-after=10 "$timeout" \
      ip netns exec "${prefix}-w$i" env PYTHONPATH="$NETREDUCE_ROOT/python" GLOO_SOCKET_IFNAME=eth0 TMPDIR="$work" \
        "$NETREDUCE_PYTHON" scripts/train/ddp_train.py --mode "$mode" --rank "$i" --master 10.77.0.1 \
        --port "$port" --dev eth0 "${train_args[@]}" --out "$work/$mode.json" \
        --api "$api" --netreduce "$netreduce" --ring-id "$ring_id" --window "$window" --msg-len "$msg_len" \
        --payload "$payload" \
        > "$work/$mode-rank$i.log" 2>&1 &
    rank_pids+=($!)
  done
  for i in "${!rank_pids[@]}"; do
    wait "${rank_pids[$i]}" || { echo "train: $mode rank $i failed (exit $?)" >&2; failed=1; }
  done
  rank_pids=()
  local wall_ms=$(( ($(date +%s%N) - start_ns) / 1000000 )) hz; hz="$(getconf CLK_TCK)"
  echo "$mode: $workers ranks done in $wall_ms ms (wall, with start-up); CPU busy $(( ($(busy_ticks) - busy0) * 1000 / hz )) ms of $(( wall_ms * $(nproc) )) available, of which the appliance $(( ($(daemon_ticks) - app0) * 1000 / hz )) ms" | tee "$work/$mode-cpu.txt"
  if [ "$failed" -ne 0 ] || [ ! -s "$work/$mode.json" ]; then
    for i in $(seq 0 $(( workers - 1 ))); do
      printf -- '-- %s rank %d\n' "$mode" "$i" >&2
      tail -n 25 "$work/$mode-rank$i.log" >&2
    done
    return 1
  fi
}

step "netreduce: $workers DDP ranks, allreduce_hook through the appliance"
run_mode netreduce 29500 || {
  "$netreduce" ctl --api "$api" counters 2>/dev/null | awk 'NR == 1 || $NF != "0"' >&2 || true
  exit 1
}
"$netreduce" ctl --api "$api" counters > "$work/counters.txt" 2>/dev/null || true
echo "appliance counters (non-zero):"
awk 'NR == 1 || $NF != "0"' "$work/counters.txt"

step "gloo: $workers DDP ranks, DDP's own all-reduce, the same seeds"
run_mode gloo 29501

step "reference: the same training in one process, gradients summed in fixed fp32 orders"
"$NETREDUCE_PYTHON" scripts/train/ddp_train.py --mode reference "${train_args[@]}" --out "$work/reference.json"

step "comparison"
mkdir -p "$results" "$(dirname "$plot")"
cp "$work/netreduce.json" "$work/gloo.json" "$work/reference.json" "$results/"
"$NETREDUCE_PYTHON" scripts/train/compare.py "$work/netreduce.json" "$work/gloo.json" "$work/reference.json" \
  ${warmup:+--warmup "$warmup"} --plot "$plot" --rate "${rate:-unshaped}"

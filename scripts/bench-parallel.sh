#!/usr/bin/env bash
# Parallel NetReduce (paper §3.4) on the namespace bed, against one flat NetReduce ring of all workers.
#
#   sudo scripts/bench-parallel.sh [--size BYTES] [--iterations N] [--prefix P]
#
# One bed of 4 worker namespaces and one daemon with three rings:
#   flat:     ring 1, the 4 workers 10.77.0.1..4 (one `netreduce worker allreduce` per namespace);
#   parallel: rings 2 and 3, both with members 10.77.0.1 and .2: hosts w0 and w1, each one process with 2 local
#             workers (`--local-workers 2`): local worker i of each host in ring 2 + i.
# Both move the same tensor per worker (4 workers x SIZE bytes); every result is checked bit for bit (flat: the
# rank-order sum; parallel: the two-level sum, hosts' local sums first). Prints each mode's median call time.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
source scripts/lib/appliance.sh
size=$(( 16 << 20 )); iterations=10; prefix="pr$(( $$ % 10000 ))"
while [ $# -gt 0 ]; do
  case "$1" in
    --size) size="$2"; shift 2 ;;
    --iterations) iterations="$2"; shift 2 ;;
    --prefix) prefix="$2"; shift 2 ;;
    *) echo "bench-parallel: unknown option $1" >&2; exit 2 ;;
  esac
done
netreduce="$NETREDUCE_ROOT/aggregator-daemon/target/netreduce"
work="$(mktemp -d)"
daemon_pid=""
trap 'bed_stop "$prefix" "$work"' EXIT
window=8; msg_len=16; payload=4096
bash scripts/testbed.sh up -w 4 --mtu 9000 --prefix "$prefix" >/dev/null
api="unix:$work/api.sock"
bed_ring_config "$work/netreduce.yaml" "$api" flat 4 1 "$window" "$msg_len" "$payload"
{
  printf '  - name: parallel\n    rings:\n'
  for id in 2 3; do
    printf '      - id: %d\n        elementType: fp32\n        window: %d\n        msgLen: %d\n' "$id" "$window" "$msg_len"
    printf '        payloadSize: %d\n        pmtu: %d\n        members:\n' "$payload" "$payload"
    printf '          - { rank: 0, ip: 10.77.0.1 }\n          - { rank: 1, ip: 10.77.0.2 }\n'
  done
} >> "$work/netreduce.yaml"
bed_start_daemon "$prefix" "$netreduce" "$work/netreduce.yaml" "$api" "$work" bench-parallel

common=(--dev eth0 --mode netreduce --type fp32 --size "$size" --iterations "$iterations" --window "$window"
        --msg-len "$msg_len" --pmtu "$payload" --timeout 30 --json)
run() { # name, then per process: "NAMESPACE ARGS..." as separate words after --
  local name="$1"; shift
  local pids=() i=0 status=0
  while [ $# -gt 0 ]; do
    local ns="$1" args="$2"; shift 2
    # shellcheck disable=SC2086
    timeout --kill-after=10 300 ip netns exec "$ns" "$netreduce" worker allreduce $args "${common[@]}" \
      > "$work/$name$i.log" 2>&1 &
    pids+=($!); i=$(( i + 1 ))
  done
  for p in "${pids[@]}"; do wait "$p" || status=1; done
  for j in $(seq 0 $(( i - 1 ))); do
    grep -E '^summary' "$work/$name$j.log" || { tail -n 20 "$work/$name$j.log"; status=1; }
  done
  grep -h '^{' "$work/$name"*.log > "$work/$name.json" || true
  return "$status"
}
echo "== flat: one ring of 4 workers (ring 1), $size bytes fp32, $iterations calls"
run flat "${prefix}-w0" "--rank 0 --world 4 --ring-id 1" "${prefix}-w1" "--rank 1 --world 4 --ring-id 1" \
  "${prefix}-w2" "--rank 2 --world 4 --ring-id 1" "${prefix}-w3" "--rank 3 --world 4 --ring-id 1"
echo "== parallel: 2 hosts x 2 local workers (rings 2 and 3), $size bytes fp32 per local worker, $iterations calls"
run parallel "${prefix}-w0" "--rank 0 --world 2 --ring-id 2 --local-workers 2 --port 18800" \
  "${prefix}-w1" "--rank 1 --world 2 --ring-id 2 --local-workers 2 --port 18800"
echo "== appliance counters (non-zero)"
"$netreduce" ctl --api "$api" counters 2>/dev/null | awk 'NR == 1 || $NF != "0"' | head -20
python3 - "$work/flat.json" "$work/parallel.json" <<'PY'
import json, statistics, sys
for path in sys.argv[1:]:
    rows = [json.loads(l) for l in open(path) if l.strip()]
    calls = [max(vals) for vals in zip(*[r["call_ms"] for r in rows])]  # a call ends when its slowest rank does
    name = rows[0]["mode"]
    line = f"{name}: median call {statistics.median(calls):.1f} ms over {len(calls)} calls (min {min(calls):.1f}, max {max(calls):.1f}); ok={all(r['ok'] for r in rows)}"
    if name == "parallel":
        ph = [p for r in rows for p in r["phases_ms"]]
        line += " ; median phases reduce-scatter %.1f / rings %.1f / all-gather %.1f ms" % tuple(statistics.median(p[k] for p in ph) for k in range(3))
    print(line)
PY

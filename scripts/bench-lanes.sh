#!/usr/bin/env bash
# Lanes scaling of the per-packet path (a benchmark, not a test; run it alone on a quiet machine): the JMH
# PacketPathBenchmark with 1 lane on 1 thread and with N lanes on N threads (each thread drives its own lane's agent,
# memory port and ring, as the kernel's fanout would feed it), alternated --repeats times per payload in one run.
# Every invocation checks its lane's counters (every frame aggregated, no drop), so a score is aggregation work only.
# Prints each run's Mpps and, per payload, the median and range of the N-lane / 1-lane ratio; writes a CSV.
#
# usage: scripts/bench-lanes.sh [--lanes 2] [--payloads "1024 4096"] [--repeats 3] [--out docs/bench/lanes.csv]
set -euo pipefail
source "$(dirname "$0")/env.sh"
cd "$NETREDUCE_ROOT"

lanes=2
payloads="1024 4096"
repeats=3
out="docs/bench/lanes.csv"
while [ $# -gt 0 ]; do
  case "$1" in
    --lanes) lanes="$2"; shift 2 ;;
    --payloads) payloads="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-lanes: unknown option $1" >&2; exit 2 ;;
  esac
done
work="$(mktemp -d /tmp/netreduce-bench-lanes.XXXXXX)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$(dirname "$out")"
echo "payload,repeat,lanes,threads,mpps" > "$out"
for payload in $payloads; do
  for repeat in $(seq 1 "$repeats"); do
    for n in 1 "$lanes"; do
      result="$work/result-$payload-$repeat-$n.csv"
      BENCH=PacketPathBenchmark scripts/bench-dataplane.sh -f 1 -wi 3 -i 5 -w 1s -r 1s -t "$n" \
        -p lanes="$n" -p payload="$payload" -rf csv -rff "$result" > "$work/log-$payload-$repeat-$n.txt" 2>&1 || {
          echo "bench-lanes: JMH failed (payload $payload, $n lanes):" >&2; tail -n 30 "$work/log-$payload-$repeat-$n.txt" >&2; exit 1; }
      mpps="$(awk -F, 'NR == 2 { gsub(/"/, "", $5); printf "%.3f", $5 / 1e6 }' "$result")"
      echo "$payload,$repeat,$n,$n,$mpps" >> "$out"
      echo "payload $payload repeat $repeat: $n lane(s) $mpps Mpps"
    done
  done
done
echo
echo "N-lane / 1-lane throughput, per repeat pair (median, min-max):"
/usr/bin/python3 - "$out" "$lanes" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
lanes = sys.argv[2]
for payload in sorted({r["payload"] for r in rows}, key=int):
    ratios = []
    for rep in sorted({r["repeat"] for r in rows if r["payload"] == payload}):
        one = [float(r["mpps"]) for r in rows if r["payload"] == payload and r["repeat"] == rep and r["lanes"] == "1"]
        many = [float(r["mpps"]) for r in rows if r["payload"] == payload and r["repeat"] == rep and r["lanes"] == lanes]
        if one and many:
            ratios.append(many[0] / one[0])
    one_all = [float(r["mpps"]) for r in rows if r["payload"] == payload and r["lanes"] == "1"]
    many_all = [float(r["mpps"]) for r in rows if r["payload"] == payload and r["lanes"] == lanes]
    print(f"payload {payload}: 1 lane {statistics.median(one_all):.2f} Mpps, {lanes} lanes "
          f"{statistics.median(many_all):.2f} Mpps; ratio median {statistics.median(ratios):.2f} "
          f"({min(ratios):.2f}-{max(ratios):.2f}, {len(ratios)} pairs)")
PY

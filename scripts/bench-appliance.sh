#!/usr/bin/env bash
# The appliance alone (a benchmark, not a test): `netreduce worker loadgen` plays W ranks' ring traffic from one
# namespace into the daemon over a veth pair (MTU 9000) and checks every result; no W endpoints share the cores.
# Reports, per W and payload: gradient Gbit/s and Mpps into the appliance, and CPU-seconds per GiB of gradient
# over the measured cycles (after --warmup-cycles): the daemon's (utime + stime from /proc/PID/stat), the loadgen's,
# and the whole machine's busy time (/proc/stat user+nice+system+irq+softirq).
# --modes "appliance reflect reflect-paced" alternates, --repeats times per W and payload, runs against the daemon with runs
# against the kernel floor: no daemon, a tc rule on the appliance's side of the veth sending every frame straight
# back (clsact ingress, u32 match-all, mirred egress redirect to the same device), the loadgen counting the frames
# back and checking their ICRCs (--expect reflect); reflect-paced at the rate the appliance run before it reached
# (--rate-gbps); appliance/KEY=VALUE[/KEY=VALUE] runs the daemon with those appliance.dataplane settings (e.g.
# appliance/batchSize=256); appliance-xdp (and appliance-xdp/KEY=VALUE...) runs the daemon with its port of type
# af_xdp (AF_XDP socket and XDP program, copy mode on the veth) instead of AF_PACKET. machine_minus_loadgen_user: the machine less the loadgen's busy-polling user time;
# appliance_plus_loadgen_stime: the two processes' CPU less the loadgen's user time (not the other users of the
# machine; includes the softirq work run in either's context). A summary (median, min-max) follows the CSV.
# --rings R plays R rings of W ranks at once, each on hosts of its own (so a daemon with lanes, e.g. mode
# appliance/lanes=2, can give each ring a lane); the CSV's last column says how many.
#
# usage: scripts/bench-appliance.sh [--workers "2 4 8"] [--payloads "1024 4096"] [--cycles 4] [--warmup-cycles 0]
#                                   [--modes appliance] [--repeats 1] [--rings 1] [--no-build]
#                                   [--out docs/bench/appliance.csv] [--prefix P]
# Needs root.
set -euo pipefail
source "$(dirname "$0")/env.sh"
cd "$NETREDUCE_ROOT"

workers_list="2 4 8"
payloads="1024 4096"
cycles=4
warmup=0
modes="appliance"
repeats=1
rings=1
build=1
out="docs/bench/appliance.csv"
prefix=nrap
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) workers_list="$2"; shift 2 ;;
    --payloads) payloads="$2"; shift 2 ;;
    --cycles) cycles="$2"; shift 2 ;;
    --warmup-cycles) warmup="$2"; shift 2 ;;
    --modes) modes="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    --rings) rings="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    --out) out="$2"; shift 2 ;;
    --prefix) prefix="$2"; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-appliance: unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "bench-appliance: needs root (namespaces)" >&2; exit 2; }
netreduce="$NETREDUCE_ROOT/aggregator-daemon/target/netreduce"
if [ "$build" -eq 1 ]; then
  bash scripts/setup.sh
  ./mvnw -B -ntp -q -DskipTests package
  bash scripts/aot-train.sh   # the JVMs' start-up caches for the jars just built (docs/operations.md)
fi
[ -x "$netreduce" ] || { echo "bench-appliance: $netreduce missing: build with ./mvnw -B -ntp -DskipTests package" >&2; exit 1; }

lg="${prefix}-lg"
ap="${prefix}-ap"
work="$(mktemp -d /tmp/netreduce-bench-appliance.XXXXXX)"
daemon_pid=""
cleanup() {
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null || true
  ip netns del "$lg" 2>/dev/null || true
  ip netns del "$ap" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
cleanup; work="$(mktemp -d /tmp/netreduce-bench-appliance.XXXXXX)"
ip netns add "$lg"
ip netns add "$ap"
ip link add "${prefix}lg0" type veth peer name "${prefix}ap0"
ip link set "${prefix}lg0" netns "$lg" name eth0 mtu 9000 up
ip link set "${prefix}ap0" netns "$ap" name eth0 mtu 9000 up
ip -n "$lg" link set lo up
ip -n "$ap" link set lo up

mkdir -p "$(dirname "$out")"
echo "world,payload,msg_len,window,mode,repeat,ok,rate_gbps,gradient_gbps_in,mpps_in,seconds,gradient_gib,appliance_cpu_s,appliance_stime_s,loadgen_utime_s,loadgen_stime_s,machine_busy_s,machine_user_s,machine_system_s,machine_softirq_s,machine_irq_s,appliance_cpu_s_per_gib,appliance_stime_s_per_gib,loadgen_cpu_s_per_gib,machine_cpu_s_per_gib,machine_kernel_s_per_gib,machine_minus_loadgen_user_s_per_gib,appliance_plus_loadgen_stime_s_per_gib,rings" > "$out"
for world in $workers_list; do
  for payload in $payloads; do
    msg_len=16   # a window of 8 such messages per rank stays within the appliance's receive ring
    # Offload off: per-frame forwarding against the kernel bridge, and the loadgen's sinks read wire frames.
    write_config() {   # $1: dataplane settings, "KEY: VALUE, ..." or empty; $2: port type
    {
      echo "appliance:"
      echo "  ports: [ { name: eth0, mtu: 9000, type: ${2:-af_packet}$([ "${2:-af_packet}" = af_packet ] && echo ", segmentation_offload: false") } ]"
      [ -n "$1" ] && echo "  dataplane: { $1 }"
      echo "  memoryBudget: 512MiB"
      echo "  api: { listen: \"unix:$work/api.sock\" }"
      echo "  metrics: { listen: \"127.0.0.1:0\" }"
      echo "jobs:"
      for k in $(seq 0 $(( rings - 1 ))); do   # ring k's rank r is global rank g = k * W + r (as the loadgen's)
      echo "  - name: load$k"
      echo "    rings:"
      echo "      - { id: $(( k + 1 )), elementType: int32, window: 8, msgLen: $msg_len, payloadSize: $payload, pmtu: $payload,"
      echo "          members: ["
      for r in $(seq 0 $(( world - 1 ))); do
        g=$(( k * world + r ))
        sep=","; [ "$r" -eq $(( world - 1 )) ] && sep=""
        printf '            { rank: %d, ip: 10.122.0.%d, mac: "02:7a:00:00:00:%02x", qpn: %d }%s\n' \
          "$r" $(( g + 1 )) $(( g + 1 )) $(( 0x100 + g )) "$sep"
      done
      echo "          ] }"
      done
    } > "$work/netreduce.yaml"
    }
    last_rate=""
    for repeat in $(seq "$repeats"); do
      for mode in $modes; do
        expect=sums
        cpu_pid=()
        rate=0
        case "$mode" in
          appliance|appliance/*|appliance-xdp|appliance-xdp/*)
            # appliance/KEY=VALUE[/KEY=VALUE...]: with those appliance.dataplane settings (an A/B in the same run);
            # appliance-xdp: the same on an af_xdp port
            settings=""
            port_type=af_packet
            case "$mode" in appliance-xdp*) port_type=af_xdp ;; esac
            if [ "$mode" != appliance ] && [ "$mode" != appliance-xdp ]; then
              settings="$(sed 's|^appliance[-a-z]*/||; s|=|: |g; s|/|, |g' <<< "$mode")"
            fi
            write_config "$settings" "$port_type"
            # On a loaded machine the daemon can fail to start (its dataplane not answering in time): try again.
            for attempt in 1 2 3; do
              ip netns exec "$ap" "$netreduce" daemon --config "$work/netreduce.yaml" > "$work/daemon.log" 2>&1 &
              daemon_pid=$!
              for _ in $(seq 100); do
                kill -0 "$daemon_pid" 2>/dev/null || break
                "$netreduce" ctl --api "unix:$work/api.sock" --timeout 1 rings >/dev/null 2>&1 && break
                sleep 0.2
              done
              kill -0 "$daemon_pid" 2>/dev/null && break
              echo "bench-appliance: daemon did not start (attempt $attempt): $(tail -n 1 "$work/daemon.log")" >&2
              wait "$daemon_pid" 2>/dev/null || true; daemon_pid=""
            done
            cpu_pid=(--cpu-pid "${daemon_pid:-0}") ;;
          reflect|reflect-paced)
            expect=reflect
            # reflect-paced: at the rate the last appliance run of this W and payload reached
            [ "$mode" = reflect-paced ] && rate="${last_rate:-0}"
            ip netns exec "$ap" tc qdisc add dev eth0 clsact
            ip netns exec "$ap" tc filter add dev eth0 ingress protocol all u32 match u32 0 0 \
              action mirred egress redirect dev eth0 ;;
          *) echo "bench-appliance: unknown mode $mode (appliance, appliance/KEY=VALUE..., appliance-xdp[/KEY=VALUE...], reflect, reflect-paced)" >&2; exit 2 ;;
        esac
        result="$(ip netns exec "$lg" "$netreduce" worker loadgen --dev eth0 --world "$world" --payload "$payload" \
          --msg-len "$msg_len" --window 8 --warmup-cycles "$warmup" --cycles "$cycles" --expect "$expect" --rings "$rings" \
          --rate-gbps "$rate" "${cpu_pid[@]}" | tail -n 1)" || true
        if [ -n "$daemon_pid" ]; then
          if ! grep -q "ok=true" <<< "$result"; then
            # Where the frames went: every non-zero drop counter of the appliance (ports' kernel rings included).
            echo "bench-appliance: $mode run failed; the appliance's non-zero drop counters:" >&2
            "$netreduce" ctl --api "unix:$work/api.sock" --timeout 2 counters 2>/dev/null \
              | grep -Ei "drop|full|truncated" | grep -Ev "[[:space:]]0$" >&2 || true
          fi
          kill "$daemon_pid" 2>/dev/null || true; wait "$daemon_pid" 2>/dev/null || true; daemon_pid=""
        fi
        ip netns exec "$ap" tc qdisc del dev eth0 clsact 2>/dev/null || true
        echo "$mode $repeat: $result"
        if [ "$mode" = appliance ]; then   # reflect-paced follows the plain (AF_PACKET) appliance's rate
          last_rate="$(sed -n 's/.*gradient_gbps_in=\([0-9.]*\).*/\1/p' <<< "$result")"
        fi
        "$NETREDUCE_PYTHON" - "$result" "$world" "$payload" "$msg_len" "$mode" "$repeat" "$rings" >> "$out" <<'PY'
import re, sys
line, world, payload, msg_len, mode, repeat, rings = sys.argv[1:]
f = dict(re.findall(r"(\w+)=(\S+)", line))
t = lambda k: int(f.get(k, 0)) / 100   # /proc ticks are USER_HZ = 100
gib = int(f.get("gradient_bytes", 0)) / 2**30
ok = f.get("ok", "false")
app = t("pid_utime_ticks") + t("pid_stime_ticks")
lg = t("self_utime_ticks") + t("self_stime_ticks")
busy = t("machine_busy_ticks")
per = lambda x: f"{x / gib:.3f}" if gib else "0"
kernel = t("machine_system_ticks") + t("machine_softirq_ticks") + t("machine_irq_ticks")
print(f"{world},{payload},{msg_len},8,{mode},{repeat},{ok},{f.get('rate_gbps', 0)},{f.get('gradient_gbps_in', 0)},"
      f"{f.get('mpps_in', 0)},{f.get('seconds', 0)},{gib:.3f},{app:.2f},{t('pid_stime_ticks'):.2f},"
      f"{t('self_utime_ticks'):.2f},{t('self_stime_ticks'):.2f},{busy:.2f},{t('machine_user_ticks'):.2f},"
      f"{t('machine_system_ticks'):.2f},{t('machine_softirq_ticks'):.2f},{t('machine_irq_ticks'):.2f},"
      f"{per(app)},{per(t('pid_stime_ticks'))},{per(lg)},{per(busy)},{per(kernel)},{per(busy - t('self_utime_ticks'))},"
      f"{per(app + t('self_stime_ticks'))},{rings}")
PY
      done
    done
  done
done
echo "bench-appliance: results in $out"
column -s, -t "$out"
"$NETREDUCE_PYTHON" - "$out" <<'PY'
import csv, statistics, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["ok"] == "true"]
keys = sorted({(int(r["world"]), int(r["payload"]), r["mode"]) for r in rows})
print(f"runs that failed (a lost frame; not in the summary): {sum(1 for r in csv.DictReader(open(sys.argv[1])) if r['ok'] != 'true')}")
cols = ["gradient_gbps_in", "appliance_cpu_s_per_gib", "appliance_stime_s_per_gib", "loadgen_cpu_s_per_gib",
        "machine_cpu_s_per_gib", "machine_kernel_s_per_gib", "machine_minus_loadgen_user_s_per_gib",
        "appliance_plus_loadgen_stime_s_per_gib"]
print("summary, median (min-max) over the runs that passed:")
print("W payload mode n " + " ".join(cols))
for w, p, m in keys:
    sel = [r for r in rows if (int(r["world"]), int(r["payload"]), r["mode"]) == (w, p, m)]
    cells = []
    for c in cols:
        v = [float(r[c]) for r in sel]
        cells.append(f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})")
    print(w, p, m, len(sel), " ".join(cells))
PY

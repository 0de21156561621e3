#!/usr/bin/env bash
# Interop scenarios with Linux soft-RoCE (rdma_rxe) in QEMU VMs on the namespace test bed (docs/interop.md):
#
#   pass-through  ib_write_bw, ib_send_bw, ib_read_bw (RC) between vm0 and vm1, first on the bare bridge, then
#                 with UDP 4791 redirected through the appliance: both runs complete with the same byte and
#                 iteration counts, and the switch's redirect counters show the traffic went through it;
#   aggregation   3 VMs all-reduce a tensor through the appliance with the pyverbs client (NetReduce, then the
#                 plain ring over fresh QPs): results bit-exact on every rank, and rxe's hw_counters show no
#                 sequence errors, retries or duplicates, and the kernel logged no bad ICRC;
#   loss          the same NetReduce all-reduce with 1% of ring packets dropped at the appliance: rxe
#                 retransmits (its counters say so), results bit-exact.
#   systemd       (not in the default set) the appliance is a fourth VM whose PID 1 is systemd, the daemon
#                 installed there with the shipped unit and environment file: it starts, ctl answers on the unit's
#                 socket (nothing on stderr), the rxe VMs' ring sums exactly, systemd-analyze security gives the
#                 documented score, a kill -9 is followed by systemd's restart and an exact next job, and
#                 systemctl reload applies a changed ring (window 4 -> 8, same process) that then sums exactly;
#                 then the same with an af_xdp port and the shipped drop-in systemd/af-xdp.conf (PASS/FAIL as
#                 systemd-xdp; --only systemd-xdp runs that part alone). Builds nothing: needs aggregator-daemon/target (launcher, jar) and the host's JDK.
#   systemd-agent (not in the default set) in the same systemd VM, the sidecar agent's shipped unit
#                 (systemd/netreduce-agent@.service, instance lo, User=trainer in a drop-in as docs/operations.md
#                 says): it starts and binds its socket; it runs as trainer with CAP_NET_RAW only, NoNewPrivs and
#                 seccomp, its socket 0600 in a 0700 directory; two sessions of it, as trainer, sum a ring of two
#                 ranks exactly (scripts/interop/agent_ring.py); systemd-analyze security gives the documented score;
#                 after a kill -9 systemd starts it again and the ring is exact again. Needs worker/target too.
#
# usage: scripts/interop/run.sh [--elements N] [--drop P] [--iterations K] [--prefix P]
#                               [--logs DIR] [--only pass-through,aggregation,loss,session] [--keep]
#                               [--type int32|fp32] [--window N] [--msg-len L] [--payload B]
#                               [--inet-tag TAG] [--result-tag TAG] [--keep-drop P] [--extra-packages "PKG ..."]
#   --type, --window, --msg-len, --payload, --inet-tag, --result-tag
#                     the ring the daemon aggregates and the pyverbs client uses (int32, 4, 4, 1024, NRED, NRES);
#                     a tag is 4 printable ASCII characters; --result-tag equal to --inet-tag leaves results
#                     unmarked (for a client that expects its own tag back)
#   --keep            leave the VMs, the test bed and a daemon with the ring installed running at the end, to try
#                     another client by hand (docs/interop.md says how); tear down with --down
#   --keep-drop P     the kept daemon drops a fraction P of RoCE frames (default 0: no loss)
#   --extra-packages  Debian packages added to the VM image (e.g. your client's dependencies)
#   --down            only remove what a --keep run left (VMs, daemon, namespaces) and exit
# Runs as root (no sudo needed inside); the VM image is built from the packages in build-image.sh.
# The appliance is the netreduce daemon (aggregator-daemon/target/netreduce; build it first with
# ./mvnw -B -ntp -q package -DskipTests), run with a generated config; the loss scenario's drops come from
# appliance.dataplane.dropProbability. Each all-reduce runs K times (default 3) over new QPs each time, so the
# appliance also sees the ring restart.
# Prints PASS/FAIL per scenario and the times; exit status 0 when all selected scenarios pass.
# Always removes the VMs, taps, appliance process and namespaces it made (unless --keep).
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$here/../.." && pwd)"
# shellcheck source=../env.sh
source "$repo_root/scripts/env.sh"
elements=65536
drop=0.01
prefix="nri"
logs=""
only="pass-through,aggregation,loss"
keep=0
msg_len=4
window=4
ring_id=1
iterations=3
dtype=int32
payload=1024
inet_tag=NRED
result_tag=NRES
keep_drop=0
extra_packages=""
down_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --iterations) iterations="$2"; shift 2 ;;
    --elements) elements="$2"; shift 2 ;;
    --drop) drop="$2"; shift 2 ;;
    --prefix) prefix="$2"; shift 2 ;;
    --logs) logs="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    --type) dtype="$2"; shift 2 ;;
    --window) window="$2"; shift 2 ;;
    --msg-len) msg_len="$2"; shift 2 ;;
    --payload) payload="$2"; shift 2 ;;
    --inet-tag) inet_tag="$2"; shift 2 ;;
    --result-tag) result_tag="$2"; shift 2 ;;
    --keep-drop) keep_drop="$2"; shift 2 ;;
    --extra-packages) extra_packages="$2"; shift 2 ;;
    --down) down_only=1; shift ;;
    *) echo "run: unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "run: needs root (namespaces, taps): run it as root or with sudo" >&2; exit 1; }
case "$dtype" in int32|fp32) ;; *) echo "run: --type must be int32 or fp32 (what the pyverbs client sums exactly)" >&2; exit 2 ;; esac
case "$window" in 1|2|4|8|16|32|64|128) ;; *) echo "run: --window must be a power of two in 1..128" >&2; exit 2 ;; esac
[[ "$msg_len" =~ ^[0-9]+$ ]] && [ "$msg_len" -ge 1 ] && [ "$msg_len" -le 255 ] \
  || { echo "run: --msg-len must be 1..255" >&2; exit 2; }
# rxe's path MTU on the VMs' 1500-byte links is 1024: a packet's payload is at most that.
case "$payload" in 256|512|1024) ;; *) echo "run: --payload must be 256, 512 or 1024 (rxe's path MTU here is 1024)" >&2; exit 2 ;; esac
for tag in "$inet_tag" "$result_tag"; do
  # printable ASCII other than space, as the config wants, less the quotes and backslash this script quotes with
  [[ "$tag" =~ ^[!-~]{4}$ ]] && [[ "$tag" != *[\'\"\\]* ]] \
    || { echo "run: a tag is 4 printable ASCII characters, no space, quote or backslash (got '$tag')" >&2; exit 2; }
done
[[ "$keep_drop" =~ ^(0|0?\.[0-9]+)$ ]] || { echo "run: --keep-drop must be a probability in [0, 1)" >&2; exit 2; }
# What a --keep run leaves for --down: the kept daemon's pid and its log directory.
keep_state="/run/netreduce-interop/${prefix}.keep"
if [ "$down_only" = 0 ]; then
  logs="${logs:-/tmp/netreduce-interop-$(date +%Y%m%d-%H%M%S)}"
  mkdir -p "$logs"
fi
V="$here/vm.sh"
# ctl inside the appliance namespace talks to the daemon's TCP API with the token it created.
export NETREDUCE_API=127.0.0.1:9740 NETREDUCE_API_TOKEN_FILE="$logs/api.token"
app_ns="${prefix}-app"
sw_ns="${prefix}-sw"
app_ctl="/run/netreduce-interop/${prefix}/app/ctl"
jar="$repo_root/aggregator-daemon/target/netreduce.jar"
# The launcher, not `java -jar`: it adds the JVM flags (netreduce.jvm.flags: the Vector API module among them;
# without it the dataplane thread dies with NoClassDefFoundError at the first completed aggregation).
launcher="$repo_root/aggregator-daemon/target/netreduce"
peers="10.77.0.101,10.77.0.102,10.77.0.103"
app_pid=""
t_start=$(date +%s.%N)
summary=()
failed=0

now() { date +%s.%N; }
since() { printf '%.1f' "$(echo "$(now) - $1" | bc)"; }
note() { echo "run: $*" >&2; }
record() { # status scenario detail
  summary+=("$(printf '%-4s %-13s %s' "$1" "$2" "$3")")
  [ "$1" = PASS ] || failed=1
  echo "$1 $2 $3"
}
wanted() { [[ ",$only," == *",$1,"* ]]; }

cleanup() {
  if [ "$keep" = 1 ] && [ "$down_only" = 0 ]; then
    return
  fi
  stop_appliance
  if [ "$keep" = 0 ]; then
    "$V" down --prefix "$prefix" >/dev/null 2>&1 || true
    bash "$repo_root/scripts/testbed.sh" down --prefix "$prefix" >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the appliance --------------------------------------------------------------------------------------------

daemon_config() { # drop -> config file
  local file="$logs/netreduce-$1.yaml"
  {
    echo "appliance:"
    echo "  ports:"
    echo "    - name: eth0"
    # Verified with per-packet results (the rxe peers' virtio NICs were not tried with offload batches).
    echo "      segmentation_offload: false"
    echo "  dataplane:"
    echo "    idleStrategy: sleep"
    [ "$1" != 0 ] && echo "    dropProbability: $1"
    echo "  memoryBudget: 64MiB"
    echo "  api:"
    echo "    listen: 127.0.0.1:9740"
    echo "    tokenFile: $logs/api.token"
    echo "  metrics:"
    echo "    listen: 127.0.0.1:9741"
    echo "jobs:"
    echo "  - name: interop"
    echo "    rings:"
    echo "      - id: $ring_id"
    echo "        elementType: $dtype"
    echo "        window: $window"
    echo "        msgLen: $msg_len"
    echo "        payloadSize: $payload"
    echo "        pmtu: $payload"
    echo "        inetTag: \"$inet_tag\""
    echo "        resultTag: \"$result_tag\""
    echo "        members:"
    local r=0 ip
    for ip in ${peers//,/ }; do
      echo "          - { rank: $r, ip: $ip }"
      r=$(( r + 1 ))
    done
  } > "$file"
  echo "$file"
}

start_appliance() { # drop -> 0 when up
  local drop="$1" log="$logs/appliance-$(date +%s%N).log"
  [ -f "$jar" ] && [ -x "$launcher" ] || { note "no $jar: build it (./mvnw -B -ntp -q package -DskipTests)"; return 1; }
  local cfg; cfg="$(daemon_config "$drop")"
  ip netns exec "$app_ns" "$launcher" daemon --config "$cfg" > "$log" 2>&1 &
  app_pid=$!
  local ok=0
  for _ in $(seq 150); do
    kill -0 "$app_pid" 2>/dev/null || break
    if ip netns exec "$app_ns" bash -c 'exec 3<>/dev/tcp/127.0.0.1/9740' 2>/dev/null; then ok=1; break; fi
    sleep 0.2
  done
  [ "$ok" = 1 ] || { note "daemon did not start (log $log):"; tail -20 "$log" >&2; app_pid=""; return 1; }
  echo "$log" > "$logs/appliance.current"
  return 0
}

stop_appliance() {
  [ -n "$app_pid" ] || return 0
  ip netns exec "$app_ns" curl -s -m 3 "http://127.0.0.1:9741/metrics" > "$logs/metrics-$(date +%s%N).txt" 2>/dev/null || true
  ip netns exec "$app_ns" "$launcher" ctl counters > "$logs/counters-$(date +%s%N).txt" 2>/dev/null || true
  kill "$app_pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$app_pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$app_pid" 2>/dev/null || true
  wait "$app_pid" 2>/dev/null || true
  app_pid=""
}

# --- helpers in the VMs ---------------------------------------------------------------------------------------

redirected_packets() { # total packets the switch's UDP 4791 redirect sent to the appliance port
  local total=0 n i
  for i in 0 1 2; do
    n="$(ip netns exec "$sw_ns" tc -s filter show dev "sw-vm$i" ingress 2>/dev/null \
         | awk '/Sent [0-9]+ bytes [0-9]+ pkt/ {s += $4} END {print s + 0}')"
    total=$(( total + n ))
  done
  echo "$total"
}

perftest_pair() { # tool tag -> prints "bytes iterations" of the client, rc 0 when both sides succeed
  local tool="$1" tag="$2" opts="-d rxe0 -x 1 -F --report_gbits -s 65536 -n 100" job rc=0
  # timeout inside the VM: vm.sh's --timeout only stops waiting, and a hung perftest would keep its TCP port
  # (the next tool could not listen) and the VM's only CPU.
  job="$("$V" start --prefix "$prefix" 1 "timeout 120 $tool $opts")"
  sleep 1
  "$V" exec --prefix "$prefix" --timeout 180 0 "timeout 120 $tool $opts 10.77.0.102" > "$logs/$tag-$tool-client.log" 2>&1 || rc=1
  "$V" wait --prefix "$prefix" --timeout 60 1 "$job" > "$logs/$tag-$tool-server.log" 2>&1 || rc=1
  awk '/^ *65536 +[0-9]+/ {print $1, $2; exit}' "$logs/$tag-$tool-client.log"
  return "$rc"
}

counters() { # vm -> "name value" lines of rxe's hw_counters
  "$V" exec --prefix "$prefix" "$1" 'cd /sys/class/infiniband/rxe0/ports/1/hw_counters && grep -H . * | tr : " "'
}

counter_delta() { # before after name
  local a b
  a="$(awk -v n="$3" '$1 == n {print $2}' <<< "$1")"
  b="$(awk -v n="$3" '$1 == n {print $2}' <<< "$2")"
  echo $(( ${b:-0} - ${a:-0} ))
}

ERROR_COUNTERS="rcvd_seq_err out_of_seq_request duplicate_request completer_retry_err retry_exceeded_err rnr_nak_retry_err rcvd_rnr_err send_rnr_err send_err"

allreduce() { # tag algo qp-timeout -> rc 0 when every rank's result is exact
  local tag="$1" algo="$2" qp_timeout="$3" jobs=() rc=0 i
  local cmd="cd /nr/src/python && timeout 240 python3 -m netreduce_verbs --peers $peers --algo $algo --dtype $dtype --elements $elements --msg-len $msg_len --window $window --ring-id $ring_id --payload $payload --inet-tag '$inet_tag' --result-tag '$result_tag' --iterations $iterations --qp-timeout $qp_timeout --stall 60"
  for i in 1 2; do jobs[i]="$("$V" start --prefix "$prefix" "$i" "$cmd --rank $i")"; done
  "$V" exec --prefix "$prefix" --timeout 300 0 "$cmd --rank 0" > "$logs/$tag-rank0.log" 2>&1 || rc=1
  for i in 1 2; do
    "$V" wait --prefix "$prefix" --timeout 120 "$i" "${jobs[i]}" > "$logs/$tag-rank$i.log" 2>&1 || rc=1
  done
  for i in 0 1 2; do
    grep -h '^{' "$logs/$tag-rank$i.log" || { note "$tag rank $i:"; tail -5 "$logs/$tag-rank$i.log" >&2; }
  done > "$logs/$tag.jsonl"
  grep -q '"ok": false' "$logs/$tag.jsonl" && rc=1
  local runs=$(( 3 * iterations )); [ "$algo" = both ] && runs=$(( 2 * runs ))
  [ "$(grep -c '"ok": true' "$logs/$tag.jsonl")" -ge "$runs" ] || rc=1
  return "$rc"
}

seconds_of() { # jsonl algo -> slowest rank's seconds
  grep "\"algo\": \"$2\"" "$1" | sed -E 's/.*"seconds": ([0-9.]+).*/\1/' | sort -n | tail -1
}

scenario_allreduce() { # name drop
  local name="$1" drop="$2" t0 before=() after=() i bad="" retrans=0 d c detail algo
  t0=$(now)
  start_appliance "$drop" || { record FAIL "$name" "appliance did not start${drop:+ (drop $drop)}: see $logs"; return; }
  "$V" redirect on --prefix "$prefix" >/dev/null
  for i in 0 1 2; do "$V" exec --prefix "$prefix" "$i" 'dmesg -C' >/dev/null; before[i]="$(counters "$i")"; done
  # Without loss nothing may be retransmitted, but a NetReduce packet is acked only once every rank's packet
  # of its position arrived: the ACK timeout must outlast the rank skew, which for three TCG VMs on a busy
  # two-core host exceeded 268 ms (timeout 16) at iteration starts. 18 = 1.07 s. With loss, recovery waits for
  # timeouts, so there the shorter one keeps the run short.
  local algo=both qp_timeout=18
  [ "$drop" != 0 ] && algo=netreduce qp_timeout=16
  allreduce "$name" "$algo" "$qp_timeout"
  local rc=$?
  for i in 0 1 2; do
    after[i]="$(counters "$i")"
    for c in $ERROR_COUNTERS; do
      d="$(counter_delta "${before[i]}" "${after[i]}" "$c")"
      [ "$d" -gt 0 ] && bad+=" vm$i:$c+$d"
      case "$c" in rcvd_seq_err|out_of_seq_request|completer_retry_err|duplicate_request) retrans=$(( retrans + d )) ;; esac
    done
    if "$V" exec --prefix "$prefix" "$i" 'dmesg | grep -i icrc' > "$logs/$name-vm$i-icrc.log" 2>&1; then
      bad+=" vm$i:bad-ICRC-logged"
    fi
    printf '%s\n' "${after[i]}" > "$logs/$name-vm$i-counters-after.txt"
  done
  stop_appliance
  cat "$(cat "$logs/appliance.current" 2>/dev/null || echo /dev/null)" > "$logs/$name-appliance.log" 2>/dev/null || true
  detail="3 ranks, $(( elements * 4 )) B $dtype, x$iterations over new QPs, slowest netreduce $(seconds_of "$logs/$name.jsonl" netreduce) s"
  [ "$algo" = both ] && detail+=", ring $(seconds_of "$logs/$name.jsonl" ring) s"
  if [ "$rc" != 0 ]; then
    record FAIL "$name" "$detail: results not exact or a rank failed (logs $logs/$name-rank*.log)$bad ($(since "$t0") s)"
  elif [ "$drop" = 0 ] && [ -n "$bad" ]; then
    record FAIL "$name" "$detail: exact, but rxe counters moved:$bad ($(since "$t0") s)"
  elif [ "$drop" != 0 ] && [ "$retrans" = 0 ]; then
    record FAIL "$name" "$detail: exact, but no retransmission seen (was anything dropped?) ($(since "$t0") s)"
  elif [ "$drop" != 0 ]; then
    record PASS "$name" "$detail: exact with drop $drop; rxe recovered:$bad ($(since "$t0") s)"
  else
    record PASS "$name" "$detail: exact; rxe error/retry counters unchanged, no ICRC complaint ($(since "$t0") s)"
  fi
}

# --- the systemd scenario -------------------------------------------------------------------------------------

app() { # [timeout] script -> runs it in the appliance VM (as root), prints its output
  local t=180
  [ $# = 2 ] && { t="$1"; shift; }
  "$V" exec --prefix "$prefix" --timeout "$t" app "$1"
}

# The systemd VM's configuration: the ring as daemon_config's, the API on the unit's Unix socket (the default),
# metrics on localhost (the unit's IP allow-list), the port eth0 of the given type.
systemd_config() { # port-type window -> file in the VM's command directory (/nr/ctl/NAME in the VM)
  local file="$app_ctl/netreduce-$1-w$2.yaml" r=0 ip
  {
    echo "appliance:"
    echo "  ports:"
    echo "    - name: eth0"
    echo "      type: $1"
    [ "$1" = af_packet ] && echo "      segmentation_offload: false"
    echo "  dataplane:"
    echo "    idleStrategy: sleep"
    echo "  memoryBudget: 64MiB"
    echo "jobs:"
    echo "  - name: interop"
    echo "    rings:"
    echo "      - id: $ring_id"
    echo "        elementType: $dtype"
    echo "        window: $2"
    echo "        msgLen: $msg_len"
    echo "        payloadSize: $payload"
    echo "        pmtu: $payload"
    echo "        inetTag: \"$inet_tag\""
    echo "        resultTag: \"$result_tag\""
    echo "        members:"
    for ip in ${peers//,/ }; do
      echo "          - { rank: $r, ip: $ip }"
      r=$(( r + 1 ))
    done
  } > "$file"
  cp "$file" "$logs/"
  echo "/nr/ctl/${file##*/}"
}

# In the VM: wait until the unit is active and ctl answers on its socket; prints the main PID.
# Under TCG the JVM takes about two minutes to start (a minute of it the dataplane's warm-up), and every ctl call
# is a JVM start too. A start that fails is restarted by the unit (Restart=on-failure) rather than left failed:
# hence the deadline.
SYSTEMD_WAIT='end=$((SECONDS + 840))
while [ $SECONDS -lt $end ]; do
  if [ "$(systemctl is-active netreduce)" = active ] && /opt/netreduce/bin/netreduce ctl rings >/dev/null 2>&1; then
    systemctl show -p MainPID --value netreduce; exit 0
  fi
  [ "$(systemctl is-active netreduce)" = failed ] && break
  sleep 1
done
systemctl status --no-pager netreduce; journalctl -u netreduce --no-pager | tail -40; exit 1'

systemd_phase() { # name port-type -> records PASS/FAIL for name
  local name="$1" type="$2" t0 cfg cfg8 out pid pid2 score doc_score detail="" ok=1 window0="$window"
  t0=$(now)
  cfg="$(systemd_config "$type" 4)"
  cfg8="$(systemd_config "$type" 8)"
  # Install: the launcher and jar where the unit expects them, the shipped unit and environment file unchanged
  # (for af_xdp the shipped drop-in too), the configuration.
  # The one thing not shipped: under TCG on a busy host the dataplane's warm-up (a few hundred ms on real cores)
  # took 67 s with the VM alone and over the daemon's 120 s limit with the rxe VMs and other work beside it, so a
  # harness-only drop-in gives it 15 minutes (JDK_JAVA_OPTIONS: the java launcher's own variable, which the shipped
  # environment file does not set, so the file stays as shipped).
  local dropin="rm -rf /etc/systemd/system/netreduce.service.d
    mkdir -p /etc/systemd/system/netreduce.service.d
    printf '[Service]\\nEnvironment=JDK_JAVA_OPTIONS=-Dnetreduce.startTimeoutMs=900000\\n' > /etc/systemd/system/netreduce.service.d/tcg.conf"
  [ "$type" = af_xdp ] && dropin+="
    install -D -m 0644 /nr/src/systemd/af-xdp.conf /etc/systemd/system/netreduce.service.d/af-xdp.conf
    ethtool -L eth0 combined 1 2>/dev/null || true"
  if ! app 300 "set -e
    systemctl stop netreduce 2>/dev/null || true
    install -D -m 0755 /nr/src/aggregator-daemon/target/netreduce /opt/netreduce/bin/netreduce
    install -m 0644 /nr/src/aggregator-daemon/target/netreduce.jar /opt/netreduce/bin/netreduce.jar
    install -D -m 0644 /nr/src/systemd/netreduce.env /etc/netreduce/netreduce.env
    install -m 0644 /nr/src/systemd/netreduce.service /etc/systemd/system/netreduce.service
    $dropin
    install -m 0644 $cfg /etc/netreduce/netreduce.yaml
    systemctl daemon-reload
    systemctl reset-failed netreduce 2>/dev/null || true
    systemctl start netreduce" > "$logs/$name-install.log" 2>&1; then
    record FAIL "$name" "install or start failed (log $logs/$name-install.log)"; return
  fi
  # 1. It starts and ctl answers on the unit's socket, with nothing on stderr.
  if ! pid="$(app 900 "$SYSTEMD_WAIT" 2> "$logs/$name-start.log")"; then
    echo "$pid" >> "$logs/$name-start.log"
    record FAIL "$name" "the unit did not come up with ctl answering (log $logs/$name-start.log)"; return
  fi
  pid="$(tail -1 <<< "$pid")"
  out="$(app "/opt/netreduce/bin/netreduce ctl rings 2>/tmp/ctl.err; echo rc=\$?; echo stderr-bytes=\$(wc -c < /tmp/ctl.err); cat /tmp/ctl.err")"
  echo "$out" > "$logs/$name-ctl.log"
  grep -q '^rc=0$' <<< "$out" && grep -q '^stderr-bytes=0$' <<< "$out" \
    || { ok=0; detail+=" ctl-rings-failed-or-wrote-stderr"; }
  detail+=" up in $(since "$t0") s (pid $pid);"
  # 2. The ring from the rxe VMs sums exactly.
  "$V" redirect on --prefix "$prefix" >/dev/null
  if allreduce "$name-sum" netreduce 18; then detail+=" sum exact;"; else ok=0; detail+=" sum-NOT-exact;"; fi
  # 3. systemd-analyze security: the score docs/operations.md states for the unit.
  score="$(app "systemd-analyze security --no-pager netreduce.service" 2>&1 | tee "$logs/$name-security.log" \
           | sed -n 's/.*Overall exposure level for netreduce.service: \([0-9.]*\).*/\1/p')"
  local phrase='`systemd-analyze security` rates the unit'
  [ "$type" = af_xdp ] && phrase='with the drop-in it rates'
  doc_score="$(grep -o "$phrase \*\*[0-9.]*\*\*" "$repo_root/docs/operations.md" | head -1 | grep -o '[0-9][0-9.]*')"
  [ -n "$score" ] && [ "$score" = "$doc_score" ] || { ok=0; detail+=" security-$score-not-documented-$doc_score"; }
  detail+=" security $score;"
  # 4. kill -9: systemd restarts it (Restart=on-failure) and the next job works without an operator. With af_xdp
  # only when asked (SYSTEMD_XDP_KILL=1): the restart is the unit's, shown with af_packet, and under TCG each start
  # costs minutes of warm-up.
  if [ "$type" = af_xdp ] && [ "${SYSTEMD_XDP_KILL:-0}" != 1 ]; then
    pid2="$pid"; detail+=" kill -9 not tried (SYSTEMD_XDP_KILL=1 does);"
  else
  out="$(app 900 "kill -9 $pid; sleep 1
    $SYSTEMD_WAIT" 2>&1)"
  pid2="$(tail -1 <<< "$out")"
  echo "$out" > "$logs/$name-kill.log"
  if [[ "$pid2" =~ ^[0-9]+$ ]] && [ "$pid2" != "$pid" ] && [ "$pid2" != 0 ]; then
    detail+=" kill -9 -> restarted (pid $pid2, NRestarts $(app "systemctl show -p NRestarts --value netreduce"));"
    if allreduce "$name-after-kill" netreduce 18; then detail+=" next sum exact;"; else ok=0; detail+=" sum-after-restart-NOT-exact;"; fi
  else
    ok=0; detail+=" not-restarted-after-kill-9 (log $logs/$name-kill.log);"
  fi
  fi
  # 5. systemctl reload applies a changed configuration (window 4 -> 8) in the same process.
  out="$(app 300 "install -m 0644 $cfg8 /etc/netreduce/netreduce.yaml && systemctl reload netreduce
    for i in \$(seq 120); do
      /opt/netreduce/bin/netreduce ctl --json rings | tr -d ' \n' | grep -q '\"window\":8' && break; sleep 1
    done
    /opt/netreduce/bin/netreduce ctl rings; systemctl show -p MainPID --value netreduce
    journalctl -u netreduce --no-pager | grep -i reload | tail -3" 2>&1)"
  echo "$out" > "$logs/$name-reload.log"
  if grep -qx "$pid2" <<< "$out" && app "/opt/netreduce/bin/netreduce ctl --json rings | tr -d ' \n' | grep -q '\"window\":8'" >/dev/null 2>&1; then
    window=8
    if allreduce "$name-after-reload" netreduce 18; then detail+=" reload -> window 8 in pid $pid2, sum exact;"
    else ok=0; detail+=" sum-after-reload-NOT-exact;"; fi
    window="$window0"
  else
    ok=0; detail+=" reload-not-applied (log $logs/$name-reload.log);"
  fi
  app "/opt/netreduce/bin/netreduce ctl counters" > "$logs/$name-counters.txt" 2>&1 || true
  app "journalctl -u netreduce --no-pager" > "$logs/$name-journal.log" 2>&1 || true
  app "systemctl stop netreduce" >/dev/null 2>&1 || true
  "$V" redirect off --prefix "$prefix" >/dev/null
  if [ "$ok" = 1 ]; then record PASS "$name" "${detail% ;} ($(since "$t0") s)"
  else record FAIL "$name" "${detail% ;} ($(since "$t0") s; logs $logs/$name-*)"; fi
}

# --- the systemd-agent scenario ---------------------------------------------------------------------------------
# The sidecar agent's shipped unit (systemd/netreduce-agent@.service) under the systemd VM's real systemd, as
# docs/operations.md tells a trainer host to run it: the launcher and the workers' jar in /opt/netreduce/bin, the unit
# unchanged, the trainers' account named in a drop-in (User=trainer), instance lo. Then, as that account, two sessions
# of the agent in a ring of two ranks (scripts/interop/agent_ring.py: no appliance, no PyTorch), every call exact;
# the process's user, capabilities, NoNewPrivs and seccomp; the socket's owner and mode; systemd-analyze security's
# score against the one docs/operations.md states; a kill -9 followed by systemd's restart and an exact ring again,
# whose ranks find the unit's socket by themselves (no --agent), as a Session does.

AGENT_UNIT=netreduce-agent@lo
AGENT_SOCKET=/run/netreduce-agent-lo/agent.sock
# Up: active and its socket bound (after its start warm-up, at most 20 s of it: under TCG the JVM's start and the
# warm-up take minutes, and the unit restarts a failed start).
AGENT_WAIT="end=\$((SECONDS + 840))
while [ \$SECONDS -lt \$end ]; do
  if [ \"\$(systemctl is-active $AGENT_UNIT)\" = active ] && [ -S $AGENT_SOCKET ]; then
    systemctl show -p MainPID --value $AGENT_UNIT; exit 0
  fi
  [ \"\$(systemctl is-active $AGENT_UNIT)\" = failed ] && break
  sleep 1
done
systemctl status --no-pager $AGENT_UNIT; journalctl -u $AGENT_UNIT --no-pager | tail -40; exit 1"
AGENT_RING="runuser -u trainer -- env TMPDIR=/tmp timeout 900 python3 /nr/src/scripts/interop/agent_ring.py \
  --agent $AGENT_SOCKET --calls 3 --elements 16384 --timeout 600"
# The same without --agent: the ranks must find the unit's socket as a Session does (netreduce.sidecar.host_agent).
AGENT_RING_FOUND="runuser -u trainer -- env TMPDIR=/tmp timeout 900 python3 /nr/src/scripts/interop/agent_ring.py \
  --calls 3 --elements 16384 --timeout 600"

systemd_agent_phase() { # -> records PASS/FAIL for systemd-agent
  local name=systemd-agent t0 out pid pid2 score doc_score detail="" ok=1
  t0=$(now)
  if ! app 300 "set -e
    systemctl stop $AGENT_UNIT 2>/dev/null || true
    install -D -m 0755 /nr/src/aggregator-daemon/target/netreduce /opt/netreduce/bin/netreduce
    install -m 0644 /nr/src/worker/target/netreduce-worker.jar /opt/netreduce/bin/netreduce-worker.jar
    install -m 0644 /nr/src/systemd/netreduce-agent@.service /etc/systemd/system/netreduce-agent@.service
    id trainer >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin trainer
    mkdir -p /etc/systemd/system/$AGENT_UNIT.service.d
    printf '[Service]\\nUser=trainer\\n' > /etc/systemd/system/$AGENT_UNIT.service.d/user.conf
    systemctl daemon-reload
    systemctl reset-failed $AGENT_UNIT 2>/dev/null || true
    systemctl start $AGENT_UNIT" > "$logs/$name-install.log" 2>&1; then
    record FAIL "$name" "install or start failed (log $logs/$name-install.log)"; return
  fi
  # 1. It starts and binds its socket.
  if ! pid="$(app 900 "$AGENT_WAIT" 2> "$logs/$name-start.log")"; then
    echo "$pid" >> "$logs/$name-start.log"
    record FAIL "$name" "the unit did not come up with its socket (log $logs/$name-start.log)"; return
  fi
  pid="$(tail -1 <<< "$pid")"
  detail+=" up in $(since "$t0") s (pid $pid);"
  # 2. What it runs as, and what it may do: the trainers' user, CAP_NET_RAW only (bit 13), no new privileges,
  # seccomp filtering; its socket the trainers' own, 0600 in a 0700 directory.
  out="$(app "grep -E '^(Uid|CapEff|CapAmb|CapBnd|NoNewPrivs|Seccomp):' /proc/$pid/status; id -u trainer
    stat -c '%U %a' $AGENT_SOCKET /run/netreduce-agent-lo" 2>&1)"
  echo "$out" > "$logs/$name-process.log"
  local uid; uid="$(sed -n 's/^\([0-9][0-9]*\)$/\1/p' <<< "$out" | head -1)"
  if grep -Eq "^Uid:[[:space:]]+$uid[[:space:]]" <<< "$out" && grep -Eq '^CapEff:[[:space:]]+0000000000002000$' <<< "$out" \
    && grep -Eq '^CapAmb:[[:space:]]+0000000000002000$' <<< "$out" && grep -Eq '^NoNewPrivs:[[:space:]]+1$' <<< "$out" \
    && grep -Eq '^Seccomp:[[:space:]]+2$' <<< "$out" && grep -qx 'trainer 600' <<< "$out" && grep -qx 'trainer 700' <<< "$out"; then
    detail+=" user trainer, CAP_NET_RAW only, NoNewPrivs, seccomp, socket 0600 in 0700;"
  else
    ok=0; detail+=" process-or-socket-not-as-documented (log $logs/$name-process.log);"
  fi
  # 3. Two sessions in a ring, as the trainers' user: every call exact.
  if app 960 "$AGENT_RING" > "$logs/$name-ring.log" 2>&1 && grep -q '^{"ok": true' "$logs/$name-ring.log"; then
    detail+=" two sessions' ring exact;"
  else
    ok=0; detail+=" ring-NOT-exact (log $logs/$name-ring.log);"
  fi
  # 4. systemd-analyze security: the score docs/operations.md states for the agent's unit.
  score="$(app "systemd-analyze security --no-pager $AGENT_UNIT.service" 2>&1 | tee "$logs/$name-security.log" \
           | sed -n "s/.*Overall exposure level for $AGENT_UNIT.service: \([0-9.]*\).*/\1/p")"
  doc_score="$(grep -o 'the agent.s unit \*\*[0-9.]*\*\*' "$repo_root/docs/operations.md" | head -1 | grep -o '[0-9][0-9.]*')"
  [ -n "$score" ] && [ "$score" = "$doc_score" ] || { ok=0; detail+=" security-$score-not-documented-$doc_score"; }
  detail+=" security $score;"
  # 5. kill -9: systemd starts it again (Restart=on-failure) and the next trainers' sessions work.
  out="$(app 900 "kill -9 $pid; sleep 3
    $AGENT_WAIT" 2>&1)"
  pid2="$(tail -1 <<< "$out")"
  echo "$out" > "$logs/$name-kill.log"
  if [[ "$pid2" =~ ^[0-9]+$ ]] && [ "$pid2" != "$pid" ] && [ "$pid2" != 0 ]; then
    detail+=" kill -9 -> restarted (pid $pid2, NRestarts $(app "systemctl show -p NRestarts --value $AGENT_UNIT"));"
    if app 960 "$AGENT_RING_FOUND" > "$logs/$name-ring-after-kill.log" 2>&1 && grep -q '^{"ok": true' "$logs/$name-ring-after-kill.log"; then
      detail+=" ring exact again, its sessions found at the unit's socket as a Session finds it;"
    else
      ok=0; detail+=" ring-after-restart-NOT-exact (log $logs/$name-ring-after-kill.log);"
    fi
  else
    ok=0; detail+=" not-restarted-after-kill-9 (log $logs/$name-kill.log);"
  fi
  app "journalctl -u $AGENT_UNIT --no-pager" > "$logs/$name-journal.log" 2>&1 || true
  app "systemctl stop $AGENT_UNIT" >/dev/null 2>&1 || true
  if [ "$ok" = 1 ]; then record PASS "$name" "${detail% ;} ($(since "$t0") s)"
  else record FAIL "$name" "${detail% ;} ($(since "$t0") s; logs $logs/$name-*)"; fi
}

# --- run ------------------------------------------------------------------------------------------------------

if [ "$down_only" = 1 ]; then
  # The kept daemon by the pid its run recorded (the old `pkill -f "netreduce.* daemon --config $logs"` looked
  # for this run's fresh log directory, which no daemon was ever started with), checked to still be that daemon;
  # then whatever else runs in the appliance namespace.
  if [ -f "$keep_state/appliance.pid" ]; then
    kept="$(cat "$keep_state/appliance.pid")"
    if tr '\0' ' ' < "/proc/$kept/cmdline" 2>/dev/null | grep -q " daemon --config "; then
      kill "$kept" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$kept" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$kept" 2>/dev/null || true
      echo "run: stopped the kept daemon (pid $kept; its logs: $(cat "$keep_state/logs" 2>/dev/null || echo ?))"
    fi
  fi
  ip netns pids "$app_ns" 2>/dev/null | xargs -r kill 2>/dev/null || true
  rm -rf "$keep_state"
  "$V" down --prefix "$prefix" >/dev/null 2>&1 || true
  bash "$repo_root/scripts/testbed.sh" down --prefix "$prefix" >/dev/null 2>&1 || true
  echo "run: removed the VMs, daemon and namespaces of prefix $prefix"
  exit 0
fi

t0=$(now)
bash "$here/build-image.sh" ${extra_packages:+--extra-packages "$extra_packages"} > "$logs/build-image.log" 2>&1 \
  || { tail -20 "$logs/build-image.log"; exit 1; }
note "image ready ($(since "$t0") s)"
t0=$(now)
"$V" down --prefix "$prefix" >/dev/null 2>&1 || true
bash "$repo_root/scripts/testbed.sh" up -w 2 --prefix "$prefix" > "$logs/testbed.log" 2>&1 \
  || { cat "$logs/testbed.log"; exit 1; }
vm_mem=512
wanted session && vm_mem=1024   # PyTorch needs more than the 512 MiB the other scenarios do with
"$V" up -n 3 --prefix "$prefix" --no-redirect --mem "$vm_mem" > "$logs/vms.log" 2>&1 || { cat "$logs/vms.log"; exit 1; }
note "test bed and 3 VMs up ($(since "$t0") s)"
if wanted systemd || wanted systemd-xdp || wanted systemd-agent; then
  t0=$(now)
  "$V" appliance-up --prefix "$prefix" > "$logs/app-vm.log" 2>&1 || { cat "$logs/app-vm.log"; exit 1; }
  note "appliance VM (systemd) up ($(since "$t0") s): $(tail -1 "$logs/app-vm.log")"
fi
"$V" redirect off --prefix "$prefix" >/dev/null

if wanted pass-through; then
  t0=$(now)
  ok=1 detail=""
  declare -A base
  for tool in ib_write_bw ib_send_bw ib_read_bw; do
    base[$tool]="$(perftest_pair "$tool" bare)" || { ok=0; detail+=" $tool-bare-failed"; }
  done
  t_bare="$(since "$t0")"
  if start_appliance 0; then
    "$V" redirect on --prefix "$prefix" >/dev/null
    before_redirect="$(redirected_packets)"
    t1=$(now)
    for tool in ib_write_bw ib_send_bw ib_read_bw; do
      via="$(perftest_pair "$tool" via)" || { ok=0; detail+=" $tool-via-appliance-failed"; }
      [ -n "$via" ] && [ "$via" = "${base[$tool]}" ] || { ok=0; detail+=" $tool:bare[${base[$tool]}]!=via[$via]"; }
    done
    t_via="$(since "$t1")"
    through=$(( $(redirected_packets) - before_redirect ))
    [ "$through" -gt 0 ] || { ok=0; detail+=" nothing-redirected"; }
    stop_appliance
    "$V" redirect off --prefix "$prefix" >/dev/null
  else
    ok=0 detail+=" appliance-did-not-start" t_via=0 through=0
  fi
  if [ "$ok" = 1 ]; then
    record PASS pass-through "ib_write_bw ib_send_bw ib_read_bw RC 64 KiB x 100 identical; bare ${t_bare} s, via appliance ${t_via} s, ${through} packets redirected"
  else
    record FAIL pass-through "${detail# } (logs $logs/{bare,via}-*.log)"
  fi
fi

wanted aggregation && scenario_allreduce aggregation 0
wanted loss && scenario_allreduce loss "$drop"
wanted systemd && systemd_phase systemd af_packet
{ wanted systemd || wanted systemd-xdp; } && systemd_phase systemd-xdp af_xdp
wanted systemd-agent && systemd_agent_phase

# session: the Python package's Session over its verbs transport (persistent RC QPs on rxe0, memory registered
# once, MsgIDs continuing across calls), torch.distributed (gloo over eth0) for the rendezvous: allreduce_ of odd
# sizes and three DDP steps with netreduce.allreduce_hook, every tensor and bucket checked bit for bit against the
# rank-ordered sum (python/tests/bed_worker.py, the checks the namespace tests run over the sidecar transport).
# Needs PyTorch in the image (--extra-packages python3-torch) and an fp32 ring (--type fp32).
if wanted session; then
  t0=$(now)
  if [ "$dtype" != fp32 ]; then
    record FAIL session "needs --type fp32 (the hooks sum fp32 buckets)"
  elif ! "$V" exec --prefix "$prefix" 0 'python3 -c "import torch"' > /dev/null 2>&1; then
    record FAIL session "no PyTorch in the VM image: build it with --extra-packages python3-torch"
  elif ! start_appliance 0; then
    record FAIL session "appliance did not start: see $logs"
  else
    "$V" redirect on --prefix "$prefix" >/dev/null
    cmd="cd /nr/src/python/tests && timeout 900 python3 bed_worker.py ddp --world 3 --master 10.77.0.101 --port 29555 --transport verbs --device rxe0 --payload 1024 --window $window --msg-len $msg_len --call-timeout 120"
    jobs=()
    for i in 1 2; do jobs[i]="$("$V" start --prefix "$prefix" "$i" "$cmd --rank $i --out /tmp/session-$i.json; cat /tmp/session-$i.json")"; done
    rc=0
    "$V" exec --prefix "$prefix" --timeout 960 0 "$cmd --rank 0 --out /tmp/session-0.json; cat /tmp/session-0.json" > "$logs/session-rank0.log" 2>&1 || rc=1
    for i in 1 2; do
      "$V" wait --prefix "$prefix" --timeout 300 "$i" "${jobs[i]}" > "$logs/session-rank$i.log" 2>&1 || rc=1
    done
    stop_appliance
    checked=0
    for i in 0 1 2; do
      grep -q '^{"ok": true' "$logs/session-rank$i.log" || rc=1
      n="$(grep -o '"exact": true' "$logs/session-rank$i.log" | wc -l)"; checked=$(( checked + n ))
      grep -q '"exact": false' "$logs/session-rank$i.log" && rc=1
    done
    if [ "$rc" = 0 ]; then
      record PASS session "3 ranks, Session(transport=verbs) on rxe0: $checked tensors and DDP buckets bit-exact, $(since "$t0") s"
    else
      record FAIL session "see $logs/session-rank*.log"
    fi
  fi
fi

if [ "$keep" = 1 ]; then
  if start_appliance "$keep_drop"; then
    "$V" redirect on --prefix "$prefix" >/dev/null
    mkdir -p "$keep_state"
    echo "$app_pid" > "$keep_state/appliance.pid"
    echo "$logs" > "$keep_state/logs"
    note "kept: daemon (ring $ring_id, $dtype, window $window, msgLen $msg_len, payload $payload, tags $inet_tag/$result_tag, drop $keep_drop) in namespace $app_ns,"
    note "  API inside it on TCP 127.0.0.1:9740, its token in $logs/api.token:"
    note "    ip netns exec $app_ns $launcher ctl --api 127.0.0.1:9740 --token-file $logs/api.token counters"
    note "    ip netns exec $app_ns curl -s http://127.0.0.1:9740/v1/rings/$ring_id/parameters   (no token needed)"
    note "  VMs: $V exec --prefix $prefix 0 'COMMAND' (the repository is at /nr/src in every VM)"
    note "  remove everything: $0 --prefix $prefix --down"
  else
    note "--keep: the daemon did not start again (see $logs)"
  fi
fi

echo "---"
printf '%s\n' "${summary[@]}"
echo "total $(since "$t_start") s (logs: $logs)"
exit "$failed"

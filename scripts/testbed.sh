#!/usr/bin/env bash
# The network-namespace test bed of the design brief:
#
#   nr-w0 .. nr-w{W-1}  worker namespaces, each with eth0 (10.77.0.(i+1)/24, MAC 02:77:00:00:00:(i+1))
#   nr-sw               the "switch": bridge br0 with one port per worker (sw-w<i>) and one to the appliance (sw-app)
#   nr-app              the appliance namespace, eth0 (no IP needed; the daemon works at layer 2)
#   nr-out              with --outsider: a host on the same switch that is not a ring member (10.77.0.100,
#                       MAC 02:77:00:00:00:64), for tests that send crafted packets into a ring
#
# The switch redirects UDP 4791 arriving on worker ports to the appliance port with tc u32 + mirred
# (the ACL redirect of a real deployment). The appliance re-emits results into sw-app with the workers'
# own source MACs, so learning is off on sw-app and the worker MACs are static FDB entries, as on a real switch.
#
# usage: scripts/testbed.sh up   [-w WORKERS] [--mtu 1500|9000] [--rate RATE] [--prefix P] [--outsider]
#        scripts/testbed.sh down [--prefix P]
#        scripts/testbed.sh status [--prefix P]
#        scripts/testbed.sh redirect on|off [--prefix P]   (add/remove the UDP 4791 redirect on every worker port,
#                                                           e.g. for a ring all-reduce baseline that bypasses the appliance)
#   RATE is a tc rate (e.g. 1gbit, 5gbit) applied with tbf to each worker link in both directions.
#   P must be at most 10 characters (interface names are P-w<i>e and P-app0, at most 15).
# Idempotent: `up` removes an existing bed with the same prefix first; `down` removes everything it made.
set -euo pipefail

cmd="${1:-}"
[ -n "$cmd" ] && shift
redirect_state=""
if [ "$cmd" = redirect ]; then
  redirect_state="${1:-}"
  [ -n "$redirect_state" ] && shift
fi
workers=4
mtu=1500
rate=""
prefix="nr"
outsider=0
while [ $# -gt 0 ]; do
  case "$1" in
    -w|--workers) workers="$2"; shift 2 ;;
    --mtu) mtu="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --prefix) prefix="$2"; shift 2 ;;
    --outsider) outsider=1; shift ;;
    *) echo "testbed: unknown option $1" >&2; exit 2 ;;
  esac
done

[ "${#prefix}" -le 10 ] || { echo "testbed: prefix '$prefix' longer than 10 characters" >&2; exit 2; }
sw="${prefix}-sw"
app="${prefix}-app"

worker_ns() { echo "${prefix}-w$1"; }
worker_ip() { echo "10.77.0.$(( $1 + 1 ))"; }
worker_mac() { printf '02:77:00:00:00:%02x' $(( $1 + 1 )); }
APP_MAC="02:77:00:00:00:fe"

down() {
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^${prefix}-(sw|app|out|w[0-9]+)$" || true); do
    ip netns del "$ns" 2>/dev/null || true
  done
}

status() {
  ip netns list | awk '{print $1}' | grep -E "^${prefix}-(sw|app|out|w[0-9]+)$" || { echo "testbed ${prefix}: down"; return 0; }
  ip netns exec "$sw" bridge link show 2>/dev/null || true
  ip netns exec "$sw" tc -s filter show dev "sw-w0" ingress 2>/dev/null | head -20 || true
}

redirect_roce() { # dev: UDP 4791 (IPv4 and IPv6) arriving on dev goes to the appliance port
  local dev="$1"
  ip netns exec "$sw" tc qdisc add dev "$dev" ingress
  ip netns exec "$sw" tc filter add dev "$dev" parent ffff: protocol ip prio 10 u32 \
    match ip protocol 17 0xff match ip dport 4791 0xffff \
    action mirred egress redirect dev sw-app
  ip netns exec "$sw" tc filter add dev "$dev" parent ffff: protocol ipv6 prio 11 u32 \
    match ip6 protocol 17 0xff match ip6 dport 4791 0xffff \
    action mirred egress redirect dev sw-app
}

shape() { # ns dev: tbf at $rate on dev's egress
  local ns="$1" dev="$2"
  [ -n "$rate" ] || return 0
  ip netns exec "$ns" tc qdisc replace dev "$dev" root tbf rate "$rate" burst 512kb latency 20ms
}

up() {
  [ "$workers" -ge 2 ] && [ "$workers" -le 64 ] || { echo "testbed: workers must be 2..64" >&2; exit 2; }
  down
  ip netns add "$sw"
  ip netns add "$app"
  ip netns exec "$sw" ip link add br0 type bridge
  ip netns exec "$sw" ip link set br0 mtu "$mtu" up
  ip netns exec "$sw" ip link set lo up

  ip link add "${prefix}-app0" type veth peer name sw-app netns "$sw"
  ip link set "${prefix}-app0" netns "$app"
  ip netns exec "$app" ip link set "${prefix}-app0" name eth0
  ip netns exec "$app" ip link set eth0 address "$APP_MAC" mtu "$mtu" up
  ip netns exec "$app" ip link set lo up
  # The appliance forwards frames for other hosts; it must not answer or alter them.
  ip netns exec "$app" sysctl -qw net.ipv6.conf.eth0.disable_ipv6=1
  ip netns exec "$sw" ip link set sw-app master br0 mtu "$mtu" up
  ip netns exec "$sw" bridge link set dev sw-app learning off

  for i in $(seq 0 $(( workers - 1 ))); do
    local ns; ns="$(worker_ns "$i")"
    ip netns add "$ns"
    ip link add "${prefix}-w${i}e" type veth peer name "sw-w$i" netns "$sw"
    ip link set "${prefix}-w${i}e" netns "$ns"
    ip netns exec "$ns" ip link set "${prefix}-w${i}e" name eth0
    ip netns exec "$ns" ip link set eth0 address "$(worker_mac "$i")" mtu "$mtu" up
    ip netns exec "$ns" ip addr add "$(worker_ip "$i")/24" dev eth0
    ip netns exec "$ns" ip link set lo up
    # Ordinary-socket traffic leaves with a partial checksum otherwise, which a raw re-emitter cannot fix up.
    ip netns exec "$ns" ethtool -K eth0 tx off >/dev/null 2>&1 || true
    ip netns exec "$sw" ip link set "sw-w$i" master br0 mtu "$mtu" up
    ip netns exec "$sw" bridge fdb replace "$(worker_mac "$i")" dev "sw-w$i" master static
    redirect_roce "sw-w$i"
    shape "$ns" eth0
    shape "$sw" "sw-w$i"
  done
  if [ "$outsider" -eq 1 ]; then
    # A host on the switch that is not in any ring: its RoCE traffic is redirected like everyone's.
    local out="${prefix}-out" out_mac="02:77:00:00:00:64"
    ip netns add "$out"
    ip link add "${prefix}-oute" type veth peer name sw-out netns "$sw"
    ip link set "${prefix}-oute" netns "$out"
    ip netns exec "$out" ip link set "${prefix}-oute" name eth0
    ip netns exec "$out" ip link set eth0 address "$out_mac" mtu "$mtu" up
    ip netns exec "$out" ip addr add 10.77.0.100/24 dev eth0
    ip netns exec "$out" ip link set lo up
    ip netns exec "$sw" ip link set sw-out master br0 mtu "$mtu" up
    ip netns exec "$sw" bridge fdb replace "$out_mac" dev sw-out master static
    redirect_roce sw-out
  fi
  # Static neighbours: RoCE endpoints resolve peers out of band, and no ARP is needed to start.
  for i in $(seq 0 $(( workers - 1 ))); do
    for j in $(seq 0 $(( workers - 1 ))); do
      [ "$i" = "$j" ] && continue
      ip netns exec "$(worker_ns "$i")" ip neigh replace "$(worker_ip "$j")" lladdr "$(worker_mac "$j")" dev eth0 nud permanent
    done
  done
  echo "testbed ${prefix}: up, ${workers} workers, mtu ${mtu}${rate:+, rate ${rate}}"
  for i in $(seq 0 $(( workers - 1 ))); do
    echo "  $(worker_ns "$i") eth0 $(worker_ip "$i") $(worker_mac "$i")"
  done
  echo "  ${app} eth0 (appliance port, $APP_MAC)"
  [ "$outsider" -eq 0 ] || echo "  ${prefix}-out eth0 10.77.0.100 02:77:00:00:00:64 (not a ring member)"
}

redirect() { # on|off for every worker (and outsider) port of an existing bed
  local ports
  ports="$(ip netns exec "$sw" ls /sys/class/net | grep -E '^sw-(w[0-9]+|out)$' || true)"
  [ -n "$ports" ] || { echo "testbed ${prefix}: not up" >&2; exit 1; }
  for dev in $ports; do
    ip netns exec "$sw" tc qdisc del dev "$dev" ingress 2>/dev/null || true
    [ "$redirect_state" = on ] && redirect_roce "$dev"
  done
  echo "testbed ${prefix}: redirect ${redirect_state}"
}

case "$cmd" in
  up) up ;;
  redirect)
    case "$redirect_state" in on|off) redirect ;; *) echo "testbed: redirect on|off" >&2; exit 2 ;; esac ;;
  down) down; echo "testbed ${prefix}: down" ;;
  status) status ;;
  *) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac

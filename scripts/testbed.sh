#!/usr/bin/env bash
# The network-namespace test bed of the design brief:
#
#   nr-w0 .. nr-w{W-1}  worker namespaces, each with eth0 (10.77.0.(i+1)/24, MAC 02:77:00:00:00:(i+1))
#   nr-sw               the "switch": bridge br0 with one port per worker (sw-w<i>) and one to the appliance (sw-app)
#   nr-app              the appliance namespace, eth0 (no IP needed; the daemon works at layer 2)
#   nr-out              with --outsider: a host on the same switch that is not a ring member (10.77.0.100,
#                       MAC 02:77:00:00:00:64), for tests that send crafted packets into a ring
#
# The switch redirects UDP 4791 (RoCEv2; IPv4 also with one 802.1Q tag or QinQ) and UDP to SwitchML's ports
# 0xBEE0..0xBEEF arriving on worker ports to the appliance port with tc u32 + mirred (the ACL redirect of a real
# deployment). Port security, as docs/deployment.md asks of a switch: every MAC is a static FDB entry and learning
# is off on every port, so a host that sends with another host's MAC cannot move that host's entry to its own port
# (static entries are not sticky: before, a forged frame that reached the bridge took a worker's frames away). The appliance namespace also has a
# management interface, mgmt0 (10.77.0.253, MAC 02:77:00:00:00:fd), an ordinary port of the switch apart from the
# dataplane's eth0: the SwitchML controller's gRPC service listens there. 10.77.0.254 (MAC 02:77:00:00:00:fe, the
# appliance port's) is the bed's SwitchML "switch" address, answered by the dataplane, not by a kernel. The appliance re-emits results into sw-app with the workers'
# own source MACs, so learning is off on sw-app and the worker MACs are static FDB entries, as on a real switch.
#
# With --racks R (paper §3.3, Figure 5) the W workers are split into R racks of W/R consecutive ranks:
#
#   nr-sw<k>            rack k's switch: bridge br0 with its workers' ports (sw-w<i>), its leaf appliance's port
#                       (sw-app) and an uplink (uplink) to the spine switch
#   nr-app<k>           rack k's leaf appliance namespace, eth0
#   nr-ssw              the spine switch: bridge br0 with a downlink per rack (dn<k>, the far end of rack k's uplink)
#                       and the spine appliance's port (sw-app)
#   nr-spine            the spine appliance namespace, eth0
#   nr-w<i>, nr-out     as above (one L2 domain, 10.77.0.0/24, across racks; the outsider is in rack 0)
#
# Every switch redirects UDP 4791 arriving on any port but its appliance's (worker ports, uplinks, downlinks) to
# its appliance port; what an appliance re-emits enters through that port, which has no redirect, and is
# switched by the static FDB: a worker's packet to a worker in another rack goes worker -> rack switch -> leaf ->
# rack switch -> uplink -> spine switch -> spine -> spine switch -> dn -> next rack switch -> leaf -> rack switch ->
# worker. Learning is off on every appliance port and inter-switch link (appliances re-emit frames with the
# workers' source MACs, which would move a learnt entry); each switch has a static entry for every worker MAC:
# its own worker ports for its rack's, the uplink (rack switch) or the rack's downlink (spine switch) otherwise.
# Nothing is flooded to an appliance port or across an inter-switch link: an appliance passes on what it does not
# aggregate, and a flooded frame it re-emitted would loop between the tiers forever.
#
# With --trees T (flat bed only; PANAMA §4.1, several aggregation trees per job) the switch has T appliances:
#
#   nr-app              tree 0's appliance (as above), on switch port sw-app
#   nr-app<t>           tree t's appliance (t = 1..T-1), eth0 (MAC 02:77:00:00:e0:<t>) on switch port sw-app<t>
#
# and every worker (and outsider) port redirects IPv4 UDP 4791 from UDP source port 0xBF00 + t (tree t's queue pairs,
# `worker allreduce --trees`) to sw-app<t>, ahead of the default redirect to sw-app (which takes tree 0's and every
# other RoCE frame): the ACL a switch would steer a tree's path by, as a fabric's ECMP hashes the source port.
#
# What the namespaces must not do that the hardware they stand for does not (scripts/lib/emulation.sh): a worker's
# eth0 consumes RoCEv2 as an RDMA NIC would (the software endpoint's AF_PACKET tap still sees every frame; the
# namespace's IP stack does not, so it makes no ICMP port-unreachable attempt per frame), a switch does not
# run the host's br_netfilter on what it bridges, a shaped link does not reorder a flow (what a shaped device
# receives is steered to one CPU's backlog; NETREDUCE_BED_REORDERING=1 turns that off), and an appliance's port
# receives wire frames, not a neighbour's segmentation offload batches (the switch port facing it segments them).
#
# usage: scripts/testbed.sh up   [-w WORKERS] [--racks R | --trees T] [--mtu 1500|9000] [--rate RATE] [--prefix P]
#                                [--burst SIZE] [--outsider]
#        scripts/testbed.sh down [--prefix P]
#        scripts/testbed.sh status [--prefix P]
#        scripts/testbed.sh redirect on|off [--prefix P]   (add/remove the UDP 4791 redirect on every worker port,
#                                                           e.g. for a ring all-reduce baseline that bypasses the appliance)
#        scripts/testbed.sh ecn on|off [--ecn-threshold BYTES] [--ecn-fraction F] [--prefix P]
#                                    (ECN marking on every shaped device of a bed brought up with --rate: both ends of
#                                     every worker link and uplink mark ECN-capable packets CE while a model of the
#                                     link's shaper (its token bucket, drained at F (default 1.0: the real queue) of
#                                     the link rate) queues more than BYTES (default 262144); see ecn_mark in
#                                     scripts/lib/emulation.sh. `up --ecn-threshold BYTES` starts with it on)
#   RATE is a tc rate (e.g. 1gbit, 5gbit) applied with tbf to each worker link (and uplink) in both directions.
#   --burst SIZE (or NETREDUCE_BED_BURST, which scripts that bring the bed up themselves pass on; default 512kb): the
#   tbf's bucket, a tc size. Whatever fits the bucket leaves at veth speed, not at RATE: with 512kb a call that
#   sends under half a MiB per link after a pause never meets the link's rate; a NIC sends at line rate from the
#   first frame. Below about 67 KB the tbf segments the appliance's offload batches of results in software, charged
#   to the appliance (64kb doubled its CPU in a 64 MiB call): 128kb is the smallest bucket that keeps them whole.
#   R (2..8) must divide WORKERS. T is 1..16 (1: one appliance, the default).
#   P must be at most 10 characters (interface names are P-w<i>e and P-app0, at most 15).
# Idempotent: `up` removes an existing bed with the same prefix first; `down` removes everything it made.
set -euo pipefail

cmd="${1:-}"
[ -n "$cmd" ] && shift
redirect_state=""
if [ "$cmd" = redirect ] || [ "$cmd" = ecn ]; then
  redirect_state="${1:-}"
  [ -n "$redirect_state" ] && shift
fi
ecn_threshold=""
ecn_fraction=1.0
workers=4
mtu=1500
rate=""
burst="${NETREDUCE_BED_BURST:-512kb}"
prefix="nr"
outsider=0
racks=0
trees=1
while [ $# -gt 0 ]; do
  case "$1" in
    -w|--workers) workers="$2"; shift 2 ;;
    --mtu) mtu="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --burst) burst="$2"; shift 2 ;;
    --prefix) prefix="$2"; shift 2 ;;
    --outsider) outsider=1; shift ;;
    --racks) racks="$2"; shift 2 ;;
    --trees) trees="$2"; shift 2 ;;
    --ecn-threshold) ecn_threshold="$2"; shift 2 ;;
    --ecn-fraction) ecn_fraction="$2"; shift 2 ;;
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
MGMT_MAC="02:77:00:00:00:fd"
MGMT_IP="10.77.0.253"

NS_PATTERN="^${prefix}-(sw[0-9]*|app[0-9]*|ssw|spine|out|w[0-9]+)$"

down() {
  for ns in $(ip netns list | awk '{print $1}' | grep -E "$NS_PATTERN" || true); do
    ip netns del "$ns" 2>/dev/null || true
  done
}

status() {
  ip netns list | awk '{print $1}' | grep -E "$NS_PATTERN" || { echo "testbed ${prefix}: down"; return 0; }
  if ip netns list | awk '{print $1}' | grep -qx "${prefix}-ssw"; then
    local ns
    for ns in $(switch_namespaces); do
      echo "-- $ns"
      ip netns exec "$ns" bridge link show 2>/dev/null || true
      ip netns exec "$ns" ip -s -h link show 2>/dev/null | grep -A5 -E '^[0-9]+: (uplink|dn[0-9]+)@' || true
    done
    return 0
  fi
  ip netns exec "$sw" bridge link show 2>/dev/null || true
  ip netns exec "$sw" tc -s filter show dev "sw-w0" ingress 2>/dev/null | head -20 || true
}

source "$(dirname "${BASH_SOURCE[0]}")/lib/emulation.sh"

switch_namespaces() { # every switch namespace of the bed (flat: P-sw; racks: P-sw<k> and P-ssw)
  ip netns list | awk '{print $1}' | grep -E "^${prefix}-(sw[0-9]*|ssw)$" || true
}

redirect_roce() { # dev [ns]: UDP 4791 (IPv4 and IPv6) arriving on dev goes to the appliance port sw-app
  redirect_roce_into "${2:-$sw}" "$1" sw-app
  redirect_trees "$1" "${2:-$sw}"
}

TREE_PORT_BASE=$(( 0xBF00 ))   # MultiTreeAllReduce.UDP_SOURCE_PORT_BASE: tree t's queue pairs send from it + t

redirect_trees() { # dev ns: tree t's RoCE (IPv4 UDP 4791 from source port 0xBF00 + t) arriving on dev goes to
  # sw-app<t>, for every tree appliance port the switch has (prio 9, ahead of the default redirect's prio 10)
  local dev="$1" ns="$2" port t
  for port in $(ip netns exec "$ns" ls /sys/class/net | grep -E '^sw-app[0-9]+$' | sort -V || true); do
    t="${port#sw-app}"
    ip netns exec "$ns" tc filter add dev "$dev" ingress protocol ip prio 9 u32 \
      match ip protocol 17 0xff match ip dport 4791 0xffff match ip sport $(( TREE_PORT_BASE + t )) 0xffff \
      action mirred egress redirect dev "$port"
  done
}

tree_mac() { printf '02:77:00:00:e0:%02x' "$1"; }

shape() { # ns dev: tbf at $rate on dev's egress; what dev receives (from its peer's tbf: both ends of a link are
           # shaped) stays in order (in_order_rx, scripts/lib/emulation.sh)
  local ns="$1" dev="$2"
  [ -n "$rate" ] || return 0
  ip netns exec "$ns" tc qdisc replace dev "$dev" root tbf rate "$rate" burst "$burst" latency 20ms
  [ "${NETREDUCE_BED_REORDERING:-0}" = 1 ] || in_order_rx "$ns" "$dev"
}

up() {
  [ "$workers" -ge 2 ] && [ "$workers" -le 64 ] || { echo "testbed: workers must be 2..64" >&2; exit 2; }
  down
  ip netns add "$sw"
  ip netns add "$app"
  ip netns exec "$sw" ip link add br0 type bridge
  ip netns exec "$sw" ip link set br0 mtu "$mtu" up
  ip netns exec "$sw" ip link set lo up
  plain_switch "$sw"

  ip link add "${prefix}-app0" type veth peer name sw-app netns "$sw"
  ip link set "${prefix}-app0" netns "$app"
  ip netns exec "$app" ip link set "${prefix}-app0" name eth0
  ip netns exec "$app" ip link set eth0 address "$APP_MAC" mtu "$mtu" up
  ip netns exec "$app" ip link set lo up
  # The appliance forwards frames for other hosts; it must not answer or alter them.
  ip netns exec "$app" sysctl -qw net.ipv6.conf.eth0.disable_ipv6=1
  ip netns exec "$sw" ip link set sw-app master br0 mtu "$mtu" up
  ip netns exec "$sw" bridge link set dev sw-app learning off
  wire_frames_to "$sw" sw-app
  local t
  for t in $(seq 1 $(( trees - 1 ))); do
    # Tree t's appliance: its own namespace and switch port, which (like sw-app) has no redirect and learns nothing,
    # and takes no flood (it passes on what it does not aggregate; it receives only what its tree's redirect sends).
    ip netns add "${app}$t"
    ip link add "${prefix}-app$t" type veth peer name "sw-app$t" netns "$sw"
    ip link set "${prefix}-app$t" netns "${app}$t"
    ip netns exec "${app}$t" ip link set "${prefix}-app$t" name eth0
    ip netns exec "${app}$t" ip link set eth0 address "$(tree_mac "$t")" mtu "$mtu" up
    ip netns exec "${app}$t" ip link set lo up
    ip netns exec "${app}$t" sysctl -qw net.ipv6.conf.eth0.disable_ipv6=1
    ip netns exec "$sw" ip link set "sw-app$t" master br0 mtu "$mtu" up
    ip netns exec "$sw" bridge link set dev "sw-app$t" learning off flood off mcast_flood off
    ip netns exec "$sw" bridge link set dev "sw-app$t" bcast_flood off 2>/dev/null || true
    wire_frames_to "$sw" "sw-app$t"
  done

  for i in $(seq 0 $(( workers - 1 ))); do
    local ns; ns="$(worker_ns "$i")"
    ip netns add "$ns"
    ip link add "${prefix}-w${i}e" type veth peer name "sw-w$i" netns "$sw"
    ip link set "${prefix}-w${i}e" netns "$ns"
    ip netns exec "$ns" ip link set "${prefix}-w${i}e" name eth0
    ip netns exec "$ns" ip link set eth0 address "$(worker_mac "$i")" mtu "$mtu" up
    ip netns exec "$ns" ip addr add "$(worker_ip "$i")/24" dev eth0
    ip netns exec "$ns" ip link set lo up
    worker_tx_offload "$ns" eth0
    ip netns exec "$sw" ip link set "sw-w$i" master br0 mtu "$mtu" up
    ip netns exec "$sw" bridge fdb replace "$(worker_mac "$i")" dev "sw-w$i" master static
    ip netns exec "$sw" bridge link set dev "sw-w$i" learning off
    redirect_roce "sw-w$i"
    roce_nic "$ns" eth0
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
    # As the workers: what it sends leaves as wire frames, not offload frames that veth would carry whole.
    ip netns exec "$out" ethtool -K eth0 tx off >/dev/null 2>&1 || true
    ip netns exec "$sw" ip link set sw-out master br0 mtu "$mtu" up
    ip netns exec "$sw" bridge fdb replace "$out_mac" dev sw-out master static
    ip netns exec "$sw" bridge link set dev sw-out learning off
    redirect_roce sw-out
  fi
  # The appliance's management interface: where its control services listen for the workers (the SwitchML
  # controller), an ordinary switch port, apart from the dataplane's port.
  ip link add "${prefix}-appm" type veth peer name sw-mgmt netns "$sw"
  ip link set "${prefix}-appm" netns "$app"
  ip netns exec "$app" ip link set "${prefix}-appm" name mgmt0
  ip netns exec "$app" ip link set mgmt0 address "$MGMT_MAC" mtu "$mtu" up
  ip netns exec "$app" ip addr add "$MGMT_IP/24" dev mgmt0
  ip netns exec "$sw" ip link set sw-mgmt master br0 mtu "$mtu" up
  ip netns exec "$sw" bridge fdb replace "$MGMT_MAC" dev sw-mgmt master static
  ip netns exec "$sw" bridge link set dev sw-mgmt learning off
  # Static neighbours: RoCE endpoints resolve peers out of band, and no ARP is needed to start.
  for i in $(seq 0 $(( workers - 1 ))); do
    for j in $(seq 0 $(( workers - 1 ))); do
      [ "$i" = "$j" ] && continue
      ip netns exec "$(worker_ns "$i")" ip neigh replace "$(worker_ip "$j")" lladdr "$(worker_mac "$j")" dev eth0 nud permanent
    done
    ip netns exec "$(worker_ns "$i")" ip neigh replace "$MGMT_IP" lladdr "$MGMT_MAC" dev eth0 nud permanent
    ip netns exec "$app" ip neigh replace "$(worker_ip "$i")" lladdr "$(worker_mac "$i")" dev mgmt0 nud permanent
  done
  echo "testbed ${prefix}: up, ${workers} workers, mtu ${mtu}${rate:+, rate ${rate}}$([ "$trees" -gt 1 ] && echo ", $trees trees")"
  for i in $(seq 0 $(( workers - 1 ))); do
    echo "  $(worker_ns "$i") eth0 $(worker_ip "$i") $(worker_mac "$i")"
  done
  echo "  ${app} eth0 (appliance port, $APP_MAC; SwitchML address 10.77.0.254), mgmt0 $MGMT_IP $MGMT_MAC"
  for t in $(seq 1 $(( trees - 1 ))); do
    echo "  ${app}$t eth0 (tree $t's appliance port, $(tree_mac "$t")): RoCE from UDP source port $(( TREE_PORT_BASE + t ))"
  done
  [ "$outsider" -eq 0 ] || echo "  ${prefix}-out eth0 10.77.0.100 02:77:00:00:00:64 (not a ring member)"
}

# switch_port SW_NS PEER_NS PEER_DEV PORT: a veth from switch SW_NS's bridge (port PORT) to PEER_DEV in PEER_NS
switch_port() {
  local swns="$1" peer_ns="$2" peer_dev="$3" port="$4"
  ip link add "$peer_dev" netns "$peer_ns" mtu "$mtu" type veth peer name "$port" netns "$swns" mtu "$mtu"
  ip netns exec "$swns" ip link set "$port" master br0 up
}

new_switch() { # ns
  ip netns add "$1"
  ip netns exec "$1" ip link add br0 type bridge
  ip netns exec "$1" ip link set br0 mtu "$mtu" up
  ip netns exec "$1" ip link set lo up
  plain_switch "$1"
}

new_appliance() { # ns mac switch_ns: the appliance namespace's eth0 on the switch's sw-app (no redirect, no learning)
  local ns="$1" mac="$2" swns="$3"
  ip netns add "$ns"
  switch_port "$swns" "$ns" eth0 sw-app
  ip netns exec "$ns" ip link set eth0 address "$mac" up
  ip netns exec "$ns" ip link set lo up
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.eth0.disable_ipv6=1
  ip netns exec "$swns" bridge link set dev sw-app learning off
  wire_frames_to "$swns" sw-app
  # No flooding to the appliance either: it passes on what it does not aggregate, so a flooded frame (broadcast,
  # multicast, unknown unicast) it re-emitted would be flooded again, up to the spine switch, down to every rack
  # switch, into every leaf, and round again forever (the re-emission defeats the bridge's split horizon). It
  # receives only what the redirects send it.
  ip netns exec "$swns" bridge link set dev sw-app flood off mcast_flood off
  ip netns exec "$swns" bridge link set dev sw-app bcast_flood off 2>/dev/null \
    || echo "testbed: warning: cannot turn broadcast flooding off on $swns sw-app (old iproute2 or kernel)" >&2
}

no_flood() { # ns dev: nothing flooded leaves through dev, an inter-switch (tier) link. Every worker MAC is a static
  # entry on every switch, so known unicast crosses the tiers; what a switch would flood (unknown unicast, broadcast,
  # multicast) stays in its own switch. Before, a UDP 4791 frame to a MAC no switch knows looped: redirected to the
  # leaf, passed on, flooded up the uplink, redirected to the spine, passed on, flooded down every downlink, into
  # every leaf and up again, for ever (issue 30; docs/deployment.md says what a real switch should do).
  local ns="$1" dev="$2"
  ip netns exec "$ns" bridge link set dev "$dev" flood off mcast_flood off
  ip netns exec "$ns" bridge link set dev "$dev" bcast_flood off 2>/dev/null \
    || echo "testbed: warning: cannot turn broadcast flooding off on $ns $dev (old iproute2 or kernel)" >&2
}

up_racks() {
  [ "$workers" -ge 2 ] && [ "$workers" -le 64 ] || { echo "testbed: workers must be 2..64" >&2; exit 2; }
  [ "$racks" -ge 2 ] && [ "$racks" -le 8 ] && [ $(( workers % racks )) -eq 0 ] \
    || { echo "testbed: --racks must be 2..8 and divide the workers ($workers)" >&2; exit 2; }
  local per=$(( workers / racks )) k i j spine_sw="${prefix}-ssw"
  down
  new_switch "$spine_sw"
  new_appliance "${prefix}-spine" "02:77:00:00:f1:00" "$spine_sw"
  for k in $(seq 0 $(( racks - 1 ))); do
    local rsw="${prefix}-sw$k"
    new_switch "$rsw"
    new_appliance "${prefix}-app$k" "$(printf '02:77:00:00:f0:%02x' "$k")" "$rsw"
    # The uplink: uplink in the rack switch, dn<k> in the spine switch; both redirect RoCE to their appliance.
    switch_port "$spine_sw" "$rsw" uplink "dn$k"
    ip netns exec "$rsw" ip link set dev uplink master br0 up
    ip netns exec "$rsw" bridge link set dev uplink learning off
    ip netns exec "$spine_sw" bridge link set dev "dn$k" learning off
    no_flood "$rsw" uplink
    no_flood "$spine_sw" "dn$k"
    redirect_roce uplink "$rsw"
    redirect_roce "dn$k" "$spine_sw"
    shape "$rsw" uplink
    shape "$spine_sw" "dn$k"
    for i in $(seq $(( k * per )) $(( k * per + per - 1 ))); do
      local ns; ns="$(worker_ns "$i")"
      ip netns add "$ns"
      switch_port "$rsw" "$ns" eth0 "sw-w$i"
      ip netns exec "$rsw" bridge link set dev "sw-w$i" learning off
      ip netns exec "$ns" ip link set eth0 address "$(worker_mac "$i")" up
      ip netns exec "$ns" ip addr add "$(worker_ip "$i")/24" dev eth0
      ip netns exec "$ns" ip link set lo up
      worker_tx_offload "$ns" eth0
      redirect_roce "sw-w$i" "$rsw"
      roce_nic "$ns" eth0
      shape "$ns" eth0
      shape "$rsw" "sw-w$i"
    done
    # Static FDB: the rack's workers on their ports, every other worker behind the uplink; at the spine switch,
    # the rack's workers behind its downlink.
    for j in $(seq 0 $(( workers - 1 ))); do
      if [ $(( j / per )) -eq "$k" ]; then
        ip netns exec "$rsw" bridge fdb replace "$(worker_mac "$j")" dev "sw-w$j" master static
        ip netns exec "$spine_sw" bridge fdb replace "$(worker_mac "$j")" dev "dn$k" master static
      else
        ip netns exec "$rsw" bridge fdb replace "$(worker_mac "$j")" dev uplink master static
      fi
    done
  done
  if [ "$outsider" -eq 1 ]; then
    local out="${prefix}-out" out_mac="02:77:00:00:00:64" k
    ip netns add "$out"
    switch_port "${prefix}-sw0" "$out" eth0 sw-out
    ip netns exec "${prefix}-sw0" bridge link set dev sw-out learning off
    ip netns exec "$out" ip link set eth0 address "$out_mac" up
    ip netns exec "$out" ip addr add 10.77.0.100/24 dev eth0
    ip netns exec "$out" ip link set lo up
    ip netns exec "$out" ethtool -K eth0 tx off >/dev/null 2>&1 || true
    ip netns exec "${prefix}-sw0" bridge fdb replace "$out_mac" dev sw-out master static
    ip netns exec "$spine_sw" bridge fdb replace "$out_mac" dev dn0 master static
    for k in $(seq 1 $(( racks - 1 ))); do
      ip netns exec "${prefix}-sw$k" bridge fdb replace "$out_mac" dev uplink master static
    done
    redirect_roce sw-out "${prefix}-sw0"
  fi
  for i in $(seq 0 $(( workers - 1 ))); do
    for j in $(seq 0 $(( workers - 1 ))); do
      [ "$i" = "$j" ] && continue
      ip netns exec "$(worker_ns "$i")" ip neigh replace "$(worker_ip "$j")" lladdr "$(worker_mac "$j")" dev eth0 nud permanent
    done
  done
  echo "testbed ${prefix}: up, ${workers} workers in ${racks} racks of ${per}, mtu ${mtu}${rate:+, rate ${rate}}"
  for k in $(seq 0 $(( racks - 1 ))); do
    echo "  rack $k: switch ${prefix}-sw$k, leaf appliance ${prefix}-app$k eth0 $(printf '02:77:00:00:f0:%02x' "$k"), uplink <-> ${prefix}-ssw dn$k"
    for i in $(seq $(( k * per )) $(( k * per + per - 1 ))); do
      echo "    $(worker_ns "$i") eth0 $(worker_ip "$i") $(worker_mac "$i")"
    done
  done
  echo "  spine: switch ${prefix}-ssw, spine appliance ${prefix}-spine eth0 02:77:00:00:f1:00"
  [ "$outsider" -eq 0 ] || echo "  ${prefix}-out eth0 10.77.0.100 02:77:00:00:00:64 (rack 0, not a ring member)"
}

redirect() { # on|off for every worker (and outsider) port, uplink and downlink of an existing bed
  local ports ns dev found=0
  for ns in $(switch_namespaces); do
    ports="$(ip netns exec "$ns" ls /sys/class/net | grep -E '^(sw-(w[0-9]+|out)|uplink|dn[0-9]+)$' || true)"
    for dev in $ports; do
      found=1
      # the ingress filters only: the device's egress may hold the ECN marker
      ip netns exec "$ns" tc filter del dev "$dev" ingress 2>/dev/null || true
      if [ "$redirect_state" = on ]; then redirect_roce "$dev" "$ns"; fi
    done
  done
  [ "$found" -eq 1 ] || { echo "testbed ${prefix}: not up" >&2; exit 1; }
  echo "testbed ${prefix}: redirect ${redirect_state}"
}

ecn() { # on|off on every shaped device of an existing bed: worker eth0s and the switches' ports facing them, uplinks
  local ns dev found=0 qdiscs failed=0
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^${prefix}-(w[0-9]+|sw[0-9]*|ssw)$" || true); do
    for dev in $(ip netns exec "$ns" ls /sys/class/net | grep -E '^(eth0|sw-w[0-9]+|uplink|dn[0-9]+)$' || true); do
      if [ "$redirect_state" = off ]; then
        # off: from every such device, shaped or not, and checked (ecn_unmark)
        ecn_unmark "$ns" "$dev" || failed=1
        found=1
        continue
      fi
      # captured, not piped into grep -q (pipefail)
      qdiscs="$(ip netns exec "$ns" tc qdisc show dev "$dev")"
      [[ "$qdiscs" == "qdisc tbf"* || "$qdiscs" == *$'\nqdisc tbf'* ]] || continue
      found=1
      ecn_mark "$ns" "$dev" "${ecn_threshold:-262144}" "$ecn_fraction"
    done
  done
  [ "$failed" -eq 0 ] || { echo "testbed ${prefix}: ecn off: a marker would not come off (above)" >&2; exit 1; }
  [ "$found" -eq 1 ] || { echo "testbed ${prefix}: not up, or up without --rate (nothing to mark at)" >&2; exit 1; }
  echo "testbed ${prefix}: ecn ${redirect_state}${ecn_threshold:+, threshold $ecn_threshold bytes}, drained at $ecn_fraction of the rate"
}

case "$cmd" in
  up) [ "$trees" -ge 1 ] && [ "$trees" -le 16 ] || { echo "testbed: --trees must be 1..16" >&2; exit 2; }
      [ "$trees" -eq 1 ] || [ "$racks" -eq 0 ] || { echo "testbed: --trees goes with a flat bed (not --racks)" >&2; exit 2; }
      if [ "$racks" -eq 0 ]; then up; else up_racks; fi
      if [ -n "$ecn_threshold" ]; then redirect_state=on; ecn; fi ;;
  ecn)
    case "$redirect_state" in on|off) ecn ;; *) echo "testbed: ecn on|off" >&2; exit 2 ;; esac ;;
  redirect)
    case "$redirect_state" in on|off) redirect ;; *) echo "testbed: redirect on|off" >&2; exit 2 ;; esac ;;
  down) down; echo "testbed ${prefix}: down" ;;
  status) status ;;
  *) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac

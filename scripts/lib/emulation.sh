# shellcheck shell=bash
# Sourced by the scripts that build namespace beds (testbed.sh, bench-appliance.sh): what makes a veth bed behave
# like the hardware it stands for, without costs that hardware does not have.

# roce_nic NS DEV: DEV stands for an RDMA NIC, which consumes RoCEv2 itself. The bed's software endpoints (and the
# loadgen) read it with AF_PACKET, a tap that sees each frame before tc ingress; without this the namespace's own
# IP stack would also take every frame as a UDP datagram to a port nobody listens on (a route lookup and an ICMP
# port-unreachable attempt per frame), and on veth that work runs in the *sender's* context: the appliance's. So
# UDP 4791 (IPv4 and IPv6) leaves the stack at ingress, after the taps. tc's drop action (act_gact) is not in every
# kernel (not in this project's CI kernel); mirred is, so the frames are redirected into a sink: a veth end whose
# peer is down, where the kernel frees them (counted as the sink's tx_dropped).
roce_nic() {
  local ns="$1" dev="$2"
  ip -n "$ns" link add roce-sink type veth peer name roce-sink-peer
  ip -n "$ns" link set roce-sink up
  redirect_roce_into "$ns" "$dev" roce-sink
}

# redirect_roce_into NS DEV TARGET: UDP 4791 (IPv4 and IPv6) arriving on DEV in NS leaves through TARGET (tc u32 +
# mirred at ingress): a switch's ACL redirect to its appliance (testbed.sh), or a NIC's sink (roce_nic).
redirect_roce_into() {
  local ns="$1" dev="$2" target="$3"
  ip netns exec "$ns" tc qdisc add dev "$dev" ingress
  ip netns exec "$ns" tc filter add dev "$dev" parent ffff: protocol ip prio 10 u32 \
    match ip protocol 17 0xff match ip dport 4791 0xffff action mirred egress redirect dev "$target"
  ip netns exec "$ns" tc filter add dev "$dev" parent ffff: protocol ipv6 prio 11 u32 \
    match ip6 protocol 17 0xff match ip6 dport 4791 0xffff action mirred egress redirect dev "$target"
}

# plain_switch NS: a switch does not run the host's iptables on the frames it bridges. Where the host has
# br_netfilter loaded (Docker loads it), every bridged IPv4 frame would go through netfilter and a route lookup
# (br_nf_pre_routing); the settings are per namespace, so only the bed's switch is changed.
plain_switch() {
  local ns="$1" key
  for key in iptables ip6tables arptables; do
    ip netns exec "$ns" sysctl -qw "net.bridge.bridge-nf-call-$key=0" 2>/dev/null || true
  done
}

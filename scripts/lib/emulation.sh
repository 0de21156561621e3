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
#
# The same holds for SwitchML's results (UDP from the switch's ports 0xBEE0..0xBEEF, prio 13): a SwitchML worker
# runs on DPDK, which takes the NIC from the kernel. A bed that attaches the published DPDK client's TAP interface
# to DEV removes that filter (tc filter del dev DEV ingress prio 13) so the results reach the TAP.
roce_nic() {
  local ns="$1" dev="$2"
  ip -n "$ns" link add roce-sink type veth peer name roce-sink-peer
  ip -n "$ns" link set roce-sink up
  redirect_roce_into "$ns" "$dev" roce-sink
  ip netns exec "$ns" tc filter add dev "$dev" ingress protocol ip prio 13 u32 \
    match ip protocol 17 0xff match ip sport "$SWITCHML_PORT" "$SWITCHML_PORT_MASK" \
    action mirred egress redirect dev roce-sink
}

# SwitchML's UDP ports: 0xBEE0 with mask 0xFFF0 (p4app-switchML's udp_port and udp_mask).
SWITCHML_PORT=0xbee0
SWITCHML_PORT_MASK=0xfff0

# redirect_roce_into NS DEV TARGET: UDP 4791 (IPv4 and IPv6) and UDP to SwitchML's ports (IPv4, 0xBEE0..0xBEEF)
# arriving on DEV in NS leave through TARGET (tc u32 + mirred at ingress): a switch's ACL redirect to its appliance
# (testbed.sh), or a NIC's sink (roce_nic).
# The filters hang off a clsact qdisc (its ingress hook is the ingress qdisc's), so that the same device's egress can
# take the ECN marker (ecn_mark) too: a device has one of ingress or clsact, never both.
redirect_roce_into() {
  local ns="$1" dev="$2" target="$3"
  clsact "$ns" "$dev"
  ip netns exec "$ns" tc filter add dev "$dev" ingress protocol ip prio 10 u32 \
    match ip protocol 17 0xff match ip dport 4791 0xffff action mirred egress redirect dev "$target"
  ip netns exec "$ns" tc filter add dev "$dev" ingress protocol ipv6 prio 11 u32 \
    match ip6 protocol 17 0xff match ip6 dport 4791 0xffff action mirred egress redirect dev "$target"
  ip netns exec "$ns" tc filter add dev "$dev" ingress protocol ip prio 12 u32 \
    match ip protocol 17 0xff match ip dport 0xbee0 0xfff0 action mirred egress redirect dev "$target"
  # VLAN-tagged RoCEv2 over IPv4 as well, as a switch's ACL that matches UDP 4791 in any VLAN would: the kernel
  # takes a frame's (outer) tag off before tc, and tc then sees the tag's protocol, not IP, so the rules above miss
  # it. One 802.1Q tag: the IPv4 header follows. QinQ (802.1ad outside, 802.1Q inside): the inner tag's TCI and
  # type come first (4 bytes; IHL 5 assumed). Without these a tagged frame with a worker's addresses went past the
  # appliance, straight to the receiving worker (issue 30).
  ip netns exec "$ns" tc filter add dev "$dev" ingress protocol 802.1Q prio 14 u32 \
    match ip protocol 17 0xff match ip dport 4791 0xffff action mirred egress redirect dev "$target"
  ip netns exec "$ns" tc filter add dev "$dev" ingress protocol 802.1ad prio 15 u32 \
    match u16 0x0800 0xffff at 2 match u8 17 0xff at 13 match u16 4791 0xffff at 26 \
    action mirred egress redirect dev "$target"
}

# clsact NS DEV: DEV has a clsact qdisc (added unless it has one).
clsact() {
  ip netns exec "$1" tc qdisc show dev "$2" | grep -q '^qdisc clsact' ||
    ip netns exec "$1" tc qdisc add dev "$2" clsact
}

# ecn_mark NS DEV THRESHOLD [FRACTION]: DEV's egress marks ECN like a switch port's AQM, which this kernel has none of
# (no RED, no fq_codel): scripts/lib/ecn_marker.c, a tc bpf program ahead of DEV's shaper, models the shaper (its
# token bucket, read from DEV's tbf: the burst, and the rate times FRACTION) with every packet DEV is to send, and marks
# ECN-capable packets CE while the model's queue holds more than THRESHOLD bytes. FRACTION 1.0 (the default) is the
# real queue, as a DCTCP switch marks on its instantaneous queue; below 1 the queue builds early, HULL's phantom queue,
# which marks whenever the link is nearly full. Needs clang and libbpf's headers (scripts/setup.sh installs them) and a
# tbf on DEV. Idempotent; ecn_unmark takes it off.
ecn_mark() {
  local ns="$1" dev="$2" threshold="$3" fraction="${4:-1.0}" shaper bps burst object
  shaper="$(tbf_options "$ns" "$dev")"
  [ -n "$shaper" ] || { echo "ecn_mark: $ns $dev has no tbf to read the link rate from" >&2; return 1; }
  bps="$(awk -v r="${shaper% *}" -v f="$fraction" 'BEGIN { printf "%d", r * 8 * f }')"
  burst="${shaper#* }"
  object="$(ecn_marker_object "$bps" "$threshold" "$burst")" || return 1
  clsact "$ns" "$dev"
  ip netns exec "$ns" tc filter replace dev "$dev" egress prio 1 handle 1 bpf direct-action obj "$object" sec tc
}

# tbf_options NS DEV: DEV's tbf as the kernel keeps it, "RATE BURST" (bytes per second, bytes), or nothing where DEV
# has no tbf.
tbf_options() {
  ip netns exec "$1" tc -j qdisc show dev "$2" | "${NETREDUCE_PYTHON:-python3}" -c '
import json, sys
tbf = [q["options"] for q in json.load(sys.stdin) if q.get("kind") == "tbf"]
print(str(tbf[0]["rate"]) + " " + str(tbf[0]["burst"]) if tbf else "")'
}

# ecn_unmark NS DEV: take the marker off DEV (nothing to do where there is none); checks that no egress bpf filter is
# left and tries once more if one is, as benches have found markers still attached after an `ecn off` under load
# (cause not found). Returns 1, saying so, when one will not come off.
ecn_unmark() {
  local ns="$1" dev="$2" try filters
  for try in 1 2 3; do
    ip netns exec "$ns" tc filter del dev "$dev" egress prio 1 2>/dev/null || true
    # captured, not piped into grep -q: under pipefail an early exit of grep can fail the pipeline
    filters="$(ip netns exec "$ns" tc filter show dev "$dev" egress 2>/dev/null || true)"
    [[ "$filters" == *bpf* ]] || return 0
    sleep 0.1
  done
  echo "ecn_unmark: $ns $dev: the ECN marker will not come off: $filters" >&2
  return 1
}

# ecn_marker_object BPS THRESHOLD BURST: the marker built for a drain rate, threshold and bucket (cached); prints its
# path.
ecn_marker_object() {
  local bps="$1" threshold="$2" burst="$3" dir="${TMPDIR:-/tmp}/netreduce-ecn-marker" src object
  src="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/ecn_marker.c"
  object="$dir/ecn_marker-$bps-$threshold-$burst-$(md5sum < "$src" | cut -c1-8).o"
  if [ ! -s "$object" ]; then
    command -v clang >/dev/null || { echo "ecn_mark: needs clang (apt-get install clang libbpf-dev)" >&2; return 1; }
    mkdir -p "$dir"
    clang -O2 -g -target bpf -I"/usr/include/$(uname -m)-linux-gnu" -DRATE_BPS="${bps}ULL" \
      -DTHRESHOLD="${threshold}ULL" -DBURST_BYTES="${burst}ULL" -c "$src" -o "$object.tmp$$" &&
      mv "$object.tmp$$" "$object" || return 1
  fi
  echo "$object"
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

# in_order_rx NS DEV: a link does not reorder a flow; a veth behind a shaper can. tbf sends its frames on whichever
# CPU its timer or the next enqueue runs, and veth queues each frame on the backlog of the CPU that sent it
# (netif_rx); each CPU drains its own backlog, and when one CPU's softirq work is deferred to ksoftirqd (which
# competes with the busy processes), frames on the other CPU overtake it. RoCE's go-back-N takes every overtaking
# as a loss (a NAK, and a resend of everything from the gap): on the 1 Gbit/s bed, 2774-7598 packets per run of
# ten 64 MiB all-reduces were resent with none lost. Receive packet steering to one CPU puts everything arriving
# on DEV on one backlog, in order (0 resent in the same runs); devices are spread over the CPUs round robin. Only
# behind shapers: it costs an inter-processor interrupt per backlog run, which unshaped (CPU-bound) beds cannot
# spare and where nothing was seen to be reordered.
_in_order_rx_next=0
in_order_rx() {
  local ns="$1" dev="$2" q mask
  mask="$(printf '%x' $((1 << (_in_order_rx_next % $(nproc)))))"
  _in_order_rx_next=$((_in_order_rx_next + 1))
  for q in $(ip netns exec "$ns" sh -c "ls -d /sys/class/net/$dev/queues/rx-* 2>/dev/null"); do
    ip netns exec "$ns" sh -c "echo $mask > $q/rps_cpus" 2>/dev/null ||
      echo "testbed: warning: cannot steer $ns $dev to one CPU (rps_cpus): its frames may be reordered" >&2
  done
}

# worker_tx_offload NS DEV: a worker's interface keeps veth's transmit offloads (checksum, and with it TCP and UDP
# segmentation), as every NIC a trainer runs on has them: TCP (gloo) hands the kernel 64 KiB segments and no
# checksum work, as it would hand a NIC. Until 2026-11-25 the bed turned them off (ethtool -K eth0 tx off, from the
# first bed, when a raw re-emitter could not complete a partial checksum; the appliance completes them now,
# counted as pass_through_checksum_completed), which made every worker segment and checksum its TCP in software:
# gloo unshaped took 180 ms per 64 MiB call with them off and 131 ms with them on (docs/performance.md).
# NETREDUCE_BED_WORKER_TX=off keeps the old bed.
worker_tx_offload() {
  if [ "${NETREDUCE_BED_WORKER_TX:-on}" = off ]; then
    ip netns exec "$1" ethtool -K "$2" tx off >/dev/null 2>&1 || true
  fi
}

# wire_frames_to NS DEV: what leaves DEV are wire frames, as on a link from a NIC. veth carries a UDP segmentation
# offload frame (a batch of RoCE packets from a port with segmentation offload) whole, where a NIC would have cut
# it into packets on the wire; with DEV's UDP segmentation off, the kernel cuts it when it leaves DEV. Used on the
# switch ports that face appliances: an appliance's receive ring is sized for wire frames (a leaf's batches to the
# spine, the spine's to a leaf, would otherwise arrive whole and be counted rx_truncated).
wire_frames_to() {
  ip netns exec "$1" ethtool -K "$2" tx-udp-segmentation off >/dev/null || {
    echo "testbed: cannot turn UDP segmentation off on $1 $2 (ethtool; scripts/setup.sh installs it)" >&2
    return 1
  }
}

#!/usr/bin/env bash
# Builds the published SwitchML DPDK client (p4app-switchML's client_lib and its allreduce_benchmark) on
# Debian 12's DPDK 22.11, and writes switchml.cfg files for running it in a network namespace of the test bed.
# No upstream source is kept in this repository: `build` copies a checkout, patches the copy with sed (renames
# for DPDK 22.11 and glog 0.6, listed below with the reason for each) and builds it. See docs/interop.md,
# "The published SwitchML client".
#
# usage: scripts/interop/switchml-client.sh build  [--source DIR] [--out DIR] [--any-commit]
#        scripts/interop/switchml-client.sh config --rank R --workers W --worker-ip IP --tap NAME
#                 --controller IP:PORT --numel N [--out FILE] [--mac MAC] [--core C] [--worker-port P]
#                 [--timeout-ms T] [--outstanding K] [--remote DEV]
#        scripts/interop/switchml-client.sh attach --netns NS --tap NAME [--dev DEV] [--worker-port P]
#        scripts/interop/switchml-client.sh detach --netns NS --tap NAME [--dev DEV]
#        scripts/interop/switchml-client.sh path   [--out DIR]      (prints the benchmark binary's path)
#
# build: installs the Debian packages it needs (only those missing; apt-get, as root), takes the upstream
#   source from DIR (a p4app-switchML checkout at b5c74a0; get one with
#     git clone https://github.com/p4lang/p4app-switchML && git -C p4app-switchML checkout b5c74a0
#   ) or, without --source, from $NETREDUCE_SWITCHML_SOURCE or the bare mirror $NETREDUCE_SWITCHML_MIRROR
#   (default /work/.mirror/p4lang+p4app-switchML/repo, `git archive b5c74a0`), copies it to OUT/src (OUT:
#   /var/tmp/netreduce-switchml-client unless --out), patches the copy, builds client_lib (DPDK backend,
#   timeouts/retransmissions on, dummy backend kept, no VCL) and benchmarks/allreduce_benchmark into OUT/build
#   with make -j${NETREDUCE_SWITCHML_JOBS:-2}, and prints the benchmark's path (OUT/build/bin/allreduce_benchmark)
#   on stdout (everything else goes to stderr).
#   A checkout at another commit is refused unless --any-commit (the seds are checked and fail loudly if a
#   pattern is gone). Re-running rebuilds from a fresh copy (idempotent).
# config: writes a switchml.cfg (FILE, default ./switchml.cfg; the client reads /etc/switchml.cfg, else
#   ./switchml.cfg of its working directory, else ./switchml-<hostname>.cfg) for one worker in a namespace:
#   backend dpdk, one worker thread on core C (default: R modulo the number of CPUs), no hugepages
#   (--no-huge -m 512), no PCI, no shared EAL files (--no-shconf: several clients on one host), and a net_tap
#   vdev whose kernel interface is NAME, with MAC MAC (give the worker's eth0 MAC, as `attach` prints it;
#   without it the tap PMD picks a random one). N is packet_numel (elements per packet: 64 or 256 are what
#   the Tofino program takes), K max_outstanding_packets (256), T the retransmission timeout in ms (10), P the
#   worker's UDP port (4000). --remote DEV instead asks the tap PMD to attach itself to DEV (its "remote" mode:
#   needs the kernel's sch_multiq, cls_flower and act_skbedit, which this project's machines lack; untested).
# attach: joins the tap NAME to DEV (default eth0) in namespace NS before the client starts, with tc: creates
#   NAME (a persistent multi-queue tap that the tap PMD takes over), gives it DEV's MAC, no IPv6 (the kernel
#   stays silent on it: the client takes every frame the tap gives it for a SwitchML result), redirects all
#   that the client sends (NAME's ingress) out of DEV, and UDP to port P (4000) arriving on DEV to NAME; ARP
#   and everything else, the controller's gRPC among it, stays with DEV. Prints DEV's MAC (config --mac).
#   Idempotent. detach removes the tap and the filters attach added.
set -euo pipefail

UPSTREAM_COMMIT=b5c74a04fa66faa82acab154a4e21c8f76d913f2
DEFAULT_OUT=/var/tmp/netreduce-switchml-client
MIRROR="${NETREDUCE_SWITCHML_MIRROR:-/work/.mirror/p4lang+p4app-switchML/repo}"
JOBS="${NETREDUCE_SWITCHML_JOBS:-2}"
# What the build needs from Debian 12 (bookworm): DPDK 22.11 (headers, pkg-config file, shared PMDs such as
# net_tap), gRPC/protobuf (the client talks to the controller over gRPC; protoc + grpc_cpp_plugin generate
# its stubs), glog (+ gflags through it), Boost.Program_options (config file and benchmark options).
PACKAGES=(build-essential pkg-config libdpdk-dev libgrpc++-dev libprotobuf-dev protobuf-compiler
          protobuf-compiler-grpc libgoogle-glog-dev libboost-program-options-dev)

die() { echo "switchml-client: $*" >&2; exit 1; }

install_packages() {
  local missing=() p
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  [ "$(id -u)" -eq 0 ] || die "missing packages (${missing[*]}); run as root or install them"
  echo "switchml-client: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# sed -i EXPR FILE, then check with grep that the change happened (a pattern that no longer matches means the
# source is not the commit these renames were written for)
patch_file() { # file sed-expression grep-pattern-expected-after
  local file="$1" expr="$2" expect="$3"
  [ -f "$file" ] || die "patch: $file missing"
  sed -i -e "$expr" "$file"
  grep -q -e "$expect" "$file" || die "patch: '$expr' did not apply to $file"
}
absent() { # file grep-pattern: the pattern must be gone after patching
  ! grep -q -e "$2" "$1" || die "patch: '$2' still in $1"
}

patch_source() { # src: the copy's root (has dev_root/)
  local d="$1/dev_root/client_lib/src/backends/dpdk" g="$1/dev_root/client_lib/src/glog_fix.h"
  local mt="$d/dpdk_master_thread.cc" mtu="$d/dpdk_master_thread_utils.inc" wtu="$d/dpdk_worker_thread_utils.inc"
  # DPDK 20.11 renamed master/slave lcores to main/worker; 21.11 removed the old macro.
  patch_file "$mt" 's/RTE_LCORE_FOREACH_SLAVE/RTE_LCORE_FOREACH_WORKER/g' RTE_LCORE_FOREACH_WORKER
  # DPDK 21.11 renamed struct rte_ether_hdr's s_addr/d_addr to src_addr/dst_addr (only the Ethernet header's
  # fields: dpdk_backend.cc's in_addr.s_addr is not touched).
  patch_file "$wtu" 's/ether->s_addr\./ether->src_addr./g; s/ether->d_addr\./ether->dst_addr./g' 'ether->src_addr\.'
  absent "$wtu" 'ether->[sd]_addr\.'
  # DPDK 21.11 renamed the mbuf offload flags PKT_TX_* to RTE_MBUF_F_TX_*; 22.11 removed the old names.
  patch_file "$wtu" 's/\bPKT_TX_/RTE_MBUF_F_TX_/g' RTE_MBUF_F_TX_IP_CKSUM
  # DPDK 21.11 gave the ethdev offload/mode/link names the RTE_ETH_ prefix; 22.11 removed the old names.
  patch_file "$mtu" 's/\bDEV_RX_OFFLOAD_/RTE_ETH_RX_OFFLOAD_/g; s/\bDEV_TX_OFFLOAD_/RTE_ETH_TX_OFFLOAD_/g' RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE
  patch_file "$mtu" 's/\bETH_MQ_TX_NONE\b/RTE_ETH_MQ_TX_NONE/g' RTE_ETH_MQ_TX_NONE
  patch_file "$mtu" 's/\bETH_LINK_FULL_DUPLEX\b/RTE_ETH_LINK_FULL_DUPLEX/g' RTE_ETH_LINK_FULL_DUPLEX
  # DPDK 22.11 removed rte_eth_rxmode.split_hdr_size (it was 0 here, i.e. no header split: nothing lost).
  sed -i -e '/rxm\.split_hdr_size = 0;/d' "$mtu"
  absent "$mtu" 'split_hdr_size'
  # DPDK 22.11 removed rte_eth_conf.fdir_conf (the legacy flow director). The client steers its UDP port to
  # its queue with rte_flow (InsertFlowRule), which stays; the two commented-out fdir lines go too.
  sed -i -e '/port_conf\.fdir_conf\./d' "$mtu"
  absent "$mtu" 'fdir_conf'
  # glog 0.6 exports IsGoogleLoggingInitialized() in namespace google; the glog_internal_namespace_ symbol the
  # client declared itself (a workaround for glog <= 0.4) is no longer exported, so the link failed.
  patch_file "$g" 's/google::glog_internal_namespace_::IsGoogleLoggingInitialized/google::IsGoogleLoggingInitialized/g' \
    'if(!google::IsGoogleLoggingInitialized())'
}

# Stand-ins for what the upstream Makefiles expect of a DPDK <= 20.02 source tree (legacy make build):
# client_lib includes $(RTE_SDK)/mk/rte.vars.mk and rte.extlib.mk to compile its sources into
# $(RTE_OUTPUT)/$(LIB); the benchmark links -ldpdk from $(DPDK_HOME)/lib. Here both come from Debian's
# pkg-config file for DPDK 22.11 (shared libraries; the PMDs, net_tap among them, load as plugins).
write_shim() { # dir
  local shim="$1"
  mkdir -p "$shim/mk" "$shim/lib"
  cat > "$shim/mk/rte.vars.mk" <<'EOF'
# netreduce shim for p4app-switchML's client_lib Makefile: DPDK's compile flags from pkg-config
RTE_OUTPUT ?= $(BUILDDIR)/rte-output
CXXFLAGS += $(shell pkg-config --cflags libdpdk)
EOF
  cat > "$shim/mk/rte.extlib.mk" <<'EOF'
# netreduce shim for p4app-switchML's client_lib Makefile: builds $(SRCS-y) into $(RTE_OUTPUT)/$(LIB) as DPDK's
# legacy rte.extlib.mk did; `clean` (which the Makefile runs before copying the library) removes the objects.
SHIM_SRCS := $(sort $(abspath $(SRCS-y)))
SHIM_OBJS := $(patsubst $(abspath $(SRCDIR_))/%.cc,$(RTE_OUTPUT)/obj/%.o,$(SHIM_SRCS))
.PHONY: _postbuild clean
_postbuild: $(RTE_OUTPUT)/$(LIB)
$(RTE_OUTPUT)/$(LIB): $(SHIM_OBJS)
	$(AR) rcs $@ $^
# the gRPC stubs are generated by the Makefile's `protos` target, which every object waits for
$(abspath $(SRCDIR_))/switchml.pb.cc $(abspath $(SRCDIR_))/switchml.grpc.pb.cc: | $(PROTOS) ;
$(RTE_OUTPUT)/obj/%.o: $(abspath $(SRCDIR_))/%.cc | $(PROTOS)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -c $< -o $@
clean:
	$(RM) -r $(RTE_OUTPUT)/obj
EOF
  # -ldpdk: a linker script naming the DPDK libraries pkg-config lists
  printf '/* netreduce shim: -ldpdk for p4app-switchML benchmarks */\nINPUT(%s)\n' \
    "$(pkg-config --libs-only-l libdpdk)" > "$shim/lib/libdpdk.so"
}

build() {
  local source="" out="$DEFAULT_OUT" any_commit=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --source) source="$2"; shift 2 ;;
      --out) out="$2"; shift 2 ;;
      --any-commit) any_commit=1; shift ;;
      *) die "build: unknown option $1" ;;
    esac
  done
  [ -n "$source" ] || source="${NETREDUCE_SWITCHML_SOURCE:-}"
  local started=$SECONDS
  install_packages >&2   # stdout: only the binary's path, for bin=$(... build)
  mkdir -p "$out"
  out="$(cd "$out" && pwd)"
  rm -rf "$out/src" "$out/build" "$out/dpdk-shim"
  mkdir -p "$out/src"
  if [ -n "$source" ]; then
    [ -d "$source/dev_root/client_lib" ] || die "$source is not a p4app-switchML checkout (no dev_root/client_lib)"
    if git -C "$source" rev-parse HEAD >/dev/null 2>&1; then
      local head
      head="$(git -C "$source" rev-parse HEAD)"
      if [ "$head" != "$UPSTREAM_COMMIT" ]; then
        [ "$any_commit" = 1 ] || die "$source is at $head, not $UPSTREAM_COMMIT (git -C $source checkout b5c74a0, or --any-commit)"
        echo "switchml-client: warning: building $head, not $UPSTREAM_COMMIT" >&2
      fi
    else
      echo "switchml-client: warning: $source is not a git checkout; cannot check that it is $UPSTREAM_COMMIT" >&2
    fi
    tar -C "$source" --exclude=.git -cf - . | tar -C "$out/src" -xf -
  else
    [ -d "$MIRROR" ] || die "no --source DIR and no mirror at $MIRROR (see the usage at the top of $0)"
    git -C "$MIRROR" archive "$UPSTREAM_COMMIT" | tar -x -C "$out/src"
  fi
  echo "$UPSTREAM_COMMIT" > "$out/src/UPSTREAM_COMMIT"
  patch_source "$out/src"
  write_shim "$out/dpdk-shim"
  local dev="$out/src/dev_root"
  # client_lib: DPDK backend, retransmissions (TIMEOUTS, its default), dummy backend kept (its default), VCL off
  # (the vectorclass submodule is not fetched; the quantizer has a scalar path). GRPC_HOME=/usr: Debian's
  # protoc, grpc_cpp_plugin and headers. The Makefile's version string calls git; the copy has no .git.
  make -C "$dev/client_lib" -j"$JOBS" DPDK=1 TIMEOUTS=1 VCL=0 BUILDDIR="$out/build" \
    DPDK_SDK="$out/dpdk-shim" GRPC_HOME=/usr 2> >(grep -v '^fatal: not a git repository' >&2) >&2
  # Debian's gcc links with --as-needed: the DPDK libraries (-ldpdk, named before libswitchml-client.a that uses
  # them) would be dropped. The benchmark's link line starts with $(CXXFLAGS), which takes the environment's.
  CXXFLAGS="-Wl,--no-as-needed" \
  make -C "$dev/benchmarks" -j"$JOBS" allreduce_benchmark DPDK=1 BUILDDIR="$out/build" \
    SWITCHML_HOME="$out/build" DPDK_HOME="$out/dpdk-shim" GRPC_HOME=/usr >&2
  local bin="$out/build/bin/allreduce_benchmark"
  [ -x "$bin" ] || die "build finished without $bin"
  echo "switchml-client: built in $((SECONDS - started)) s (upstream $UPSTREAM_COMMIT)" >&2
  echo "$bin"
}

config() {
  local rank="" workers="" worker_ip="" tap="" controller="" numel="" file="./switchml.cfg" remote="" core=""
  local worker_port=4000 timeout_ms=10 outstanding=256 mac=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --rank) rank="$2"; shift 2 ;;
      --workers) workers="$2"; shift 2 ;;
      --worker-ip) worker_ip="$2"; shift 2 ;;
      --tap) tap="$2"; shift 2 ;;
      --controller) controller="$2"; shift 2 ;;
      --numel) numel="$2"; shift 2 ;;
      --out) file="$2"; shift 2 ;;
      --remote) remote="$2"; shift 2 ;;
      --core) core="$2"; shift 2 ;;
      --worker-port) worker_port="$2"; shift 2 ;;
      --timeout-ms) timeout_ms="$2"; shift 2 ;;
      --outstanding) outstanding="$2"; shift 2 ;;
      --mac) mac="$2"; shift 2 ;;
      *) die "config: unknown option $1" ;;
    esac
  done
  [ -n "$rank" ] && [ -n "$workers" ] && [ -n "$worker_ip" ] && [ -n "$tap" ] && [ -n "$controller" ] \
    && [ -n "$numel" ] || die "config needs --rank --workers --worker-ip --tap --controller --numel"
  [[ "$rank" =~ ^[0-9]+$ && "$workers" =~ ^[0-9]+$ && "$rank" -lt "$workers" ]] || die "config: rank must be 0..workers-1"
  [[ "$controller" =~ ^([0-9.]+):([0-9]+)$ ]] || die "config: --controller IP:PORT"
  local controller_ip="${BASH_REMATCH[1]}" controller_port="${BASH_REMATCH[2]}"
  [[ "$numel" =~ ^[0-9]+$ && "$numel" -gt 0 ]] || die "config: --numel N"
  [ "${#tap}" -le 15 ] || die "config: tap name '$tap' longer than 15 characters"
  [ -n "$core" ] || core=$((rank % $(nproc)))
  # The tap PMD: iface= names the kernel side, mac= its MAC (the client's source MAC), remote= see the usage.
  # Upstream splits extra_eal_options on single spaces, so no doubled spaces here.
  local vdev="--vdev=net_tap0,iface=$tap"
  if [ -n "$remote" ]; then vdev+=",remote=$remote"
  elif [ -n "$mac" ]; then vdev+=",mac=$mac"
  else echo "switchml-client: warning: no --mac: the tap PMD will pick a random MAC" >&2
  fi
  mkdir -p "$(dirname "$file")"
  cat > "$file.tmp" <<EOF
# switchml.cfg written by netreduce scripts/interop/switchml-client.sh config (one worker in a namespace)
[general]
rank = $rank
num_workers = $workers
num_worker_threads = 1
max_outstanding_packets = $outstanding
packet_numel = $numel
backend = dpdk
scheduler = fifo
prepostprocessor = cpu_exponent_quantizer
instant_job_completion = false
controller_ip = $controller_ip
controller_port = $controller_port
timeout = $timeout_ms
timeout_threshold = 100
timeout_threshold_increment = 100

[backend.dpdk]
worker_port = $worker_port
worker_ip = $worker_ip
cores = $core
extra_eal_options = --no-huge -m 512 --no-pci --no-shconf --no-telemetry $vdev
port_id = 0
pool_size = 8191
pool_cache_size = 256
burst_rx = 64
burst_tx = 64
bulk_drain_tx_us = 10
EOF
  mv "$file.tmp" "$file"
  echo "$file"
}

ATTACH_PRIO=9    # before the bed's own filters on DEV (testbed.sh: 10-13, 13 sinking SwitchML results as a DPDK NIC would)

attach() {
  local ns="" tap="" dev=eth0 port=4000
  while [ $# -gt 0 ]; do
    case "$1" in
      --netns) ns="$2"; shift 2 ;;
      --tap) tap="$2"; shift 2 ;;
      --dev) dev="$2"; shift 2 ;;
      --worker-port) port="$2"; shift 2 ;;
      *) die "attach: unknown option $1" ;;
    esac
  done
  [ -n "$ns" ] && [ -n "$tap" ] || die "attach needs --netns NS --tap NAME"
  local x=(ip netns exec "$ns") mac
  mac="$("${x[@]}" cat "/sys/class/net/$dev/address")" || die "attach: no $dev in $ns"
  detach --netns "$ns" --tap "$tap" --dev "$dev"
  # multi_queue: the flags the tap PMD opens it with (TUNSETIFF fails on a tap made without them)
  "${x[@]}" ip tuntap add dev "$tap" mode tap multi_queue
  # Where the kernel has sch_multiq the tap PMD turns its flow support on and sets up the tap's qdiscs itself;
  # whether the redirect below survives that was not testable here: there, use config --remote DEV instead.
  if "${x[@]}" tc qdisc add dev "$tap" root handle 1: multiq 2>/dev/null; then
    "${x[@]}" ip link del "$tap"
    die "attach: this kernel has sch_multiq; the tap PMD would flush these filters: use config --remote $dev instead"
  fi
  "${x[@]}" sysctl -qw "net.ipv6.conf.$tap.disable_ipv6=1"
  "${x[@]}" ip link set "$tap" address "$mac" up
  # what the client sends enters the kernel as the tap's ingress: all of it leaves through DEV
  "${x[@]}" tc qdisc add dev "$tap" ingress
  "${x[@]}" tc filter add dev "$tap" parent ffff: protocol all prio 1 u32 match u32 0 0 \
    action mirred egress redirect dev "$dev"
  # results (UDP to the worker port) arriving on DEV go to the client, nothing else does
  # (DEV has an ingress or, on the bed, a clsact qdisc already: the `ingress` hook names either)
  "${x[@]}" tc qdisc add dev "$dev" ingress 2>/dev/null || true
  "${x[@]}" tc filter add dev "$dev" ingress protocol ip prio "$ATTACH_PRIO" u32 \
    match ip protocol 17 0xff match ip dport "$port" 0xffff action mirred egress redirect dev "$tap"
  echo "$mac"
}

detach() {
  local ns="" tap="" dev=eth0
  while [ $# -gt 0 ]; do
    case "$1" in
      --netns) ns="$2"; shift 2 ;;
      --tap) tap="$2"; shift 2 ;;
      --dev) dev="$2"; shift 2 ;;
      *) die "detach: unknown option $1" ;;
    esac
  done
  [ -n "$ns" ] && [ -n "$tap" ] || die "detach needs --netns NS --tap NAME"
  ip netns exec "$ns" tc filter del dev "$dev" ingress prio "$ATTACH_PRIO" 2>/dev/null || true
  ip -n "$ns" link del "$tap" 2>/dev/null || true
}

cmd="${1:-}"
[ -n "$cmd" ] && shift
case "$cmd" in
  build) build "$@" ;;
  config) config "$@" ;;
  attach) attach "$@" ;;
  detach) detach "$@" ;;
  path)
    out="$DEFAULT_OUT"
    [ "${1:-}" = --out ] && out="$2"
    [ -x "$out/build/bin/allreduce_benchmark" ] || die "not built in $out (run: $0 build)"
    echo "$out/build/bin/allreduce_benchmark" ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2; exit 2 ;;
esac

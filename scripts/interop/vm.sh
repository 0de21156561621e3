#!/usr/bin/env bash
# Worker VMs (Linux soft-RoCE under QEMU/TCG) on the namespace test bed's switch (scripts/testbed.sh).
#
# usage: scripts/interop/vm.sh up   [-n VMS] [--prefix P] [--mem MIB] [--no-redirect] [--mtu MTU]
#        scripts/interop/vm.sh exec [--prefix P] [--timeout S] I 'shell commands'   (prints output, exits with rc)
#        scripts/interop/vm.sh start [--prefix P] I 'shell commands'               (prints a job id)
#        scripts/interop/vm.sh wait [--prefix P] [--timeout S] I ID                (prints output, exits with rc)
#        scripts/interop/vm.sh redirect on|off [--prefix P]
#        scripts/interop/vm.sh down [--prefix P]
#        scripts/interop/vm.sh status [--prefix P]
#        scripts/interop/vm.sh appliance-up [--prefix P] [--mem MIB] [--smp N] [--mtu MTU]
#
# appliance-up boots one more VM, "app", as the test bed's appliance: its PID 1 is systemd (the same image), its
# NIC's tap app-vm is in the appliance namespace P-app and wired both ways to that namespace's eth0 (tc mirred),
# so the VM's eth0 is the appliance port (no address; net.ifnames=0 keeps udev from renaming it ens6); the host's JDK is shared read-only at
# /usr/lib/jvm/temurin-25-jdk-amd64 (the shipped netreduce.env's JAVA_HOME). exec/start/wait take "app" as I.
#
# VM i (0-based) is 10.77.0.(101+i)/24 with MAC 02:77:00:00:00:(101+i in hex), on tap sw-vm<i> in the switch
# namespace P-sw (bridge br0), which `testbed.sh up --prefix P` must have made. QEMU runs inside that
# namespace (`ip netns exec`), so its tap is born there. Like the test bed's worker ports, each VM port
# redirects UDP 4791 to the appliance port sw-app (unless --no-redirect) and has a static FDB entry.
# Each VM boots the cached image (build-image.sh) through its own qcow2 overlay, 1 vCPU, MIB MiB (512).
# The repository is shared read-only at /nr/src in every VM; commands go through /nr/ctl (see guest/nr-agent).
# State (overlays, consoles, command dirs): /run/netreduce-interop/P/vm<i>/.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$here/../.." && pwd)"
source "$repo_root/scripts/lib/emulation.sh"
cache="${NETREDUCE_INTEROP_CACHE:-/var/cache/netreduce-interop}"
# virtio's event index (VIRTIO_RING_F_EVENT_IDX) off on the VMs' NICs: with it, under TCG and 1 % loss (rxe
# retransmitting in bursts), a guest's NIC stopped sending for good: its qdisc held hundreds of frames the
# device never took, the host tap's counters stood still, and later even TCP between the VMs failed; each
# all-reduce froze waiting for one rank's packet that never left its VM (docs/interop.md). Without it the guest
# kicks the device for every batch and the device interrupts for every completion. NETREDUCE_VM_EVENT_IDX=on
# brings the old behaviour back (to reproduce it).
event_idx="${NETREDUCE_VM_EVENT_IDX:-off}"
case "$event_idx" in on|off) ;; *) echo "vm: NETREDUCE_VM_EVENT_IDX must be on or off" >&2; exit 2 ;; esac

cmd="${1:-}"
[ -n "$cmd" ] && shift
vms=2
prefix="nri"
mem=""
smp=""
mtu=""
redirect=1
timeout=300
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    -n|--vms) vms="$2"; shift 2 ;;
    --prefix) prefix="$2"; shift 2 ;;
    --mem) mem="$2"; shift 2 ;;
    --smp) smp="$2"; shift 2 ;;
    --mtu) mtu="$2"; shift 2 ;;
    --no-redirect) redirect=0; shift ;;
    --timeout) timeout="$2"; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done

sw="${prefix}-sw"
state="/run/netreduce-interop/${prefix}"

vm_ip() { echo "10.77.0.$(( $1 + 101 ))"; }
vm_mac() { printf '02:77:00:00:00:%02x' $(( $1 + 101 )); }
vm_tap() { echo "sw-vm$1"; }
vm_dir() { if [ "$1" = app ]; then echo "$state/app"; else echo "$state/vm$1"; fi; }
app_ns="${prefix}-app"
APP_VM_MAC=02:77:00:00:00:f0
APP_JDK=/usr/lib/jvm/temurin-25-jdk-amd64
# The appliance VM's CPU model. With -cpu max, QEMU 7.2's TCG crashed the JVM in about half the daemon's starts
# (SIGSEGV or SIGILL in C1-compiled code: Unsafe.getIntUnaligned, VarHandleSegmentAsFloats.get; the unit restarted
# it each time). NETREDUCE_APP_VM_CPU picks another model, e.g. Nehalem (SSE4.2, no AVX); tried, it crashed as
# often (2 of 4 starts, in C1-compiled Vector API code), so the default stays max.
app_cpu="${NETREDUCE_APP_VM_CPU:-max}"
vm_count() { ls -d "$state"/vm* 2>/dev/null | wc -l; }

die() { echo "vm: $*" >&2; exit 1; }

redirect_on() { # the same ACL as testbed.sh's worker ports: UDP 4791 in -> appliance port
  redirect_off "$1"
  redirect_roce_into "$sw" "$1" sw-app
}

redirect_off() {
  ip netns exec "$sw" tc qdisc del dev "$1" ingress 2>/dev/null || true
}

# Run a script in VM i through its command directory; prints the job id.
start_job() {
  local i="$1" script="$2" ctl id
  ctl="$(vm_dir "$i")/ctl"
  [ -f "$ctl/ready" ] || die "vm$i is not up (prefix $prefix)"
  id="j$(date +%s%N)$$"
  printf '%s\n' "$script" > "$ctl/$id.tmp"
  mv "$ctl/$id.tmp" "$ctl/cmd/$id.sh"
  echo "$id"
}

wait_job() {
  local i="$1" id="$2" ctl deadline rc
  ctl="$(vm_dir "$i")/ctl"
  deadline=$(( $(date +%s) + timeout ))
  while [ ! -f "$ctl/out/$id.rc" ]; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      [ -f "$ctl/out/$id.out" ] && cat "$ctl/out/$id.out"
      echo "vm: vm$i job $id timed out after ${timeout}s" >&2
      return 124
    fi
    sleep 0.2
  done
  cat "$ctl/out/$id.out"
  rc="$(cat "$ctl/out/$id.rc")"
  rm -f "$ctl/out/$id.out" "$ctl/out/$id.rc" "$ctl/run/$id.sh"
  return "$rc"
}

down() {
  local d pid i
  for d in "$state"/vm* "$state"/app; do
    [ -d "$d" ] || continue
    if [ -f "$d/pid" ]; then
      pid="$(cat "$d/pid")"
      if kill -0 "$pid" 2>/dev/null && grep -q qemu "/proc/$pid/comm" 2>/dev/null; then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
      fi
    fi
    if [ "$d" = "$state/app" ]; then
      ip netns exec "$app_ns" tc qdisc del dev eth0 ingress 2>/dev/null || true
      ip netns exec "$app_ns" ip link del app-vm 2>/dev/null || true
    else
      i="${d##*/vm}"
      ip netns exec "$sw" ip link del "$(vm_tap "$i")" 2>/dev/null || true
    fi
    rm -rf "$d"
  done
  rmdir "$state" 2>/dev/null || true
}

up() {
  ip netns list | awk '{print $1}' | grep -qx "$sw" \
    || die "switch namespace $sw missing: run scripts/testbed.sh up --prefix $prefix first"
  [ "$vms" -ge 1 ] && [ "$vms" -le 16 ] || die "VMS must be 1..16"
  local img
  img="$(readlink -f "$cache/current" 2>/dev/null || true)"
  [ -f "$img/.done" ] || die "no image in $cache: run scripts/interop/build-image.sh"
  [ -n "$mtu" ] || mtu="$(ip netns exec "$sw" cat /sys/class/net/br0/mtu)"
  mem="${mem:-512}" smp="${smp:-1}"
  down
  mkdir -p "$state"
  local t0 i d tap
  t0=$(date +%s.%N)
  for i in $(seq 0 $(( vms - 1 ))); do
    d="$(vm_dir "$i")"
    tap="$(vm_tap "$i")"
    mkdir -p "$d/ctl"
    qemu-img create -q -f qcow2 -F raw -b "$img/rootfs.img" "$d/overlay.qcow2"
    ip netns exec "$sw" qemu-system-x86_64 -accel tcg -cpu max -smp "$smp" -m "$mem" \
      -name "${prefix}-vm$i" -daemonize -pidfile "$d/pid" -display none -monitor none -no-reboot \
      -serial "file:$d/console.log" \
      -kernel "$img/vmlinuz" -initrd "$img/initrd.img" \
      -append "console=ttyS0 root=/dev/vda rw init=/sbin/nr-init panic=-1 nr.name=${prefix}-vm$i nr.ip=$(vm_ip "$i")/24 nr.mtu=$mtu" \
      -drive "file=$d/overlay.qcow2,if=virtio,format=qcow2,cache=unsafe" \
      -fsdev "local,id=ctl,path=$d/ctl,security_model=none" -device virtio-9p-pci,fsdev=ctl,mount_tag=nrctl \
      -fsdev "local,id=src,path=$repo_root,security_model=none,readonly=on" \
      -device virtio-9p-pci,fsdev=src,mount_tag=nrsrc \
      -netdev "tap,id=n0,ifname=$tap,script=no,downscript=no" \
      -device "virtio-net-pci,netdev=n0,mac=$(vm_mac "$i"),event_idx=$event_idx"
    # A long tap queue stands in for a lossless (PFC) fabric: a TCG guest drains its tap slowly, and with the
    # default 1000 frames a burst (ib_write_bw keeps 128 x 64 KiB in flight; the appliance forwards in batches)
    # overflowed it, so rxe spent seconds in timeouts and go-back-N, or stalled (docs/interop.md).
    ip netns exec "$sw" ip link set "$tap" mtu "$mtu" txqueuelen 20000 master br0 up
    ip netns exec "$sw" bridge fdb replace "$(vm_mac "$i")" dev "$tap" master static
    if [ "$redirect" = 1 ]; then redirect_on "$tap"; fi
  done
  for i in $(seq 0 $(( vms - 1 ))); do
    d="$(vm_dir "$i")"
    for _ in $(seq 1200); do [ -f "$d/ctl/ready" ] && break; sleep 0.1; done
    [ -f "$d/ctl/ready" ] || { tail -20 "$d/console.log" >&2; die "vm$i did not boot within 120 s"; }
  done
  # Static neighbours between the VMs: RoCE endpoints resolve peers out of band, as on the test bed.
  local script j jobs=()
  for i in $(seq 0 $(( vms - 1 ))); do
    script=""
    for j in $(seq 0 $(( vms - 1 ))); do
      [ "$i" = "$j" ] && continue
      script+="ip neigh replace $(vm_ip "$j") lladdr $(vm_mac "$j") dev eth0 nud permanent"$'\n'
    done
    script+="ibv_devices | grep -q rxe0"
    jobs+=("$(start_job "$i" "$script")")
  done
  for i in $(seq 0 $(( vms - 1 ))); do
    wait_job "$i" "${jobs[$i]}" || die "vm$i: neighbour setup or rxe0 check failed"
  done
  printf 'vm %s: %d VMs up in %.1f s (redirect %s, mtu %s)\n' "$prefix" "$vms" \
    "$(echo "$(date +%s.%N) - $t0" | bc)" "$([ "$redirect" = 1 ] && echo on || echo off)" "$mtu"
  for i in $(seq 0 $(( vms - 1 ))); do
    echo "  vm$i $(vm_ip "$i") $(vm_mac "$i") tap $(vm_tap "$i") boot $(cat "$(vm_dir "$i")/ctl/ready") s"
  done
}

app_up() {
  ip netns list | awk '{print $1}' | grep -qx "$app_ns" \
    || die "appliance namespace $app_ns missing: run scripts/testbed.sh up --prefix $prefix first"
  local img d jdk t0
  img="$(readlink -f "$cache/current" 2>/dev/null || true)"
  [ -f "$img/.done" ] || die "no image in $cache: run scripts/interop/build-image.sh"
  jdk="$(readlink -f "${JAVA_HOME:-$APP_JDK}")"
  [ -x "$jdk/bin/java" ] || die "no JDK at $jdk (JAVA_HOME) to share with the VM"
  [ -n "$mtu" ] || mtu="$(ip netns exec "$app_ns" cat /sys/class/net/eth0/mtu)"
  mem="${mem:-2048}" smp="${smp:-2}"
  d="$(vm_dir app)"
  if [ -f "$d/pid" ] && kill -0 "$(cat "$d/pid")" 2>/dev/null; then die "the appliance VM is already up"; fi
  rm -rf "$d"
  mkdir -p "$d/ctl"
  t0=$(date +%s.%N)
  qemu-img create -q -f qcow2 -F raw -b "$img/rootfs.img" "$d/overlay.qcow2"
  ip netns exec "$app_ns" qemu-system-x86_64 -accel tcg -cpu "$app_cpu" -smp "$smp" -m "$mem" \
    -name "${prefix}-app" -daemonize -pidfile "$d/pid" -display none -monitor none -no-reboot \
    -serial "file:$d/console.log" \
    -kernel "$img/vmlinuz" -initrd "$img/initrd.img" \
    -append "console=ttyS0 root=/dev/vda rw init=/lib/systemd/systemd net.ifnames=0 panic=-1 nr.name=${prefix}-app nr.ip= nr.rxe=0 nr.mtu=$mtu nr.jdk=$APP_JDK" \
    -drive "file=$d/overlay.qcow2,if=virtio,format=qcow2,cache=unsafe" \
    -fsdev "local,id=ctl,path=$d/ctl,security_model=none" -device virtio-9p-pci,fsdev=ctl,mount_tag=nrctl \
    -fsdev "local,id=src,path=$repo_root,security_model=none,readonly=on" \
    -device virtio-9p-pci,fsdev=src,mount_tag=nrsrc \
    -fsdev "local,id=jdk,path=$jdk,security_model=none,readonly=on" \
    -device virtio-9p-pci,fsdev=jdk,mount_tag=nrjdk \
    -netdev "tap,id=n0,ifname=app-vm,script=no,downscript=no" \
    -device "virtio-net-pci,netdev=n0,mac=$APP_VM_MAC,event_idx=$event_idx"
  # A wire between the namespace's eth0 (the switch's sw-app) and the VM: every frame either way, unchanged.
  ip netns exec "$app_ns" sysctl -qw net.ipv6.conf.app-vm.disable_ipv6=1
  ip netns exec "$app_ns" ip link set app-vm mtu "$mtu" txqueuelen 20000 up
  local from to
  for from in eth0 app-vm; do
    to=app-vm; [ "$from" = app-vm ] && to=eth0
    ip netns exec "$app_ns" tc qdisc del dev "$from" ingress 2>/dev/null || true
    ip netns exec "$app_ns" tc qdisc add dev "$from" ingress
    ip netns exec "$app_ns" tc filter add dev "$from" parent ffff: protocol all prio 1 u32 match u32 0 0 \
      action mirred egress redirect dev "$to"
  done
  # systemd under TCG: kernel, initrd, udev and the units take a few minutes with other VMs on the cores.
  for _ in $(seq 3000); do [ -f "$d/ctl/ready" ] && break; sleep 0.2; done
  [ -f "$d/ctl/ready" ] || { tail -30 "$d/console.log" >&2; die "the appliance VM did not boot within 600 s"; }
  printf 'vm %s: appliance VM up in %.1f s (systemd, -cpu %s, %s vCPU, %s MiB, mtu %s; agent ready at %s s of uptime)\n' \
    "$prefix" "$(echo "$(date +%s.%N) - $t0" | bc)" "$app_cpu" "$smp" "$mem" "$mtu" "$(cat "$d/ctl/ready")"
}

status() {
  local d
  for d in "$state"/vm*; do
    [ -d "$d" ] || { echo "vm $prefix: none"; return 0; }
    echo "${d##*/}: pid $(cat "$d/pid" 2>/dev/null || echo -) ready $(cat "$d/ctl/ready" 2>/dev/null || echo no)"
  done
  ip netns exec "$sw" bridge link show 2>/dev/null | grep sw-vm || true
}

case "$cmd" in
  up) up ;;
  appliance-up) app_up ;;
  down) down; echo "vm $prefix: down" ;;
  status) status ;;
  exec)
    [ "${#args[@]}" = 2 ] || die "exec needs I and a command"
    id="$(start_job "${args[0]}" "${args[1]}")"
    wait_job "${args[0]}" "$id" ;;
  start)
    [ "${#args[@]}" = 2 ] || die "start needs I and a command"
    start_job "${args[0]}" "${args[1]}" ;;
  wait)
    [ "${#args[@]}" = 2 ] || die "wait needs I and a job id"
    wait_job "${args[0]}" "${args[1]}" ;;
  redirect)
    [ "${#args[@]}" = 1 ] || die "redirect needs on or off"
    for ((k = 0; k < $(vm_count); k++)); do
      if [ "${args[0]}" = on ]; then redirect_on "$(vm_tap "$k")"; else redirect_off "$(vm_tap "$k")"; fi
    done
    echo "vm $prefix: redirect ${args[0]}" ;;
  *) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac

#!/usr/bin/env bash
# Builds (once) and caches the Debian bookworm VM image the interop scenarios boot under QEMU:
# a kernel with rdma_rxe, rdma-core, perftest and pyverbs, and a tiny init that configures eth0 and rxe0
# from the kernel command line and then serves commands through a 9p shared directory (see guest/); systemd
# too (systemd-sysv), for the systemd scenario's VM, which boots it as PID 1 with the same setup as units.
#
# usage: scripts/interop/build-image.sh [--cache DIR] [--mirror URL] [--force] [--extra-packages "PKG ..."]
#                                       [--guest DIR]
#   --extra-packages  more Debian packages for the image (part of the cache key)
#   --guest DIR       the guest files (nr-init, nr-agent); default: guest/ beside this script, else the
#                     repository's scripts/interop/guest (so a copy of this script elsewhere still works)
#   DIR defaults to $NETREDUCE_INTEROP_CACHE or /var/cache/netreduce-interop (never inside the git tree).
# Output (printed, and linked as DIR/current): DIR/image-<key>/{vmlinuz,initrd.img,rootfs.img}.
# Cached in two stages: the debootstrapped root (rootfs-<key>, minutes; rebuilt when the package list or the
# stage-1 steps change) and the bootable image (image-<key>, seconds; rebuilt when this script or guest/ change).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${NETREDUCE_INTEROP_CACHE:-/var/cache/netreduce-interop}"
mirror=""
force=0
extra=""
guest=""
while [ $# -gt 0 ]; do
  case "$1" in
    --cache) cache="$2"; shift 2 ;;
    --mirror) mirror="$2"; shift 2 ;;
    --force) force=1; shift ;;
    --extra-packages) extra="$2"; shift 2 ;;
    --guest) guest="$2"; shift 2 ;;
    *) echo "build-image: unknown option $1" >&2; exit 2 ;;
  esac
done

[ "$(id -u)" = 0 ] || { echo "build-image: needs root (debootstrap, chroot): run it as root or with sudo" >&2; exit 1; }
repo_root="$(cd "$here/../.." && pwd)"
if [ -z "$guest" ]; then
  for candidate in "$here/guest" "${NETREDUCE_ROOT:-$repo_root}/scripts/interop/guest"; do
    if [ -f "$candidate/nr-init" ]; then guest="$candidate"; break; fi
  done
fi
[ -n "$guest" ] && [ -f "$guest/nr-init" ] && [ -f "$guest/nr-agent" ] || {
  echo "build-image: cannot find the guest files (nr-init, nr-agent); pass --guest DIR or set NETREDUCE_ROOT" >&2
  exit 2
}
case "$(readlink -f "$cache")/" in
  "$repo_root"/*) echo "build-image: cache $cache is inside the git tree; pick another" >&2; exit 2 ;;
esac

PACKAGES=(linux-image-amd64 initramfs-tools kmod iproute2 rdma-core ibverbs-utils perftest python3-pyverbs
          procps ethtool systemd-sysv)
# shellcheck disable=SC2206 # a space-separated package list
[ -n "$extra" ] && PACKAGES+=($extra)

# Two stages, cached separately: the debootstrapped root (slow: minutes; keyed by the package list and the
# stage-1 steps below) and the image made from it with the guest files (seconds; keyed by all of it).
base_key="$(sed -n '/^# stage 1 begin/,/^# stage 1 end/p' "$0" | cat - <(echo "${PACKAGES[*]}") | sha256sum | cut -c1-12)"
key="$(cat "$0" "$guest"/* <(echo "${PACKAGES[*]}") | sha256sum | cut -c1-12)"
base="$cache/rootfs-$base_key"
out="$cache/image-$key"
if [ "$force" = 0 ] && [ -f "$out/.done" ]; then
  ln -sfn "$out" "$cache/current"
  echo "$out"
  exit 0
fi

need=()
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v qemu-img >/dev/null || need+=(qemu-utils)
command -v bc >/dev/null || need+=(bc)
if [ "${#need[@]}" -gt 0 ]; then
  echo "build-image: installing ${need[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi

if [ -z "$mirror" ]; then
  # The mirror the host's apt already uses, so the build reaches what this machine reaches.
  mirror="$(grep -rhE '^[[:space:]]*(deb|URIs:)[[:space:]]' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
            | grep -oE 'https?://[^ ]+/debian/?( |$)' | grep -v security | head -1 | tr -d ' ' || true)"
  mirror="${mirror:-http://deb.debian.org/debian}"
fi

mkdir -p "$cache/debs"
work="$cache/build-$$"
cleanup() {
  for m in proc sys dev; do umount -l "$work/rootfs/$m" 2>/dev/null || true; done
  rm -rf "$work" "$work.log"
}
trap cleanup EXIT
t0=$(date +%s)

# stage 1 begin
if [ "$force" = 1 ] || [ ! -f "$base/.done" ]; then
  rootfs="$work/rootfs"
  mkdir -p "$rootfs"
  echo "build-image: debootstrap bookworm from $mirror into $rootfs" >&2
  debootstrap --variant=minbase --cache-dir="$cache/debs" \
    --include="$(IFS=,; echo "${PACKAGES[*]}")" bookworm "$rootfs" "$mirror" >"$work.log" 2>&1 \
    || { tail -30 "$work.log" >&2; echo "build-image: debootstrap failed" >&2; exit 1; }
  echo "build-image: debootstrap took $(( $(date +%s) - t0 )) s" >&2
  # MODULES=dep would inspect the build host, which is wrong here; list what the guest's root needs instead.
  printf 'virtio_pci\nvirtio_blk\next4\n' >> "$rootfs/etc/initramfs-tools/modules"
  sed -i 's/^MODULES=.*/MODULES=list/' "$rootfs/etc/initramfs-tools/initramfs.conf"
  # Trim what a headless VM never loads, to keep the image (and every boot's page cache) small.
  kver="$(ls "$rootfs/lib/modules" | sort -V | tail -1)"
  moddir="$rootfs/lib/modules/$kver/kernel"
  rm -rf "$moddir"/drivers/{gpu,media,net/wireless,staging,bluetooth,iio,input/touchscreen,hid,usb,scsi,md,mmc,sound} \
         "$moddir"/sound "$moddir"/net/{wireless,bluetooth,mac80211} \
         "$moddir"/drivers/infiniband/hw "$moddir"/drivers/net/ethernet/{mellanox,intel,broadcom,chelsio,qlogic} \
         "$rootfs"/usr/share/{doc,man,info,locale} "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/lib/apt/lists/*
  for m in proc sys dev; do mount --bind "/$m" "$rootfs/$m"; done
  chroot "$rootfs" depmod -a "$kver"
  chroot "$rootfs" update-initramfs -u -k "$kver" >/dev/null 2>&1
  for m in dev sys proc; do umount -l "$rootfs/$m"; done
  for need_mod in rdma_rxe ib_uverbs 9p 9pnet_virtio virtio_net; do
    find "$rootfs/lib/modules/$kver" -name "$need_mod.ko*" | grep -q . \
      || { echo "build-image: module $need_mod missing from $kver" >&2; exit 1; }
  done
  echo "$kver" > "$rootfs/.nr-kernel-version"
  rm -rf "$base"
  mv "$rootfs" "$base"
  touch "$base/.done"
  for old in "$cache"/rootfs-*; do [ "$old" = "$base" ] || rm -rf "$old"; done
fi
# stage 1 end

kver="$(cat "$base/.nr-kernel-version")"
rootfs="$work/rootfs"
mkdir -p "$work/out"
cp -a "$base" "$rootfs"
rm -f "$rootfs/.done"
# The guest side: init and command agent.
install -m 0755 "$guest/nr-init" "$rootfs/sbin/nr-init"
install -m 0755 "$guest/nr-agent" "$rootfs/usr/local/sbin/nr-agent"
# The same under systemd (run.sh's systemd scenario boots init=/lib/systemd/systemd; nr-init ignores all this):
# nr-setup.service does what nr-init does, nr-agent.service serves commands. Timers and gettys a test VM under
# TCG has no use for are masked.
install -m 0755 "$guest/nr-setup" "$rootfs/usr/local/sbin/nr-setup"
install -m 0644 "$guest/nr-setup.service" "$guest/nr-agent.service" "$rootfs/etc/systemd/system/"
mkdir -p "$rootfs/etc/systemd/system/multi-user.target.wants"
for unit in nr-setup.service nr-agent.service; do
  ln -sfn "/etc/systemd/system/$unit" "$rootfs/etc/systemd/system/multi-user.target.wants/$unit"
done
for unit in apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer fstrim.timer \
            getty@tty1.service serial-getty@ttyS0.service systemd-timesyncd.service; do
  ln -sfn /dev/null "$rootfs/etc/systemd/system/$unit"
done
[ -x "$rootfs/lib/systemd/systemd" ] || { echo "build-image: no systemd in the image (systemd-sysv)" >&2; exit 1; }
echo nrvm > "$rootfs/etc/hostname"
mv "$rootfs/boot/vmlinuz-$kver" "$work/out/vmlinuz"
mv "$rootfs/boot/initrd.img-$kver" "$work/out/initrd.img"
size_mb=$(( $(du -sm "$rootfs" | cut -f1) * 12 / 10 + 128 ))
mke2fs -q -t ext4 -L nrroot -d "$rootfs" "$work/out/rootfs.img" "${size_mb}M"
echo "$kver" > "$work/out/kernel-version"
touch "$work/out/.done"

rm -rf "$out"
mv "$work/out" "$out"
ln -sfn "$out" "$cache/current"
for old in "$cache"/image-*; do
  [ "$old" = "$out" ] || rm -rf "$old"
done
echo "build-image: $out (kernel $kver, rootfs ${size_mb} MiB) in $(( $(date +%s) - t0 )) s" >&2
echo "$out"

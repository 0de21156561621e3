#!/usr/bin/env bash
# Packs what scripts/gpu-bed-check.sh needs on a machine that has a GPU and PyTorch but no JDK and no build: a
# jlink'ed Java 25 runtime (the modules the jars use, xz'd: about 22 MB), the built launcher and netreduce.jar, and
# the worker jar as the few entries it has beyond netreduce.jar (the two shaded jars share all their libraries, so
# carrying both whole would not fit a 64 MiB transfer). Run after a build (./mvnw package); writes DIR (default
# .gpubundle, which git ignores through .git/info/exclude: add it there).
#
# usage: scripts/gpu-bundle.sh [DIR]
set -euo pipefail
source "$(dirname "$0")/env.sh"
cd "$NETREDUCE_ROOT"
dir="${1:-.gpubundle}"
daemon_jar=aggregator-daemon/target/netreduce.jar
worker_jar=worker/target/netreduce-worker.jar
for f in "$daemon_jar" "$worker_jar" aggregator-daemon/target/netreduce; do
  [ -f "$f" ] || { echo "gpu-bundle: $f not built (./mvnw -B -ntp -DskipTests package)" >&2; exit 1; }
done
mkdir -p "$dir"
modules="$("$JAVA_HOME/bin/jdeps" --ignore-missing-deps --multi-release 25 --print-module-deps "$daemon_jar" "$worker_jar" 2>/dev/null | tail -1)"
modules="$modules,java.logging,java.xml,jdk.crypto.ec"
stamp="$("$JAVA_HOME/bin/java" -version 2>&1 | head -1) $modules"
if [ ! -f "$dir/jre.tar.xz" ] || [ "$(cat "$dir/jre.stamp" 2>/dev/null)" != "$stamp" ]; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  # Uncompressed inside (zip-0), so xz compresses the whole runtime at once: 22 MB against 37 with jlink's zip.
  "$JAVA_HOME/bin/jlink" --add-modules "$modules" --strip-debug --no-header-files --no-man-pages --compress=zip-0 \
    --output "$work/jre" 2>/dev/null
  tar -C "$work" -cf - jre | xz -9 -T0 > "$dir/jre.tar.xz"
  echo "$stamp" > "$dir/jre.stamp"
fi
cp aggregator-daemon/target/netreduce "$daemon_jar" "$dir/"
"$NETREDUCE_PYTHON" - "$daemon_jar" "$worker_jar" "$dir" <<'PY'
import gzip, sys, zipfile
daemon, worker, out = sys.argv[1:]
with zipfile.ZipFile(daemon) as d, zipfile.ZipFile(worker) as w:
    shared = {i.filename: i.CRC for i in d.infolist()}
    names = [i.filename for i in w.infolist()]
    with zipfile.ZipFile(f"{out}/worker-delta.zip", "w", zipfile.ZIP_DEFLATED) as delta:
        for i in w.infolist():
            if shared.get(i.filename) != i.CRC:
                delta.writestr(i, w.read(i))
with gzip.open(f"{out}/worker-entries.txt.gz", "wt") as f:
    f.write("\n".join(names) + "\n")
PY
# The bed's tools for a host without them (the device machines have no iproute2): this host's ip, tc, bridge and
# ethtool with the libraries they need beyond the C library, each started through the host's own dynamic loader
# with --library-path, so the programs that `ip netns exec` starts do not inherit the libraries; and a sysctl that
# writes /proc/sys itself (the bed only sets values).
tools="$dir/tools"
rm -rf "$tools" && mkdir -p "$tools/bin" "$tools/real" "$tools/lib"
for tool in ip tc bridge ethtool; do
  real="$(command -v "$tool")"
  cp "$real" "$tools/real/$tool"
  ldd "$real" | awk '$3 ~ /^\// { print $3 }' | grep -vE '/(libc|libm|libz|ld-linux[^/]*)\.so' | xargs -r -I{} cp -L {} "$tools/lib/"
  printf '#!/bin/sh\nd="$(dirname "$(readlink -f "$0")")/.."\nexec /lib64/ld-linux-x86-64.so.2 --library-path "$d/lib" "$d/real/%s" "$@"\n' \
    "$tool" > "$tools/bin/$tool"
done
cat > "$tools/bin/sysctl" <<'SYSCTL'
#!/bin/sh
# sysctl [-q] [-w] KEY=VALUE... | KEY...: writes or prints /proc/sys entries (what scripts/testbed.sh uses of it).
quiet=0
for arg in "$@"; do
  case "$arg" in
    -q|-qw|-wq) quiet=1 ;;
    -*) ;;
    *=*) key="${arg%%=*}"; value="${arg#*=}"
         printf '%s\n' "$value" > "/proc/sys/$(echo "$key" | tr . /)" || exit 1
         [ "$quiet" = 1 ] || echo "$key = $value" ;;
    *) echo "$arg = $(cat "/proc/sys/$(echo "$arg" | tr . /)")" || exit 1 ;;
  esac
done
SYSCTL
chmod +x "$tools/bin/"*
# The bed's ECN marker for 1 Gbit/s links at the thresholds the benches use, built here (the GPU machine has no
# clang); gpu-bed-check.sh puts them where scripts/lib/emulation.sh caches them.
if command -v clang >/dev/null; then
  source scripts/lib/emulation.sh
  mkdir -p "$tools/ecn"
  # The marker models the shaper's bucket too: the bursts in bytes as the kernel keeps them, read from a tbf made for
  # each size the benches use (512kb, the bed's default; 128kb and 64kb, gpu-bed-check's buckets).
  ( probe_ns="nrbundle$$"
    trap 'ip netns del "$probe_ns" 2>/dev/null' EXIT
    ip netns add "$probe_ns" && ip netns exec "$probe_ns" ip link add va type veth peer name vb
    for size in 512kb 128kb 64kb; do
      ip netns exec "$probe_ns" tc qdisc replace dev va root tbf rate 1gbit burst "$size" latency 20ms
      burst="$(tbf_options "$probe_ns" va)"
      for threshold in 262144 65536; do
        cp "$(ecn_marker_object 1000000000 "$threshold" "${burst#* }")" "$tools/ecn/"
      done
    done )
fi
tar -C "$dir" -cf - tools | xz -9 > "$dir/tools.tar.xz" && rm -rf "$tools" "$dir/worker-entries.txt"
du -sh "$dir"/*

#!/usr/bin/env bash
# Makes the JVMs' ahead-of-time caches (JDK 25: JEP 483 classes loaded and linked, JEP 514 made in one run, JEP 515
# method profiles) by a training run of the real hot path on the namespace test bed, so that the daemon, `ctl`, the
# workers and the Python package's sidecar start with their classes loaded and linked and their hot methods'
# profiles at hand. One cache per command, next to its jar (the launcher's NETREDUCE_AOT=print names it):
#
#   netreduce-daemon.aot           the daemon (NetReduce ring of 4 workers, SwitchML service on): every packet of
#                                  the two workloads below
#   netreduce-ctl.aot              `netreduce ctl` (one `ctl rings`)
#   netreduce-worker-allreduce.aot rank 0 of `worker allreduce`, W = 4, 64 MiB fp32, 6 calls through the appliance
#   netreduce-worker-serve.aot     rank 0's sidecar (`worker serve`) driven as a Session drives it
#                                  (scripts/lib/aot_sidecar.py): 8 calls of 32 MiB, 200 of 287 KB
#
# Each JVM records while it runs and writes its cache when it exits (-XX:AOTCacheOutput, through the launcher's
# NETREDUCE_AOT_OUTPUT, so training and use share the jar paths and JVM flags, as the cache requires). A cache is
# tied to its jar: CACHE.stamp records the jar (SHA-256, time, size) and the cache; a jar built from changed sources
# makes its caches stale, and the launcher then runs without them; a jar rebuilt with the same bytes gets its old
# time back and keeps them. Without --force this script does nothing when every cache is fresh. About 40-50 s on 2
# cores.
#
# usage: scripts/aot-train.sh [--force] [--launcher PATH (default aggregator-daemon/target/netreduce; an installed
#                              launcher, e.g. /opt/netreduce/bin/netreduce, makes the caches beside its jars)]
#                             [--prefix P (bed namespaces, default nraot)] [--check (exit 1 when a cache is stale)]
# Needs root (network namespaces). Wrap in a lock if other beds may run at the same time.
set -euo pipefail
source "$(dirname "$0")/env.sh"
source "$(dirname "$0")/lib/appliance.sh"
cd "$NETREDUCE_ROOT"

launcher="$NETREDUCE_ROOT/aggregator-daemon/target/netreduce"
prefix=nraot
force=0
check=0
workers=4
while [ $# -gt 0 ]; do
  case "$1" in
    --force) force=1; shift ;;
    --check) check=1; shift ;;
    --launcher) launcher="$2"; shift 2 ;;
    --prefix) prefix="$2"; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "aot-train: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -x "$launcher" ] || { echo "aot-train: $launcher missing (build first: ./mvnw -B -ntp -DskipTests package)" >&2; exit 1; }

# command (as the launcher takes it) -> its cache and jar
declare -A cache jar
for c in daemon ctl "worker allreduce" "worker serve"; do
  # shellcheck disable=SC2086 # "worker serve" is two words for the launcher
  mapfile -t where < <(NETREDUCE_AOT=print "$launcher" $c)
  # the workers' jar is needed even for the daemon's cache, which is trained on their traffic
  [ ${#where[@]} -eq 2 ] || { echo "aot-train: $launcher cannot run '$c' (is its jar installed?)" >&2; exit 1; }
  cache[$c]="${where[0]}"
  jar[$c]="${where[1]}"
done
# Each cache has CACHE.stamp: its jar's SHA-256, time and size and its own time and size, as this script made them.
# The launcher uses a cache only while both files are still those (JDK 25 runs a one-step cache's classes without
# checking its jar, JDK-8377932). A rebuild writes the jars anew even when nothing in them changed (the build is
# reproducible: the parent pom fixes project.build.outputTimestamp); a jar rewritten with the bytes its caches were
# trained on gets its old time back here, and the caches hold again.
for c in "${!cache[@]}"; do
  stamp="${cache[$c]}.stamp"
  [ -f "$stamp" ] && [ -f "${jar[$c]}" ] || continue
  read -r sum when _ < "$stamp" || continue
  if [ "$(stat -c %.9Y "${jar[$c]}")" != "$when" ] && [ "$(sha256sum "${jar[$c]}" | cut -d' ' -f1)" = "$sum" ]; then
    touch -m -d "@$when" "${jar[$c]}"
    echo "aot-train: $(basename "${jar[$c]}") rebuilt with the same bytes: its caches hold"
  fi
done
# fresh: the stamp matches the jar and the cache as they are (what the launcher checks)
fresh() {
  local stamped
  [ -f "$1.stamp" ] && [ -f "$1" ] && read -r _ stamped < "$1.stamp" &&
    [ "$stamped " = "$(stat --printf '%.9Y %s ' "$2" "$1")" ]
}
stale=()
for c in "${!cache[@]}"; do
  fresh "${cache[$c]}" "${jar[$c]}" || stale+=("$c")
done
if [ "$check" -eq 1 ]; then
  [ ${#stale[@]} -eq 0 ] && { echo "aot-train: every cache is up to date"; exit 0; }
  echo "aot-train: stale or missing: ${stale[*]}"; exit 1
fi
if [ ${#stale[@]} -eq 0 ] && [ "$force" -eq 0 ]; then
  echo "aot-train: every cache is fresh (--force to make them again)"
  exit 0
fi
[ "$(id -u)" -eq 0 ] || { echo "aot-train: needs root (namespace test bed); the JVMs start without caches" >&2; exit 2; }

started=$(date +%s)
work="$(mktemp -d /tmp/netreduce-aot-train.XXXXXX)"
chmod 755 "$work"
daemon_pid=""
pids=()
cleanup() {
  local status=$? p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  if [ "$status" -ne 0 ]; then
    rm -rf /tmp/netreduce-aot-train.failed
    mkdir -p /tmp/netreduce-aot-train.failed
    cp "$work"/*.log "$work"/*.yaml /tmp/netreduce-aot-train.failed/ 2>/dev/null || true
    echo "aot-train: logs in /tmp/netreduce-aot-train.failed" >&2
  fi
  bed_stop "$prefix" "$work"
}
trap cleanup EXIT
bash scripts/testbed.sh up -w "$workers" --mtu 9000 --prefix "$prefix" >/dev/null

# the daemon: one fp32 ring of the 4 workers, and the SwitchML service (its controller's gRPC server loads too)
bed_ring_config "$work/netreduce.yaml" "unix:$work/api.sock" aot "$workers" 1 16 16 4096
sed -i 's/^  metrics:/  switchml:\n    mac: "02:77:00:00:00:fe"\n    ip: 10.77.0.254\n    controller:\n      listen: 10.77.0.253:50099\n      allow: [10.77.0.0\/24]\n  metrics:/' \
  "$work/netreduce.yaml"
ip netns exec "${prefix}-app" env NETREDUCE_AOT_OUTPUT="$work/daemon.aot" "$launcher" daemon \
  --config "$work/netreduce.yaml" > "$work/daemon.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 240); do
  "$launcher" ctl --api "unix:$work/api.sock" --timeout 1 rings > /dev/null 2>&1 && break
  kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/daemon.log" >&2; echo "aot-train: daemon exited" >&2; exit 1; }
  sleep 0.5
done
NETREDUCE_AOT_OUTPUT="$work/ctl.aot" "$launcher" ctl --api "unix:$work/api.sock" rings > "$work/ctl.log" 2>&1 \
  || { cat "$work/ctl.log" >&2; echo "aot-train: ctl failed" >&2; exit 1; }

# worker allreduce: rank 0 records
run_ranks() {  # name, then the command after "netreduce" with RANK for the rank
  local name="$1" i status=0
  shift
  pids=()
  for i in $(seq 0 $(( workers - 1 ))); do
    local env=()
    [ "$i" -eq 0 ] && env=(NETREDUCE_AOT_OUTPUT="$work/$name.aot")
    ip netns exec "${prefix}-w$i" env "${env[@]}" "${@//RANK/$i}" > "$work/$name-$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do wait "${pids[$i]}" || { status=1; tail -n 20 "$work/$name-$i.log" >&2; }; done
  pids=()
  [ "$status" -eq 0 ] || { echo "aot-train: $name failed" >&2; exit 1; }
}
run_ranks worker-allreduce "$launcher" worker allreduce --rank RANK --world "$workers" --dev eth0 --size 67108864 --pmtu 4096 \
  --iterations 6 --timeout 60
run_ranks worker-serve env TMPDIR="$work" "$NETREDUCE_PYTHON" scripts/lib/aot_sidecar.py --rank RANK \
  --world "$workers" --work "$work" --netreduce "$launcher"

# SIGTERM: the daemon stops and its JVM writes the cache on the way out
kill "$daemon_pid"
wait "$daemon_pid" 2>/dev/null || true
daemon_pid=""

made=()
for c in daemon ctl "worker allreduce" "worker serve"; do
  name="${c/ /-}"
  if [ ! -s "$work/$name.aot" ]; then
    echo "aot-train: no cache for '$c' (its JVM's output follows)" >&2
    case "$name" in
      daemon) tail -n 20 "$work/daemon.log" >&2 ;;
      ctl) cat "$work/ctl.log" >&2 ;;
      *) tail -n 20 "$work/$name-0.log" >&2 ;;
    esac
    exit 1
  fi
  # next to the jar, atomically (a launcher starting meanwhile sees the old cache or the new one)
  rm -f "${cache[$c]}.stamp"   # no stamp, no use: a launcher starting meanwhile runs without the cache
  cp "$work/$name.aot" "${cache[$c]}.tmp.$$"
  chmod 644 "${cache[$c]}.tmp.$$"   # readable by the daemon's systemd DynamicUser
  mv -f "${cache[$c]}.tmp.$$" "${cache[$c]}"
  echo "$(sha256sum "${jar[$c]}" | cut -d' ' -f1) $(stat --printf '%.9Y %s ' "${jar[$c]}" "${cache[$c]}")" \
    > "${cache[$c]}.stamp"
  made+=("$(basename "${cache[$c]}") $(( $(stat -c %s "${cache[$c]}") >> 20 )) MiB")
done
echo "aot-train: made in $(( $(date +%s) - started )) s, beside the jars in $(dirname "${cache[daemon]}") and" \
  "$(dirname "${cache[worker serve]}"): $(IFS=,; echo "${made[*]}" | sed 's/,/, /g')"

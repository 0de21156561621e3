#!/usr/bin/env bash
# The GPU checks through the real appliance, for a machine with a GPU, PyTorch and root but no JDK and no build
# (the device machines lent to a session here): installs the runtime and jars that scripts/gpu-bundle.sh packed,
# brings the namespace test bed up there and runs, each phase under its own time limit and each logged to $OUT
# (or ./gpu-bed-out):
#   1. the CUDA test of python/tests/test_bed.py (W = 3: CUDA tensors, DDP's GPU buckets and the fp16 hook on
#      GPU buckets through pinned pieces, the real sidecars and the daemon, bit-exact) and the CPU DDP test beside it;
#   2. scripts/train.sh, the CNN (W = 4, 1 Gbit/s, netreduce against gloo in one run), twice: on a
#      host whose cores do not bind, unlike the 2-core development bed;
#   3. scripts/bench-allreduce.sh W = 8, 64 MiB, 1 Gbit/s, netreduce and gloo: the first call against the steady
#      state with cores to spare for the JIT;
#   4. (only when GPU_BED_PHASES names it) scripts/train.sh --model dlrm, hot/cold against gloo-sparse in 2 pairs;
#   5. (likewise) scripts/bench-shared.sh W = 4: short flows and a long flow beside each job, links marking or not;
#   6. (likewise) the cnn of phase 2 with the links' tbf bucket at 128 KiB instead of 512, or at each size
#      GPU_BED_BUCKETS names (docs/performance.md, "On a host whose cores do not bind": the bed's bucket lets small
#      calls past the link's rate);
#   7. (likewise) the Session's CUDA staging tests against the transport double (python/tests/test_staging.py);
#   8. (likewise) scripts/aot-train.sh, the JVMs' start-up caches made there with the bundle's runtime, then phase 3
#      again: the first call at W = 8 with the caches, as an installed appliance runs by default;
#   9. (likewise) the cnn through sidecar agents, sessions 1-3 against gloo (train.sh --agent --agent-sessions 3).
# Phases 1-3 took 4.3 min on an H100 host (16 cores); 4 and 5 are sized to fit a second call of under 10 minutes.
# Where network namespaces, veth or tbf are missing it says so and runs scripts/gpu-check.sh (the staging tests
# against the transport double) instead.
#
# usage: scripts/gpu-bed-check.sh [BUNDLE_DIR (default .gpubundle)]
#   GPU_BED_PHASES="1 2 3" (default) picks the phases, run in the order given ("4 5 6 7 8 9": the sparse and
#   shared-link benches, the cnn on a 128 KiB bucket, the staging tests, the start-up caches, the sidecar agents).
set -uo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
bundle="${1:-.gpubundle}"
out="${OUT:-$root/gpu-bed-out}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
export NETREDUCE_PYTHON="${NETREDUCE_PYTHON:-$(command -v python3)}"
log="$out/check.log"
say() { echo "== $(date +%T) $*" | tee -a "$log"; }

say "host: $(nproc) cores, kernel $(uname -r), python $NETREDUCE_PYTHON"
{ nvidia-smi -L; "$NETREDUCE_PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
  torch.cuda.get_device_name() if torch.cuda.is_available() else "no device")'; } 2>&1 | tee -a "$log"

# The runtime where scripts/env.sh and the launcher look first, and the jars where the build puts them.
jdk=/usr/lib/jvm/temurin-25-jdk-amd64
if ! "$jdk/bin/java" -version 2>&1 | grep -q '"25'; then
  mkdir -p /usr/lib/jvm && tar -C /usr/lib/jvm -xJf "$bundle/jre.tar.xz" && rm -rf "$jdk" && mv /usr/lib/jvm/jre "$jdk"
fi
mkdir -p aggregator-daemon/target worker/target
cp "$bundle/netreduce" "$bundle/netreduce.jar" aggregator-daemon/target/
"$NETREDUCE_PYTHON" - "$bundle" <<'PY'
import gzip, sys, zipfile
bundle = sys.argv[1]
names = [n for n in gzip.open(f"{bundle}/worker-entries.txt.gz", "rt").read().split("\n") if n]
with zipfile.ZipFile(f"{bundle}/netreduce.jar") as d, zipfile.ZipFile(f"{bundle}/worker-delta.zip") as delta, \
        zipfile.ZipFile("worker/target/netreduce-worker.jar", "w", zipfile.ZIP_DEFLATED) as w:
    mine = set(delta.namelist())
    for name in names:
        w.writestr((delta if name in mine else d).getinfo(name), (delta if name in mine else d).read(name))
PY
"$jdk/bin/java" -version 2>&1 | head -1 | tee -a "$log"
aggregator-daemon/target/netreduce worker serve --help >/dev/null 2>&1 && say "worker jar runs" || say "worker jar does not run"

# The bed's tools, from the bundle where this host has none (scripts/gpu-bundle.sh says how they run).
tools_path=/tmp/netreduce-gpu-tools/path
rm -rf /tmp/netreduce-gpu-tools && mkdir -p "$tools_path" && tar -C /tmp/netreduce-gpu-tools -xJf "$bundle/tools.tar.xz"
for tool in ip tc bridge ethtool sysctl; do
  command -v "$tool" >/dev/null || { ln -s "/tmp/netreduce-gpu-tools/tools/bin/$tool" "$tools_path/$tool"; say "using the bundle's $tool"; }
done
export PATH="$PATH:$tools_path"
mkdir -p "${TMPDIR:-/tmp}/netreduce-ecn-marker" && cp /tmp/netreduce-gpu-tools/tools/ecn/*.o "${TMPDIR:-/tmp}/netreduce-ecn-marker/" 2>/dev/null
{ ip -V; tc -V; } 2>&1 | tee -a "$log"

# Can this kernel hold the bed? (namespaces, veth, tbf, clsact with u32 and mirred)
probe() {
  ip netns add nrgpuprobe && ip link add nrgpa type veth peer name nrgpb && ip link set nrgpb netns nrgpuprobe &&
    tc qdisc add dev nrgpa root tbf rate 1gbit burst 64k latency 10ms && tc qdisc add dev nrgpa clsact &&
    tc filter add dev nrgpa ingress protocol ip u32 match u32 0 0 action mirred egress redirect dev nrgpa
}
if probe >>"$log" 2>&1; then bed=1; say "bed: namespaces, veth, tbf, clsact, u32 and mirred work"; else bed=0; say "bed: not here (above)"; fi
ip link del nrgpa 2>/dev/null; ip netns del nrgpuprobe 2>/dev/null
if [ "$bed" = 0 ]; then
  OUT="$out" GPU_CHECK_BENCH= timeout 300 bash scripts/gpu-check.sh >>"$log" 2>&1
  exit $?
fi

phases="${GPU_BED_PHASES:-1 2 3}"
status=0

# cnn_twice LOG [BUCKET]: scripts/train.sh's cnn (W = 4, 1 Gbit/s) twice, appended to LOG, the links' tbf bucket
# BUCKET (testbed.sh --burst) or the bed's default
cnn_twice() {
  local to="$1" bucket="${2:-}" run
  for run in 1 2; do
    NETREDUCE_BED_BURST="${bucket:-${NETREDUCE_BED_BURST:-512kb}}" timeout 240 bash scripts/train.sh --no-build \
      --model cnn --plot "$out/train-cnn${bucket:+-$bucket}.png" >>"$to" 2>&1 ||
      { status=1; echo "train.sh cnn ${bucket:-}: failed ($?)" >>"$to"; }
  done
  grep -E "^(netreduce|gloo) |median step|^RESULT" "$to" | tee -a "$log"
}

# allreduce_w8 CSV LOG: scripts/bench-allreduce.sh W = 8, 64 MiB, 1 Gbit/s, netreduce and gloo
allreduce_w8() {
  timeout 300 bash scripts/bench-allreduce.sh --no-build --rates 1gbit --workers 8 --sizes-mib 64 --iterations 10 \
    --modes "netreduce gloo" --out "$1" >"$2" 2>&1 || status=1
  tail -15 "$2" | tee -a "$log"
}

for phase in $phases; do
  case "$phase" in
    1) say "1. CUDA through the appliance (pytest)"
       timeout 360 "$NETREDUCE_PYTHON" -m pytest -v -s -p no:cacheprovider -rs python/tests/test_bed.py \
         -k "cuda or every_ddp_bucket" >"$out/bed-pytest.log" 2>&1 || status=1
       tail -5 "$out/bed-pytest.log" | tee -a "$log" ;;
    2) say "2. train.sh cnn x2 (W=4, 1 Gbit/s)"
       cnn_twice "$out/train.log" ;;
    3) say "3. bench-allreduce W=8 64 MiB 1 Gbit/s"
       allreduce_w8 "$out/allreduce-w8.csv" "$out/allreduce.log" ;;
    4) say "4. train.sh dlrm (sparse, Libra): netreduce hot/cold and gloo-sparse in turn, 2 pairs, 200 steps"
       timeout 420 bash scripts/train.sh --no-build --model dlrm --steps 200 --warmup 50 --repeats 2 \
         --hot-budgets "1048576:auto:fused" --plot "$out/train-dlrm.png" >"$out/train-dlrm.log" 2>&1 || status=1
       grep -E "pair|median|ratio|bit for bit|RESULT" "$out/train-dlrm.log" | tail -20 | tee -a "$log" ;;
    5) say "5. bench-shared W=4 (PANAMA): short flows and a long flow beside gloo, netreduce, netreduce with marking"
       timeout 480 bash scripts/bench-shared.sh --no-build --workers 4 --iterations 15 --flow-nice -15 \
         --modes "none gloo netreduce netreduce-ecn" --out "$out/shared-w4.csv" >"$out/shared.log" 2>&1 || status=1
       tail -15 "$out/shared.log" | tee -a "$log" ;;
    6) for bucket in ${GPU_BED_BUCKETS:-128kb}; do
         say "6. train.sh cnn x2 with a $bucket tbf bucket"
         cnn_twice "$out/train-$bucket.log" "$bucket"
       done ;;
    7) say "7. the Session's CUDA staging tests (transport double)"
       timeout 200 "$NETREDUCE_PYTHON" -m pytest -v -p no:cacheprovider -rs python/tests/test_staging.py \
         >"$out/staging-pytest.log" 2>&1 || status=1
       tail -3 "$out/staging-pytest.log" | tee -a "$log" ;;
    8) say "8. the start-up caches (aot-train.sh), then bench-allreduce W=8 with them"
       timeout 200 bash scripts/aot-train.sh --force >"$out/aot-train.log" 2>&1 || status=1
       tail -3 "$out/aot-train.log" | tee -a "$log"
       allreduce_w8 "$out/allreduce-w8-aot.csv" "$out/allreduce-aot.log" ;;
    9) say "9. train.sh cnn through sidecar agents, sessions 1-3"
       timeout 300 bash scripts/train.sh --no-build --model cnn --agent --agent-sessions 3 \
         --plot "$out/train-agent.png" >"$out/train-agent.log" 2>&1 || status=1
       grep -E "^-- |^(netreduce|gloo) |median step|^RESULT" "$out/train-agent.log" | tee -a "$log" ;;
    *) say "unknown phase $phase"; status=1 ;;
  esac
done
say "done, status $status"
exit $status

"""netreduce.sparse end to end on the namespace test bed: trainers in worker namespaces, each with its sidecar, sum
sparse embedding gradients hot/cold through the real daemon (hot rows through the appliance, cold rows all-gathered
over gloo), every step checked bit for bit against the rank-order reference (python/tests/bed_worker.py,
scenario_sparse), once on a clean bed and once with the appliance dropping 1 % of the RoCEv2 frames it receives
(`dataplane.dropProbability`), so that the hot blocks go through retransmissions.

Needs root and the built launcher, as test_bed.py; brings up a bed of its own (prefix nrsp) for each case.
"""
import json
import os
import shutil
import subprocess
import tempfile
import time

import pytest

from test_bed import NETREDUCE, ROOT, run_ranks, stop

torch = pytest.importorskip("torch", reason="the session tests need PyTorch (Debian: python3-torch)")

PREFIX = "nrsp"
WORLD = 3

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the namespace test bed needs root"),
    pytest.mark.skipif(not os.access(NETREDUCE, os.X_OK), reason=f"{NETREDUCE} not built (./mvnw package)"),
]


def _config(api: str, world: int, drop: float) -> str:
    members = "".join(f"          - {{ rank: {r}, ip: 10.77.0.{r + 1} }}\n" for r in range(world))
    return ("appliance:\n  ports:\n    - name: eth0\n      mtu: 9000\n  memoryBudget: 128MiB\n"
            f"  dataplane:\n    dropProbability: {drop}\n    dropSeed: 27\n"
            f"  api:\n    listen: unix:{api}\n  metrics:\n    listen: 127.0.0.1:0\n"
            "jobs:\n  - name: pytest-sparse\n    rings:\n      - id: 1\n        elementType: fp32\n"
            "        window: 8\n        msgLen: 16\n        payloadSize: 4096\n        pmtu: 4096\n        members:\n"
            + members)


@pytest.fixture(params=[0.0, 0.01], ids=["clean", "1pct-loss"])
def sparse_bed(request):
    drop = request.param
    work = tempfile.mkdtemp(prefix="netreduce-pytest-sparse-")
    api = os.path.join(work, "api.sock")
    config = os.path.join(work, "netreduce.yaml")
    with open(config, "w", encoding="utf-8") as f:
        f.write(_config(api, WORLD, drop))
    testbed = [os.path.join(ROOT, "scripts", "testbed.sh")]
    subprocess.run(["bash", *testbed, "up", "-w", str(WORLD), "--mtu", "9000", "--prefix", PREFIX], check=True,
                   stdout=subprocess.DEVNULL)
    log = open(os.path.join(work, "daemon.log"), "wb")
    daemon = subprocess.Popen(["ip", "netns", "exec", f"{PREFIX}-app", NETREDUCE, "daemon", "--config", config],
                              stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(api):
            if daemon.poll() is not None or time.monotonic() > deadline:
                log.flush()
                with open(log.name, encoding="utf-8", errors="replace") as f:
                    pytest.fail(f"the daemon did not come up: {f.read()[-3000:]}")
            time.sleep(0.2)
        yield {"work": work, "api": f"unix:{api}", "daemon_log": log.name, "prefix": PREFIX, "drop": drop}
    finally:
        stop(daemon)
        log.close()
        subprocess.run(["bash", *testbed, "down", "--prefix", PREFIX], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)


def test_should_sum_sparse_gradients_hot_and_cold_exactly_through_the_daemon(sparse_bed):
    start = time.monotonic()
    results, logs = run_ranks(sparse_bed, "sparse", world=WORLD, timeout=300)
    for r in results:
        assert r["ok"], f"rank {r['rank']}: {json.dumps(r)[:3000]}\n{logs}"
        assert r["stats"]["fallback_calls"] == 0
    retransmitted = sum(r["stats"]["transport"].get("retransmittedPackets", 0) for r in results)
    if sparse_bed["drop"]:
        counters = subprocess.run([NETREDUCE, "ctl", "--api", sparse_bed["api"], "counters"], capture_output=True,
                                  text=True).stdout
        dropped = [line for line in counters.splitlines() if "drop" in line and "injected" in line]
        assert retransmitted > 0, f"no retransmission at {sparse_bed['drop']:.0%} loss: {dropped}"
    s = results[0]["sparse"]
    print(f"sparse W={WORLD}, drop {sparse_bed['drop']}: {len(results[0]['checked'])} table sums exact, hot sizes "
          f"{results[0]['hot_sizes']}, appliance fraction {s['appliance_fraction']:.3f}, retransmitted packets "
          f"{retransmitted}, {time.monotonic() - start:.1f} s")

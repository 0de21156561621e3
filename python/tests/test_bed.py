"""The netreduce package end to end on the namespace test bed: trainers (torch.distributed, gloo for rendezvous) in
worker namespaces, each with its sidecar, through the real daemon in the appliance namespace.

Needs root (network namespaces) and the built launcher (aggregator-daemon/target/netreduce; the README's test
command builds it before it runs pytest). Each scenario's checks are made by the ranks themselves on real results
(python/tests/bed_worker.py); this file brings the bed up, starts the ranks and reads what they wrote.
"""
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import pytest

torch = pytest.importorskip("torch", reason="the session tests need PyTorch (Debian: python3-torch)")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NETREDUCE = os.path.join(ROOT, "aggregator-daemon", "target", "netreduce")
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bed_worker.py")
PREFIX = "nrpy"
WORLD = 3

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the namespace test bed needs root"),
    pytest.mark.skipif(not os.access(NETREDUCE, os.X_OK), reason=f"{NETREDUCE} not built (./mvnw package)"),
]


def _config(api: str, world: int) -> str:
    members = "".join(f"          - {{ rank: {r}, ip: 10.77.0.{r + 1} }}\n" for r in range(world))
    rings = ""
    for ring_id, element_type in ((1, "fp32"), (2, "fp16")):
        rings += (f"      - id: {ring_id}\n        elementType: {element_type}\n        window: 8\n"
                  f"        msgLen: 16\n        payloadSize: 4096\n        pmtu: 4096\n        members:\n" + members)
    # The SwitchML service as scripts/lib/appliance.sh's bed_switchml_config has it (the bed's SwitchML address, the
    # controller on mgmt0), with a small session pool: the switchml transport's 128 packets in flight fit it.
    switchml = ("  switchml:\n    mac: \"02:77:00:00:00:fe\"\n    ip: 10.77.0.254\n    sessionPoolSize: 512\n"
                "    controller:\n      listen: 10.77.0.253:50099\n      allow: [10.77.0.0/24]\n")
    return ("appliance:\n  ports:\n    - name: eth0\n      mtu: 9000\n  memoryBudget: 128MiB\n"
            f"  api:\n    listen: unix:{api}\n  metrics:\n    listen: 127.0.0.1:0\n" + switchml +
            "jobs:\n  - name: pytest\n    rings:\n" + rings)


@pytest.fixture(scope="module")
def bed():
    work = tempfile.mkdtemp(prefix="netreduce-pytest-")
    api = os.path.join(work, "api.sock")
    config = os.path.join(work, "netreduce.yaml")
    with open(config, "w", encoding="utf-8") as f:
        f.write(_config(api, WORLD))
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
        yield {"work": work, "api": f"unix:{api}", "daemon_log": log.name}
    finally:
        stop(daemon)
        log.close()
        subprocess.run(["bash", *testbed, "down", "--prefix", PREFIX], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)


def stop(process) -> None:
    """SIGTERM, and SIGKILL if the process has not gone 15 s later (a daemon or an agent the tests started)."""
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


_port = [29600]
_port_lock = threading.Lock()


def run_ranks(bed, scenario: str, world: int = WORLD, timeout: float = 240, api: bool = True, extra=()):
    """Start one rank of ``scenario`` in each worker namespace; their JSON results, rank by rank. Two may run at once
    (each its own rendezvous port)."""
    with _port_lock:
        _port[0] += 1
        port = _port[0]
    procs, outs = [], []
    for rank in range(world):
        out = os.path.join(bed["work"], f"{scenario}-{rank}.json")
        log = os.path.join(bed["work"], f"{scenario}-{rank}.log")
        outs.append((out, log))
        argv = ["ip", "netns", "exec", f"{bed.get('prefix', PREFIX)}-w{rank}", sys.executable, WORKER, scenario, "--rank", str(rank),
                "--world", str(world), "--master", "10.77.0.1", "--port", str(port), "--out", out,
                "--netreduce", NETREDUCE]
        if api:
            argv += ["--api", bed["api"]]
        argv += list(extra)
        with open(log, "wb") as f:
            procs.append(subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT))
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            p.wait(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail(f"{scenario}: ranks still running after {timeout} s: " + _logs(outs))
    results = []
    for out, _ in outs:
        if not os.path.exists(out):
            pytest.fail(f"{scenario}: a rank wrote no result: " + _logs(outs))
        with open(out, encoding="utf-8") as f:
            results.append(json.load(f))
    return results, _logs(outs)


def _logs(outs) -> str:
    text = []
    for _, log in outs:
        if os.path.exists(log):
            with open(log, encoding="utf-8", errors="replace") as f:
                text.append(f"--- {os.path.basename(log)}\n{f.read()[-3000:]}")
    return "\n".join(text)


def _drops(bed) -> str:
    counters = subprocess.run([NETREDUCE, "ctl", "--api", bed["api"], "counters"], capture_output=True, text=True)
    return "appliance counters:\n" + "\n".join(l for l in counters.stdout.splitlines() if not l.endswith(" 0"))


def test_should_sum_every_ddp_bucket_and_tensor_exactly_in_rank_order(bed):
    results, logs = run_ranks(bed, "ddp")
    for r in results:
        assert r["ok"], f"rank {r['rank']}: {json.dumps(r)[:3000]}\n{logs}"
        assert r["stats"]["fallback_calls"] == 0, _drops(bed)
        # RC timeouts are not asserted: on a loaded shared machine a retransmission timer can fire with nothing lost
        # (seen once with a benchmark running beside the suite), and recovery is part of the protocol; the bit-exact
        # checks above are what must hold. scripts/train.sh and bench-session.sh report timeouts.


def test_should_serve_one_trainer_after_another_from_one_sidecar_agent(bed):
    """`netreduce worker agent` in each worker namespace; each rank runs two Sessions one after the other with
    agent=, while a second trainer on each host runs the fp16 scenario through the same agent: every one a session of
    that one process (the eventfds handed over by SCM_RIGHTS), every result exact, and the agent still there,
    serving, after them."""
    agents = []
    try:
        for rank in range(WORLD):
            path = os.path.join(bed["work"], f"agent-{rank}.sock")
            log = open(os.path.join(bed["work"], f"agent-{rank}.log"), "w+b")
            agent = subprocess.Popen(["ip", "netns", "exec", f"{PREFIX}-w{rank}", NETREDUCE, "worker", "agent",
                                      "--dev", "eth0", "--socket", path], stdout=subprocess.PIPE, stderr=log)
            agents.append((agent, log))
            line = agent.stdout.readline()
            assert line.startswith(b"listening"), f"agent {rank} did not start: {line!r} {_tail(log)}"
        extra = ["--agent", os.path.join(bed["work"], "agent-{rank}.sock")]
        # Beside the two sessions in turn, the fp16 scenario's trainers (a second process on each host, ring 2) take
        # sessions of the same agents at the same time: each session its own port and QP numbers.
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            in_turn = pool.submit(run_ranks, bed, "agent", extra=extra)
            beside = pool.submit(run_ranks, bed, "fp16", extra=extra)
            runs = [in_turn.result(), beside.result()]
        for results, logs in runs:
            for r in results:
                assert r["ok"], f"rank {r['rank']}: {json.dumps(r)[:3000]}\n{logs}\n" + \
                    "\n".join(_tail(log) for _, log in agents)
        for r in runs[0][0]:
            assert r["stats"]["fallback_calls"] == 0, _drops(bed)
        for rank, (agent, log) in enumerate(agents):
            assert agent.poll() is None, f"agent {rank} exited: {_tail(log)}"
            deadline = time.monotonic() + 10
            while _tail(log).count(" ended") < 3 and time.monotonic() < deadline:
                time.sleep(0.1)
            told = _tail(log)
            assert told.count(" ended") == 3 and "session 3 on" in told, told
    finally:
        for agent, log in agents:
            stop(agent)
            log.close()


def _tail(log) -> str:
    log.flush()
    with open(log.name, encoding="utf-8", errors="replace") as f:
        return f.read()[-3000:]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (torch.cuda.is_available() is False)")
def test_should_sum_cuda_tensors_and_gpu_ddp_buckets_exactly_through_the_appliance(bed):
    """A model on the GPU: every rank's CUDA tensors and DDP buckets (fp32 and the fp16 hook) go through pinned
    pieces, the real sidecar and the daemon; each result equals the rank-order sum bit for bit (scripts/gpu-bed-check.sh
    runs this on a machine with a GPU)."""
    results, logs = run_ranks(bed, "cuda")
    for r in results:
        assert r["ok"], f"rank {r['rank']}: {json.dumps(r)[:3000]}\n{logs}"
        assert r["stats"]["fallback_calls"] == 0, _drops(bed)
    print(f"cuda: W={WORLD} on {results[0]['device_name']}, {len(results[0]['checked'])} checks per rank, "
          f"{results[0]['buckets']} fp32 buckets, all exact")


def test_should_train_and_sum_through_switchml(bed):
    """transport="switchml": every rank registers with the daemon's SwitchML controller (which opens the session's
    job), int32 sums exact, fp32 sums and every DDP bucket within SwitchML's bound, replicas identical."""
    start = time.monotonic()
    results, logs = run_ranks(bed, "switchml", timeout=120, api=False)
    for r in results:
        assert r["ok"], f"rank {r['rank']}: {json.dumps(r)[:3000]}\n{logs}"
        assert r["stats"]["fallback_calls"] == 0
    seconds = time.monotonic() - start
    worst = max(c.get("worst_of_bound", 0) for r in results for c in r["checked"])
    print(f"switchml: W={WORLD}, {results[0]['buckets']} buckets, worst error {worst:.3f} of the bound, "
          f"losses {results[0]['losses']}, {seconds:.1f} s")
    switchml = subprocess.run([NETREDUCE, "ctl", "--api", bed["api"], "switchml"], capture_output=True, text=True)
    assert switchml.returncode == 0, switchml.stderr


def test_should_average_fp16_compressed_buckets_as_the_compression_hook_does(bed):
    results, logs = run_ranks(bed, "fp16")
    for r in results:
        assert r["ok"], f"rank {r['rank']}: {json.dumps(r)[:3000]}\n{logs}"


def test_should_install_the_ring_through_the_api_and_remove_it_at_close(bed):
    results, logs = run_ranks(bed, "install", world=2)
    for r in results:
        assert r["ok"], f"rank {r['rank']}: {json.dumps(r)[:3000]}\n{logs}"
    jobs = subprocess.run([NETREDUCE, "ctl", "--api", bed["api"], "--json", "jobs"], capture_output=True,
                          text=True, check=True).stdout
    assert "pytest-install" not in jobs


def test_should_raise_and_keep_the_tensor_when_results_arrive_unaggregated(bed):
    results, logs = run_ranks(bed, "unaggregated", world=2, api=False)
    for r in results:
        assert r["ok"], f"rank {r['rank']}: {json.dumps(r)[:3000]}\n{logs}"
    # Every rank says so: a rank posts its own message before it looks at what arrived, so even the rank that got
    # its peer's message before it called sends its own on, and the peer fails for the same reason, not by timeout.
    said = [r["raised"] for r in results]
    for text in said:
        assert "unaggregated" in text, f"{said}\n{logs}"


def test_should_fall_back_to_the_process_group_when_configured(bed):
    results, logs = run_ranks(bed, "fallback", world=2, api=False)
    for r in results:
        assert r["ok"], f"rank {r['rank']}: {json.dumps(r)[:3000]}\n{logs}"
    assert "using the process group's all_reduce" in logs


def test_should_refuse_a_session_whose_window_differs_from_the_ring(bed):
    results, logs = run_ranks(bed, "mismatch", world=2)
    for r in results:
        assert r["ok"], f"rank {r['rank']}: {json.dumps(r)[:3000]}\n{logs}"


def test_should_say_the_appliance_is_unreachable(bed):
    results, logs = run_ranks(bed, "unreachable", world=2)
    for r in results:
        assert r["ok"], f"rank {r['rank']}: {json.dumps(r)[:3000]}\n{logs}"


def test_should_fail_every_rank_at_start_when_one_cannot_connect_its_ring(bed):
    results, logs = run_ranks(bed, "mismatched_memory", world=3, timeout=120)
    for r in results:
        assert r["ok"], f"rank {r['rank']}: {json.dumps(r)[:3000]}\n{logs}"

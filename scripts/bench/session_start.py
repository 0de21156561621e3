"""One rank of scripts/bench-startup.sh's Session measurement: how long a netreduce.Session takes to start, and its
first calls against the steady state.

Times, per rank (seconds, from this process's own start): importing torch, torch.distributed's gloo process group
(init_process_group and a barrier: what gloo needs before its first call), then netreduce.Session() after a
barrier, split into the sidecar JVM's start to its ``listening`` line (and its CPU time until then), the ``open`` request, the ring check with the
appliance, ``connect`` and the exchanges between them; then ``--calls`` all-reduces of ``--bytes`` through the
Session, each after a barrier (a call's time: this rank's). Rank 0 prints one JSON line with every rank's figures.
"""
import argparse
import json
import os
import sys
import time

START = time.perf_counter()
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--master", default="10.77.0.1")
    ap.add_argument("--port", type=int, default=29710)
    ap.add_argument("--api", required=True)
    ap.add_argument("--netreduce", required=True)
    ap.add_argument("--bytes", type=int, default=287016)
    ap.add_argument("--calls", type=int, default=30)
    args = ap.parse_args()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "eth0")
    import torch
    import torch.distributed as dist
    import netreduce
    from netreduce.sidecar import SidecarTransport
    t_import = time.perf_counter() - START

    t0 = time.perf_counter()
    dist.init_process_group("gloo", init_method=f"tcp://{args.master}:{args.port}", rank=args.rank,
                            world_size=args.world)
    dist.barrier()
    t_gloo = time.perf_counter() - t0

    marks = {}

    def timed(name, fn):
        def wrapper(*a, **k):
            begin = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                marks[name] = marks.get(name, 0.0) + time.perf_counter() - begin
        return wrapper

    wait_listening = SidecarTransport._wait_listening

    def listening_and_cpu(self, timeout):
        begin = time.perf_counter()
        wait_listening(self, timeout)
        marks["sidecar_listening"] = time.perf_counter() - begin
        with open(f"/proc/{self._process.pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        marks["sidecar_cpu"] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    SidecarTransport._wait_listening = listening_and_cpu
    SidecarTransport.open = timed("open", SidecarTransport.open)
    SidecarTransport.connect = timed("connect", SidecarTransport.connect)
    netreduce.Session._check_ring = timed("check_ring", netreduce.Session._check_ring)
    dist.barrier()
    t0 = time.perf_counter()
    session = netreduce.Session(device="eth0", appliance=args.api, sidecar_command=[args.netreduce])
    t_session = time.perf_counter() - t0
    t = torch.ones(args.bytes // 4)
    calls = []
    for _ in range(args.calls):
        t.fill_(1.0)
        dist.barrier()
        begin = time.perf_counter()
        session.allreduce_(t)
        calls.append((time.perf_counter() - begin) * 1e3)
        assert bool((t == args.world).all()), "wrong sum"
    session.close()
    mine = {"rank": args.rank, "import_s": round(t_import, 3), "gloo_init_s": round(t_gloo, 3),
            "session_s": round(t_session, 3), **{k + "_s": round(v, 3) for k, v in marks.items()},
            "calls_ms": [round(c, 2) for c in calls]}
    everyone = [None] * args.world
    dist.all_gather_object(everyone, mine)
    if args.rank == 0:
        print(json.dumps({"world": args.world, "bytes": args.bytes, "ranks": everyone}))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())

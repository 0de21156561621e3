"""One rank of scripts/aot-train.sh's sidecar workload: a ``netreduce worker serve`` driven as a Session drives it.

No torch: the sidecar transport alone (python/netreduce/sidecar.py), the ranks meeting through files in --work
(every rank's namespace sees the same file system). Starts the sidecar, opens the ring, connects it, then sums
--calls times the whole input area and --small-calls times a 287 KB bucket (what a small model's DDP step hands
over), checking that every call came back. The rank whose environment has NETREDUCE_AOT_OUTPUT trains its
sidecar's JVM: the launcher writes that cache when the sidecar exits.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

from netreduce.sidecar import SidecarTransport  # noqa: E402


def wait_for(paths, timeout):
    deadline = time.monotonic() + timeout
    while not all(os.path.exists(p) for p in paths):
        if time.monotonic() > deadline:
            raise SystemExit(f"aot_sidecar: timed out waiting for {[p for p in paths if not os.path.exists(p)]}")
        time.sleep(0.02)


def barrier(work, name, rank, world, timeout=60):
    open(os.path.join(work, f"{name}-{rank}"), "w").close()
    wait_for([os.path.join(work, f"{name}-{r}") for r in range(world)], timeout)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--netreduce", required=True)
    ap.add_argument("--calls", type=int, default=8)
    ap.add_argument("--small-calls", type=int, default=200)
    ap.add_argument("--shm-bytes", type=int, default=64 << 20)
    args = ap.parse_args()
    transport = SidecarTransport("eth0", args.shm_bytes, 4096, command=[args.netreduce])
    try:
        ring = {"ringId": 1, "elementType": "fp32", "window": 16, "msgLen": 16, "payloadSize": 4096,
                "inetTag": "NRED", "resultTag": "NRES", "timeoutMs": 30000}
        mine = transport.open(rank=args.rank, world=args.world, ring=ring)
        path = os.path.join(args.work, f"open-{args.rank}.json")
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(mine, f)
        os.rename(path + ".tmp", path)
        paths = [os.path.join(args.work, f"open-{r}.json") for r in range(args.world)]
        wait_for(paths, 60)
        infos = []
        for p in paths:
            with open(p, encoding="utf-8") as f:
                infos.append(json.load(f))
        transport.connect(infos[(args.rank + 1) % args.world]["receive"],
                          infos[(args.rank - 1) % args.world]["send"])
        barrier(args.work, "connected", args.rank, args.world)
        layout = transport.layout
        whole = layout["messages"] * (layout["messageBytes"] - 8) // 4
        for i in range(args.calls):
            transport.allreduce(whole)
        for i in range(args.small_calls):
            transport.allreduce(287016 // 4)
        transport.stats()
        barrier(args.work, "done", args.rank, args.world)
    finally:
        transport.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

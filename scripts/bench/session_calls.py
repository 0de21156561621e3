"""One rank of scripts/bench-session.sh: where the time of one all-reduce call through a netreduce.Session goes.

Per call, interleaved so that drift and warm-up hit all alike: (a) the Session path (`session.submit(t).wait()`:
hand-over to the session thread, copy into the shared memory, the sidecar call, copy out), (b) the transport called
directly from this thread (the Unix-socket request and reply, the sidecar's own work), and the sidecar's own time as
it reports it; then (c) gloo's `all_reduce` of the same tensor. Each call starts after a barrier. Rank 0 prints one
JSON line: median and p90 of each, after the warm-up calls, and the medians of the Session path's parts
(`session_parts`, timed by wrapping the session's own reduce and its transport's call): the hand-over to the session
thread, the copy into the input area, the transport's request and reply less the sidecar's own time, the sidecar's
own time, the copy out of the output area with its tag check, and the hand-back to the caller.
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--master", default="10.77.0.1")
    ap.add_argument("--port", type=int, default=29700)
    ap.add_argument("--api", required=True)
    ap.add_argument("--netreduce", required=True)
    ap.add_argument("--bytes", type=int, default=287016)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    args = ap.parse_args()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "eth0")
    import torch
    import torch.distributed as dist
    import netreduce

    dist.init_process_group("gloo", init_method=f"tcp://{args.master}:{args.port}", rank=args.rank,
                            world_size=args.world)
    session = netreduce.Session(device="eth0", appliance=args.api, sidecar_command=[args.netreduce])
    t = torch.ones(args.bytes // 4)
    # Where the Session path's time goes: timestamps at the session thread's reduce and at the transport call.
    marks = {}
    orig_reduce = session._reduce
    def timed_reduce(tensor):
        marks["reduce_in"] = time.perf_counter()
        orig_reduce(tensor)
        marks["reduce_out"] = time.perf_counter()
    session._reduce = timed_reduce
    orig_call = session.transport.allreduce
    def timed_call(*call_args):
        marks["call_in"] = time.perf_counter()
        us = orig_call(*call_args)
        marks["call_out"] = time.perf_counter()
        marks["own"] = us / 1e3
        return us
    session.transport.allreduce = timed_call
    parts = []
    n = t.numel()
    via_session, direct, sidecar, gloo = [], [], [], []
    for i in range(2 * (args.warmup + args.calls)):
        dist.barrier()
        start = time.perf_counter()
        if i % 2:
            session.submit(t).wait()
            end = time.perf_counter()
            via_session.append((end - start) * 1e3)
            parts.append(((marks["reduce_in"] - start) * 1e3, (marks["call_in"] - marks["reduce_in"]) * 1e3,
                          (marks["call_out"] - marks["call_in"]) * 1e3 - marks["own"], marks["own"],
                          (marks["reduce_out"] - marks["call_out"]) * 1e3, (end - marks["reduce_out"]) * 1e3))
        else:
            # the transport alone: whatever sits in its input area, n values
            sidecar.append(session.transport.allreduce(n) / 1e3)
            direct.append((time.perf_counter() - start) * 1e3)
    for i in range(args.warmup + args.calls):
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(t)
        gloo.append((time.perf_counter() - start) * 1e3)
    stats = session.stats()
    session.close()
    if args.rank == 0:
        def summary(values):
            kept = sorted(values[args.warmup:])
            return {"median_ms": round(statistics.median(kept), 3), "p90_ms": round(kept[int(0.9 * len(kept))], 3)}
        names = ["handoff_in", "copy_in", "transport_overhead", "sidecar_own", "copy_out_check", "handoff_out"]
        kept = parts[args.warmup:]
        print(json.dumps({"bytes": args.bytes, "world": args.world, "calls": args.calls,
                          "session": summary(via_session), "transport_direct": summary(direct),
                          "sidecar_own": summary(sidecar), "gloo": summary(gloo),
                          "retransmitted_packets": stats["transport"].get("retransmittedPackets"),
                          "timeouts": stats["transport"].get("timeouts"),
                          "session_parts": {name: round(statistics.median(p[i] for p in kept), 3)
                                            for i, name in enumerate(names)}}))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())

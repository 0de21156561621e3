"""One rank of scripts/bench-session.sh: where the time of one all-reduce call through a netreduce.Session goes, with
the sidecar's calls through the call doorbell and as JSON requests, against gloo, in the same run.

For each size (``--sizes``), calls of every mode (``--modes``) alternate, one of each in turn, so that drift and
warm-up hit all alike; every call starts after a barrier:

* ``doorbell``: ``session.submit(t).wait()`` with the sidecar's calls on the call page (the default);
* ``json``: the same with ``session.transport.use_doorbell = False`` (a JSON line each way, as before the doorbell);
* ``gloo``: ``dist.all_reduce(t)`` of the same tensor.

Every result is checked against the exact sum (integer-valued fp32, exact in any order). Before the sizes, ``--jit``
calls of the first size alternate doorbell and JSON and are not reported (the sidecars' per-packet path needs about
80,000 packets before C2 has compiled it). Rank 0 prints one JSON line per size and mode: median and p90 of the
call, after ``--warmup`` calls of each, and the medians of the Session path's parts (``session_parts``, timed by
wrapping the session's own reduce and its transport's call): the hand-over to the session thread, the copy into the
input area, the transport's request and answer less the sidecar's own time, the sidecar's own time, the copy out
of the output area with its tag check, and the hand-back to the caller. With ``--csv`` it also writes them there.
"""
import argparse
import csv
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

PARTS = ["handoff_in", "copy_in", "transport_overhead", "sidecar_own", "copy_out_check", "handoff_out"]


TICK_MS = 1e3 / os.sysconf("SC_CLK_TCK")


def stat_cpu(path):
    """(name, utime + stime in ms) of a /proc/.../stat file: a process's (every thread's) or one thread's, counted in
    clock ticks (summed over many calls the tick sampling averages out)."""
    with open(path, encoding="ascii") as f:
        head, tail = f.read().rsplit(")", 1)
    fields = tail.split()
    return head.split("(", 1)[1], (int(fields[11]) + int(fields[12])) * TICK_MS


def sidecar_threads(pid):
    """The sidecar's CPU over its whole life so far by kind of thread (the JIT's compilers, GC, the endpoint, ...),
    milliseconds: where a short run's CPU goes."""
    kinds = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name, ms = stat_cpu(f"/proc/{pid}/task/{tid}/stat")
        except OSError:
            continue
        kind = ("C2" if name.startswith("C2 ") else "C1" if name.startswith("C1 ") else
                "GC" if name.startswith(("GC ", "G1 ")) else name)
        kinds[kind] = kinds.get(kind, 0) + ms
    return dict(sorted(kinds.items(), key=lambda kv: -kv[1]))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--master", default="10.77.0.1")
    ap.add_argument("--port", type=int, default=29700)
    ap.add_argument("--api", required=True)
    ap.add_argument("--netreduce", required=True)
    ap.add_argument("--sizes", default="287016", help="bytes per call, space-separated (multiples of 4)")
    ap.add_argument("--modes", default="doorbell json gloo")
    ap.add_argument("--calls", type=int, default=50, help="measured calls per size and mode")
    ap.add_argument("--warmup", type=int, default=10, help="calls per size and mode left out")
    ap.add_argument("--jit", type=int, default=0, help="unreported calls of the first size before the sizes")
    ap.add_argument("--csv", default=None)
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "eth0")
    import torch
    import torch.distributed as dist
    import netreduce

    dist.init_process_group("gloo", init_method=f"tcp://{args.master}:{args.port}", rank=args.rank,
                            world_size=args.world)
    if os.environ.get("SIDECAR_JAVA_OPTS"):  # bench-session.sh --sidecar-java-opts: flags for this rank's sidecar
        os.environ["NETREDUCE_JAVA_OPTS"] = os.environ["SIDECAR_JAVA_OPTS"]
    session = netreduce.Session(device="eth0", appliance=args.api, sidecar_command=[args.netreduce])
    if not session.transport.use_doorbell:
        raise SystemExit("the sidecar took no call doorbell")
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
    modes = args.modes.split()

    def tensors(n):
        # integer-valued, below 2^24 summed over the ranks: every order of addition gives the same bits
        base = torch.arange(n, dtype=torch.int64) % 1021
        mine = (base * (args.rank + 1) + args.rank).to(torch.float32)
        expected = sum((base * (r + 1) + r) for r in range(args.world)).to(torch.float32)
        return mine, expected

    # the sidecar's process: the trainer's own, or the agent whose session it is (bench-session.sh --agent)
    sidecar_pid = int(os.environ["BENCH_AGENT_PID"]) if os.environ.get("BENCH_AGENT_PID") else \
        session.transport._process.pid
    sidecar_stat = f"/proc/{sidecar_pid}/stat"

    def sidecar_ms():
        return stat_cpu(sidecar_stat)[1]  # the whole sidecar process, every thread

    def one(mode, mine, expected, parts, cpu=None):
        t = mine.clone()
        dist.barrier()
        starts.append((mode, round(time.time(), 3)))
        side0, own0 = sidecar_ms(), time.process_time()
        start = time.perf_counter()
        if mode == "gloo":
            dist.all_reduce(t)
            end = time.perf_counter()
        else:
            session.transport.use_doorbell = mode == "doorbell"
            session.submit(t).wait()
            end = time.perf_counter()
            if parts is not None:
                parts.append(((marks["reduce_in"] - start) * 1e3, (marks["call_in"] - marks["reduce_in"]) * 1e3,
                              (marks["call_out"] - marks["call_in"]) * 1e3 - marks["own"], marks["own"],
                              (marks["reduce_out"] - marks["call_out"]) * 1e3, (end - marks["reduce_out"]) * 1e3))
        if cpu is not None:
            # this process's CPU (the trainer's thread, the session's, gloo's) and the sidecar's during the call
            cpu.append(((time.process_time() - own0) * 1e3, sidecar_ms() - side0))
        if not torch.equal(t, expected):
            raise SystemExit(f"rank {args.rank}: {mode} call of {t.numel() * 4} bytes is not the exact sum "
                             f"({int((t != expected).sum())} elements differ)")
        return (end - start) * 1e3

    starts = []  # (mode, wall-clock start) of each size's calls, to set beside the sidecars' logs
    sizes = [int(s) for s in args.sizes.split()]
    mine, expected = tensors(sizes[0] // 4)
    for i in range(args.jit):
        one(("doorbell", "json")[i % 2], mine, expected, None)
    rows = []
    every = {}  # (size, mode): every call's time in order, the warm-up's included (rank 0 prints them)
    for size in sizes:
        starts.clear()
        mine, expected = tensors(size // 4)
        times = {m: [] for m in modes}
        parts = {m: [] for m in modes if m != "gloo"}
        cpu = {m: [] for m in modes}
        for _ in range(args.warmup + args.calls):
            for mode in modes:
                times[mode].append(one(mode, mine, expected, parts.get(mode), cpu[mode]))
        for mode in modes:
            kept = sorted(times[mode][args.warmup:])
            row = {"label": args.label, "bytes": size, "world": args.world, "mode": mode, "calls": len(kept),
                   "median_ms": round(statistics.median(kept), 3), "p90_ms": round(kept[int(0.9 * len(kept))], 3),
                   "min_ms": round(kept[0], 3), "first_ms": round(times[mode][0], 3)}
            kept_cpu = cpu[mode][args.warmup:]
            # CPU per call, means over the kept calls: this rank's process and its sidecar (during gloo's calls the
            # sidecar only idles: what it costs a trainer that does not call it)
            row["trainer_cpu_ms"] = round(statistics.fmean(c[0] for c in kept_cpu), 3)
            row["sidecar_cpu_ms"] = round(statistics.fmean(c[1] for c in kept_cpu), 3)
            if mode in parts:
                kept_parts = parts[mode][args.warmup:]
                for i, name in enumerate(PARTS):
                    row[name] = round(statistics.median(p[i] for p in kept_parts), 3)
            rows.append(row)
            every[(size, mode)] = ([round(t, 1) for t in times[mode]], [t for m, t in starts if m == mode])
    stats = session.stats()
    threads = sidecar_threads(sidecar_pid)
    session.close()
    if args.rank != 0:
        # every sidecar's JIT, for bench-session.sh to print after rank 0's lines: one sidecar is a small sample
        print(json.dumps({"rank": args.rank, "sidecar_thread_cpu_ms": threads}))
    else:
        for row in rows:
            print(json.dumps(row))
        for (size, mode), (calls_ms, starts_unix) in every.items():
            print(json.dumps({"bytes": size, "mode": mode, "calls_ms": calls_ms, "starts_unix": starts_unix}))
        print(json.dumps({"sidecar_thread_cpu_ms": threads}))
        print(json.dumps({"retransmitted_packets": stats["transport"].get("retransmittedPackets"),
                          "timeouts": stats["transport"].get("timeouts"), "calls": stats["calls"],
                          "fallback_calls": stats["fallback_calls"]}))
        # how the sidecar's loop waited over its life (all calls, warm-up and the other modes' idle time included),
        # and what its own warm-up did before the first call (worker serve --warm-up-frames)
        print(json.dumps({k: stats["transport"].get(k) for k in ("acksSent", "idleBlocks", "idleYields",
                                                                   "expeditedAcks", "callsWaitingForAcks",
                                                                   "ackWaitUs", "warmUpFrames", "warmUpCalls",
                                                                   "warmUpMs")}))
        if args.csv:
            fields = ["label", "bytes", "world", "mode", "calls", "median_ms", "p90_ms", "min_ms", "first_ms", "trainer_cpu_ms", "sidecar_cpu_ms"] + PARTS
            new = not os.path.exists(args.csv)
            with open(args.csv, "a", newline="") as out:
                writer = csv.DictWriter(out, fieldnames=fields, restval="")
                if new:
                    writer.writeheader()
                writer.writerows(rows)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""One rank of torch.distributed's all-reduce with the gloo backend: the baseline users would otherwise run.

Run in a worker namespace of the test bed, one process per rank (scripts/bench-allreduce.sh --modes gloo does):
    /usr/bin/python3 scripts/bench/gloo_allreduce.py --rank R --world W --master 10.77.0.1 --size BYTES \
        --iterations K [--warmup 1]
Tensors are fp32 with small integer values, so the sum is exact in any order and each rank checks it against the
sum it computes itself. Prints one JSON line in the shape `netreduce worker allreduce --json` prints (ok, matched,
mean_ms, best_ms, call_ms, ...); calls after the warm-up are timed one by one, each after a barrier.
"""
import argparse
import json
import os
import resource
import sys
import time


def process_cpu_ms() -> float:
    """CPU time of the whole process (gloo's threads included), user + system, in milliseconds."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return (usage.ru_utime + usage.ru_stime) * 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--master", required=True, help="address of rank 0 (the TCP store)")
    ap.add_argument("--port", type=int, default=29500)
    ap.add_argument("--size", type=int, required=True, help="tensor bytes")
    ap.add_argument("--type", choices=("fp32", "int32"), default="fp32", help="element type (4 bytes either way)")
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--ifname", default="eth0", help="interface gloo binds to")
    args = ap.parse_args(argv)

    os.environ.setdefault("GLOO_SOCKET_IFNAME", args.ifname)
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://{args.master}:{args.port}", rank=args.rank,
                            world_size=args.world)
    elements = args.size // 4
    generator = torch.Generator().manual_seed(1234)
    # Every rank's tensor, known to every rank: small integers, so fp32 sums are exact in any order.
    def tensor_of(rank: int, iteration: int) -> "torch.Tensor":
        g = torch.Generator().manual_seed(1000 * rank + iteration)
        values = torch.randint(-1000, 1000, (elements,), generator=g, dtype=torch.int32)
        return values if args.type == "int32" else values.to(torch.float32)

    calls, cpu_calls, starts, matched = [], [], [], 0
    error = None
    try:
        for iteration in range(args.warmup + args.iterations):
            t = tensor_of(args.rank, iteration)
            dist.barrier()
            cpu_start = process_cpu_ms()
            start_ns = time.monotonic_ns()  # CLOCK_MONOTONIC, as the bench's samples of the host's other work
            start = time.perf_counter()
            dist.all_reduce(t)
            seconds = time.perf_counter() - start
            cpu = process_cpu_ms() - cpu_start
            if iteration < args.warmup:
                continue
            calls.append(seconds * 1e3)
            cpu_calls.append(cpu)
            starts.append(start_ns)
            expected = sum(tensor_of(r, iteration) for r in range(args.world))
            if torch.equal(t, expected):
                matched += 1
    except Exception as ex:  # report, do not hide: the bench marks the run as failed
        error = str(ex)
    finally:
        del generator
    ok = error is None and matched == args.iterations
    mean = sum(calls) / len(calls) if calls else 0.0
    print(json.dumps({"rank": args.rank, "world": args.world, "mode": "gloo", "type": args.type, "size": args.size,
                      "iterations": args.iterations, "matched": matched, "ok": ok, "mean_ms": mean,
                      "best_ms": min(calls) if calls else 0.0, "rdma_bytes_sent": 0, "wire_bytes_sent": 0,
                      "retransmitted_packets": 0, "timeouts": 0, "error": error,
                      "call_ms": [round(c, 3) for c in calls], "cpu_ms": [round(c, 3) for c in cpu_calls],
                      "call_start_ns": starts}))
    sys.stdout.flush()
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

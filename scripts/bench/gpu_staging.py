"""What staging a CUDA tensor through pinned host memory adds to a Session call (a benchmark, not a test; needs a
CUDA device): W ranks on one machine with a gloo group, a transport double that sums for real
(python/tests/summing_transport.py), and the same tensor summed as a host tensor, as a CUDA tensor in pieces of
``--piece-mib`` (the default 4 MiB: device-to-host copies overlap the previous piece's sum), and as a CUDA tensor
in one piece (no overlap). Prints one JSON line per size and mode from rank 0: median and p10/p90 of the call's
wall time in ms, and the raw device-to-host plus host-to-device copy time of the tensor for scale.

usage: python3 scripts/bench/gpu_staging.py [--world W] [--calls N] [--sizes-mib 4,25,64]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, "python"), os.path.join(ROOT, "python", "tests")]


def _rank(rank, world, store, options):
    sys.path[:0] = [os.path.join(ROOT, "python"), os.path.join(ROOT, "python", "tests")]
    from netreduce import Session  # noqa: PLC0415
    from summing_transport import SummingTransport  # noqa: PLC0415

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    biggest = max(options.sizes) << 20
    modes = (("host", None), ("cuda-pieces", options.piece_mib << 20), ("cuda-one-piece", 2 * biggest))
    for size_mib in options.sizes:
        elements = (size_mib << 20) // 4
        source = torch.randn(elements, generator=torch.Generator().manual_seed(rank))
        device = source.cuda()
        pinned = torch.empty_like(source).pin_memory()
        copies = []
        for _ in range(options.calls):
            torch.cuda.synchronize()
            start = time.perf_counter()
            pinned.copy_(device, non_blocking=True)
            device.copy_(pinned, non_blocking=True)
            torch.cuda.synchronize()
            copies.append((time.perf_counter() - start) * 1e3)
        for mode, piece in modes:
            session = Session(transport=SummingTransport(4 * biggest),
                              cuda_piece_bytes=piece or (4 << 20))
            times = []
            for call in range(options.calls + 2):
                tensor = source.clone() if mode == "host" else device.clone()
                torch.cuda.synchronize()
                dist.barrier()
                start = time.perf_counter()
                session.allreduce_(tensor)
                if tensor.is_cuda:
                    torch.cuda.current_stream().synchronize()
                if call >= 2:  # the first two warm up (pinned buffers, streams)
                    times.append((time.perf_counter() - start) * 1e3)
            session.close()
            if rank == 0:
                quantiles = statistics.quantiles(times, n=10)
                print(json.dumps({"sizeMiB": size_mib, "mode": mode, "world": world, "calls": len(times),
                                  "medianMs": round(statistics.median(times), 2), "p10Ms": round(quantiles[0], 2),
                                  "p90Ms": round(quantiles[-1], 2),
                                  "rawCopiesMs": round(statistics.median(copies), 2)}), flush=True)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--sizes-mib", default="4,25,64")
    parser.add_argument("--piece-mib", type=int, default=4)
    options = parser.parse_args()
    options.sizes = [int(size) for size in options.sizes_mib.split(",")]
    if not torch.cuda.is_available():
        sys.exit("gpu_staging: needs a CUDA device")
    with tempfile.TemporaryDirectory() as directory:
        mp.spawn(_rank, args=(options.world, os.path.join(directory, "store"), options), nprocs=options.world)


if __name__ == "__main__":
    main()

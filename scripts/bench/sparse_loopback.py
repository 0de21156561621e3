"""What netreduce.sparse.HotColdReducer's own work costs, without the appliance: W ranks on one host (loopback gloo),
the DLRM bench's sparse gradients (4 EmbeddingBag tables of 100,000 x 16, bags of 8, Zipf 1.2, 256 samples per rank;
scripts/train/clicks.py), against gloo's sparse all-reduce of the same gradients (what DDP does for each table).

    /usr/bin/python3 scripts/bench/sparse_loopback.py [--mode hotcold|gloo] [--steps 120] [--world 4]

hotcold: the reducer with a 1 MiB hot budget and the "auto" frequency, a gloo all-reduce of the hot block standing in
for the appliance's call (so this times the reducer's packing, cold exchange, sums and merging, not the appliance);
gloo: ``dist.all_reduce`` of each table's sparse gradient. Prints per rank, over the steps after the 21st: the
reducer's parts (ms per step, wall), the whole reduce (ms), the whole step with forward and backward (ms) and the
process's CPU per step (ms, every thread). Not a test: no result is checked (the bed's train.sh checks them).
"""
import argparse
import os
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "scripts", "train"))

ROWS, DIM, TABLES, BATCH = 100_000, 16, 4, 256


def run(rank, args, queue):
    import torch
    import torch.distributed as dist
    from clicks import ClickData
    import netreduce.sparse as sparse

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank, world_size=args.world)
    group = dist.new_group()

    class GlooStandIn:  # the appliance's call, as a gloo all-reduce of the hot block
        element_type, world_size, message_data_bytes = "fp32", args.world, 65536

        def __init__(self):
            self.rank = rank

        def submit(self, tensor):
            return dist.all_reduce(tensor, group=group, async_op=True)

    data = ClickData(args.steps * args.world * BATCH, tables=TABLES, rows=ROWS, pooling=8, zipf=1.2, seed=12)
    embeddings = [torch.nn.EmbeddingBag(ROWS, DIM, mode="sum", sparse=True) for _ in range(TABLES)]
    reducer = None
    if args.mode == "hotcold":
        reducer = sparse.HotColdReducer(GlooStandIn(), {f"t{i}": e.weight for i, e in enumerate(embeddings)},
                                        budget_bytes=1 << 20, sample_steps=10)
    reduce_s = step_s = 0.0
    for step in range(args.steps):
        if step == 21:
            reduce_s = step_s = 0.0
            cpu0 = time.process_time()
            if reducer is not None:
                reducer._times = {k: 0.0 for k in reducer._times}
        rows = slice((step * args.world + rank) * BATCH, (step * args.world + rank + 1) * BATCH)
        t0 = time.perf_counter()
        for e in embeddings:
            e.weight.grad = None
        sum(e(data.sparse[t][rows]).sum() for t, e in enumerate(embeddings)).backward()
        t1 = time.perf_counter()
        if reducer is not None:
            reducer.reduce_()
        else:
            for e in embeddings:
                dist.all_reduce(e.weight.grad, group=group)
        t2 = time.perf_counter()
        reduce_s += t2 - t1
        step_s += t2 - t0
    n = args.steps - 21
    parts = {k: round(v / n * 1e3, 2) for k, v in reducer._times.items()} if reducer is not None else {}
    queue.put((rank, parts, round(reduce_s / n * 1e3, 2), round(step_s / n * 1e3, 2),
               round((time.process_time() - cpu0) / n * 1e3, 2)))
    dist.destroy_process_group()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("hotcold", "gloo"), default="hotcold")
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--port", type=int, default=29950)
    args = ap.parse_args()
    if args.steps < 30:
        ap.error("--steps must be at least 30 (the first 21 are left out)")
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    procs = [ctx.Process(target=run, args=(r, args, queue)) for r in range(args.world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    results = sorted(queue.get() for _ in range(args.world)) if all(p.exitcode == 0 for p in procs) else []
    print(f"mode {args.mode}, {args.world} ranks, steps 21..{args.steps - 1}: rank, reducer's parts (ms/step), "
          f"reduce ms, step ms, CPU ms/step")
    for row in results:
        print(*row)
    return 0 if len(results) == args.world else 1


if __name__ == "__main__":
    sys.exit(main())

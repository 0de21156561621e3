"""DDP training of a DLRM-style click model on synthetic Zipf click data, one rank per process (scripts/train.sh
--model dlrm runs it).

    /usr/bin/python3 scripts/train/dlrm_train.py --mode netreduce|gloo-sparse|gloo-dense --rank R --world W \
        --master 10.77.0.1 [--port 29500] [--steps 120] [--out FILE] [--api unix:/path/api.sock --netreduce CMD ...]
    /usr/bin/python3 scripts/train/dlrm_train.py --mode reference --world W [--steps ...] --out FILE

The model: a bottom MLP (13 dense features -> 64 -> dim), `--tables` EmbeddingBag tables of `--rows` x `--dim`
(sum of a bag of `--pooling` values per sample), DLRM's dot-product interaction of the bottom output and the T
embeddings, a top MLP (dim + (T+1)T/2 -> 64 -> 1), binary cross-entropy on the click. The data: scripts/train/clicks.py
(Zipf `--zipf` over each table's rows, seeded). Plain SGD (no momentum: PyTorch's SGD applies sparse gradients only
without it), the same learning rate for every parameter.

Modes (the embedding gradients are what differs):
  netreduce    the tables left out of DDP (netreduce.sparse.ignore_in_ddp); the dense parameters through DDP with
               netreduce.allreduce_hook; after backward, netreduce.sparse.HotColdReducer: hot rows through the
               appliance, cold rows all-gathered through gloo, summed in rank order, averaged. With --fuse-dense
               no DDP: the reducer sums the dense gradients in the hot rows' appliance call (one call per step).
  gloo-sparse  plain DDP over the whole model: DDP all-reduces each sparse table gradient with gloo's sparse
               all-reduce (an all-gather of indices and values, summed on the host), the dense ones with gloo's ring.
  gloo-dense   the same model with sparse=False tables: DDP all-reduces the tables' dense gradients (every row, every
               step) with gloo's ring, with the dense parameters.
  reference    no processes, no network: the W ranks simulated in this process, the dense gradients and the tables'
               sparse gradients (netreduce.sparse's reference: coalesced, +0.0 where untouched) summed in each of
               several fixed fp32 orders, one run per order. The rank-order run is what the netreduce run must
               reproduce bit for bit; the spread between orders is the reassociation tolerance (compare.py).

Per step every rank records its loss, its step time (forward, backward with DDP's all-reduces, the sparse reduce in
netreduce mode, optimizer step), the bytes its eth0 sent (all traffic: gloo's TCP and the sidecar's RoCE frames), and
in netreduce mode the sidecar's RDMA bytes posted and the reducer's per-step figures. Test loss, accuracy and AUC on
4096 held-out samples every --eval-every steps. Rank 0 writes the JSON that scripts/train/compare.py and
scripts/train/dlrm_compare.py read.
"""
import argparse
import functools
import hashlib
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))  # netreduce, if not installed

from clicks import DENSE_FEATURES, ClickData  # noqa: E402
# ddp_train, imported here before torch is, sets OPENBLAS_NUM_THREADS (its comment says why)
from ddp_train import (PostedBytes, add_stats_every_step, default_orders, exit_without_teardown,  # noqa: E402
                       order_name, parse_order, read_tx, sum_in_order)

MODES = ("netreduce", "gloo-sparse", "gloo-dense", "reference")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=MODES, required=True)
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--master", default="10.77.0.1")
    ap.add_argument("--port", type=int, default=29500)
    ap.add_argument("--dev", default="eth0")
    ap.add_argument("--tables", type=int, default=4)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--pooling", type=int, default=8)
    ap.add_argument("--zipf", type=float, default=1.2)
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--batch", type=int, default=256, help="samples per rank per step")
    ap.add_argument("--lr", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--eval-every", type=int, default=20)
    ap.add_argument("--out")
    ap.add_argument("--label", default="", help="a name for this run (e.g. the hot budget), kept in the JSON")
    add_stats_every_step(ap)
    # netreduce
    ap.add_argument("--api")
    ap.add_argument("--netreduce")
    ap.add_argument("--ring-id", type=int, default=1)
    ap.add_argument("--window", type=int, default=16)
    ap.add_argument("--msg-len", type=int, default=16)
    ap.add_argument("--payload", type=int, default=4096)
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--hot-budget", type=int, default=1 << 20, help="bytes of the hot block per step")
    ap.add_argument("--min-frequency", default="auto", help="'auto' (1/(W-1)) or a fraction")
    ap.add_argument("--coverage", type=float, default=1.0)
    ap.add_argument("--sample-steps", type=int, default=10)
    ap.add_argument("--sample-rate", type=float, default=1.0)
    ap.add_argument("--resample-every", type=int, default=50)
    ap.add_argument("--no-fill", action="store_true",
                    help="netreduce: do not fill the hot block's last message with more rows (fill_messages=False)")
    ap.add_argument("--cold-exchange", choices=("alltoall", "allgather"), default="alltoall",
                    help="netreduce: how the cold rows travel (HotColdReducer's cold_exchange)")
    ap.add_argument("--fuse-dense", action="store_true",
                    help="netreduce: no DDP; the dense gradients go in the hot rows' appliance call (dense=)")
    # reference
    ap.add_argument("--orders", default="", help="reference: summation orders (as ddp_train.py's --orders)")
    return ap.parse_args(argv)


# -- model, data, evaluation ------------------------------------------------------------------------------------------

def make_model(args, sparse=True):
    import torch
    from torch import nn

    class DLRM(nn.Module):
        def __init__(self):
            super().__init__()
            self.bottom = nn.Sequential(nn.Linear(DENSE_FEATURES, 64), nn.ReLU(), nn.Linear(64, args.dim), nn.ReLU())
            self.embeddings = nn.ModuleList(nn.EmbeddingBag(args.rows, args.dim, mode="sum", sparse=sparse)
                                            for _ in range(args.tables))
            pairs = (args.tables + 1) * args.tables // 2
            self.top = nn.Sequential(nn.Linear(args.dim + pairs, 64), nn.ReLU(), nn.Linear(64, 1))
            self.register_buffer("pairs", torch.triu_indices(args.tables + 1, args.tables + 1, offset=1),
                                 persistent=False)

        def forward(self, dense, sparse_features):
            x = self.bottom(dense)
            z = torch.stack([x] + [emb(sparse_features[t]) for t, emb in enumerate(self.embeddings)], dim=1)
            interaction = torch.bmm(z, z.transpose(1, 2))[:, self.pairs[0], self.pairs[1]]
            return self.top(torch.cat([x, interaction], dim=1)).squeeze(1)

    torch.manual_seed(args.seed)
    model = DLRM()
    with torch.no_grad():
        for emb in model.embeddings:  # DLRM's uniform initialisation, small enough for sums of 8
            emb.weight.uniform_(-0.05, 0.05)
    return model


def model_name(args):
    return (f"DLRM: {args.tables} EmbeddingBag tables of {args.rows} x {args.dim} (bags of {args.pooling}, Zipf "
            f"{args.zipf}), MLPs 13-64-{args.dim} and {args.dim + (args.tables + 1) * args.tables // 2}-64-1")


def load(args):
    return ClickData(args.steps * args.world * args.batch, tables=args.tables, rows=args.rows, pooling=args.pooling,
                     zipf=args.zipf, seed=args.seed)


@functools.lru_cache(maxsize=1)
def sample_permutation(samples, seed):
    """One permutation of every sample the run draws, made once: drawing 10^5-10^6 numbers every step cost each rank
    an eighth of its CPU."""
    import torch

    return torch.randperm(samples, generator=torch.Generator().manual_seed(seed * 1000 + 1))


def step_indices(args, step, rank):
    start = (step * args.world + rank) * args.batch
    return sample_permutation(args.steps * args.world * args.batch, args.seed)[start:start + args.batch]


def auc(scores, labels):
    import torch

    order = torch.argsort(scores)
    ranks = torch.empty_like(scores, dtype=torch.float64)
    ranks[order] = torch.arange(1, scores.numel() + 1, dtype=torch.float64)
    positives = labels > 0.5
    n_pos = int(positives.sum())
    n_neg = scores.numel() - n_pos
    if not n_pos or not n_neg:
        return float("nan")
    return float((ranks[positives].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def evaluate(model, data):
    import torch

    dense, sparse, labels = data.test_set()
    with torch.no_grad():
        logits = model(dense, sparse)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels).item()
    predicted = (logits > 0).float()
    correct = int((predicted == labels).sum())
    return {"correct": correct, "total": int(labels.numel()), "accuracy": correct / labels.numel(), "loss": loss,
            "auc": auc(logits, labels), "predictions_sha1": hashlib.sha1(predicted.numpy().tobytes()).hexdigest()}


def parameter_digest(model):
    h = hashlib.sha1()
    for p in model.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def sizes(model):
    tables = sum(e.weight.numel() for e in model.embeddings)
    return tables, sum(p.numel() for p in model.parameters()) - tables


# -- one rank ---------------------------------------------------------------------------------------------------------

def run_rank(args):
    os.environ.setdefault("GLOO_SOCKET_IFNAME", args.dev)
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    t_start = time.perf_counter()
    data = load(args)
    dist.init_process_group("gloo", init_method=f"tcp://{args.master}:{args.port}", rank=args.rank,
                            world_size=args.world)
    model = make_model(args, sparse=args.mode != "gloo-dense")
    table_params, dense_params = sizes(model)
    session = reducer = None
    if args.mode == "netreduce":
        import netreduce
        from netreduce import sparse

        session = netreduce.Session(device=args.dev, appliance=args.api, ring_id=args.ring_id, element_type="fp32",
                                    window=args.window, msg_len=args.msg_len, payload_size=args.payload,
                                    timeout=args.timeout,
                                    sidecar_command=[args.netreduce] if args.netreduce else None)
        tables = sparse.embedding_tables(model)
        frequency = args.min_frequency if args.min_frequency == "auto" else float(args.min_frequency)
        dense = [p for p in model.parameters() if all(p is not t for t in tables.values())]
        reducer = sparse.HotColdReducer(session, tables, budget_bytes=args.hot_budget, min_frequency=frequency,
                                        coverage=args.coverage, sample_steps=args.sample_steps,
                                        sample_rate=args.sample_rate, resample_every=args.resample_every,
                                        dense=dense if args.fuse_dense else None,
                                        fill_messages=not args.no_fill, cold_exchange=args.cold_exchange)
        if args.fuse_dense:
            ddp = model  # every rank starts from the same seed; the reducer sums every gradient
        else:
            sparse.ignore_in_ddp(model, tables)
            ddp = torch.nn.parallel.DistributedDataParallel(model)
            ddp.register_comm_hook(session, netreduce.allreduce_hook)
    else:
        ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    criterion = torch.nn.BCEWithLogitsLoss()
    dist.barrier()
    setup_s = time.perf_counter() - t_start

    losses, step_ms, sparse_ms, tx_bytes, per_step, evals = [], [], [], [], [], []
    step_end_unix = []  # this rank's wall clock at each step's end: lines the steps up with outside CPU samples
    posted = PostedBytes(session, args.stats_every_step)
    train_start = time.perf_counter()
    for step in range(args.steps):
        dense, sparse_features, labels = data.train_batch(step_indices(args, step, args.rank))
        tx0 = read_tx(args.dev)
        t0 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = criterion(ddp(dense, sparse_features), labels)
        loss.backward()
        t1 = time.perf_counter()
        if reducer is not None:
            reducer.reduce_()
        t2 = time.perf_counter()
        optimizer.step()
        t3 = time.perf_counter()
        tx1 = read_tx(args.dev)
        losses.append(loss.item())
        step_ms.append((t3 - t0) * 1e3)
        step_end_unix.append(time.time())
        sparse_ms.append((t2 - t1) * 1e3)
        tx_bytes.append(tx1 - tx0 if tx0 >= 0 and tx1 >= 0 else -1)
        if session is not None:
            posted.after_step()
            per_step.append(reducer.last)
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            evals.append({"epoch": len(evals), "step": step, **evaluate(model, data)})
    train_s = time.perf_counter() - train_start

    stats = session.stats() if session is not None else None
    sparse_stats = reducer.stats() if reducer is not None else None

    def gather(values, dtype):
        t = torch.tensor(values, dtype=dtype)
        out = [torch.zeros_like(t) for _ in range(args.world)]
        dist.all_gather(out, t)
        return [o.tolist() for o in out]

    all_losses = gather(losses, torch.float64)
    all_ms = gather(step_ms, torch.float64)
    all_sparse_ms = gather(sparse_ms, torch.float64)
    all_tx = gather(tx_bytes, torch.int64)
    all_posted = gather(posted.per_step, torch.int64) if session is not None and args.stats_every_step else None
    extras = [None] * args.world
    dist.all_gather_object(extras, {"params_sha1": parameter_digest(model), "stats": stats, "sparse": sparse_stats,
                                    "rdma_bytes_posted_total": posted.total(stats),
                                    "sparse_per_step": per_step, "setup_s": setup_s, "train_s": train_s,
                                    "final": evals[-1]})
    if session is not None:
        session.close()
    if args.rank == 0 and args.out:
        result = {
            "mode": args.mode, "label": args.label, "world": args.world, "seed": args.seed,
            "batch_per_rank": args.batch, "lr": args.lr, "momentum": 0.0, "steps": args.steps,
            "steps_per_epoch": args.steps, "model": model_name(args), "parameters": table_params + dense_params,
            "table_parameters": table_params, "dense_parameters": dense_params,
            "grad_bytes": 4 * (table_params + dense_params), "train_samples": data.n_train,
            "test_samples": data.n_test, "torch": torch.__version__, "settings": vars(args),
            "loss": [sum(rank[i] for rank in all_losses) / args.world for i in range(args.steps)],
            "loss_per_rank": all_losses, "step_ms": all_ms, "sparse_ms": all_sparse_ms, "tx_bytes": all_tx,
            "rdma_bytes_posted": all_posted, "step_end_unix": step_end_unix, "epochs": evals, "final": evals[-1],
            "params_identical": len({x["params_sha1"] for x in extras}) == 1, "ranks": extras,
        }
        tmp = args.out + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(result, f)
        os.replace(tmp, args.out)
    dist.barrier()
    dist.destroy_process_group()
    status = 0
    if session is not None and stats and (stats.get("fallback_calls") or stats.get("broken")):
        print(f"dlrm_train: rank {args.rank}: {stats.get('fallback_calls')} calls fell back ({stats.get('broken')})",
              file=sys.stderr)
        status = 1
    exit_without_teardown(status)  # here, with the DDP module still alive


# -- reference --------------------------------------------------------------------------------------------------------

def sparse_sum_in_order(order, grads, rows, dim, world):
    """netreduce.sparse's reference for one table, in `order`: coalesced, dense on the union of touched rows with
    +0.0 where a rank did not touch a row, summed in the nested order, divided by W."""
    import torch

    from netreduce.sparse import coalesced_rows

    parts = [coalesced_rows(g, rows, dim) for g in grads]
    union = torch.unique(torch.cat([i for i, _ in parts]))
    dense = []
    for indices, values in parts:
        d = torch.zeros(union.numel(), dim)
        d[torch.searchsorted(union, indices)] = values
        dense.append(d)
    values = sum_in_order(order, dense).div_(world)
    return torch.sparse_coo_tensor(union.unsqueeze(0), values, (rows, dim))._coalesced_(True)


def run_reference(args):
    import torch

    torch.set_num_threads(1)
    data = load(args)
    orders = ([(order_name(parse_order(o)), parse_order(o)) for o in args.orders.split()] if args.orders
              else default_orders(args.world))
    runs = []
    for name, order in orders:
        started = time.perf_counter()
        model = make_model(args)
        tables = [e.weight for e in model.embeddings]
        dense_params = [p for p in model.parameters() if all(p is not t for t in tables)]
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
        criterion = torch.nn.BCEWithLogitsLoss()
        losses, evals = [], []
        for step in range(args.steps):
            dense_grads, table_grads, step_losses = [], [], []
            for r in range(args.world):
                dense, sparse_features, labels = data.train_batch(step_indices(args, step, r))
                optimizer.zero_grad(set_to_none=True)
                loss = criterion(model(dense, sparse_features), labels)
                loss.backward()
                dense_grads.append(torch.cat([p.grad.reshape(-1) for p in dense_params]))
                table_grads.append([t.grad for t in tables])
                step_losses.append(loss.item())
            mean = sum_in_order(order, dense_grads).div_(args.world)
            offset = 0
            for p in dense_params:
                p.grad = mean[offset:offset + p.numel()].view_as(p).clone()
                offset += p.numel()
            for i, t in enumerate(tables):
                t.grad = sparse_sum_in_order(order, [g[i] for g in table_grads], args.rows, args.dim, args.world)
            optimizer.step()
            losses.append(sum(step_losses) / args.world)
            if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
                evals.append({"epoch": len(evals), "step": step, **evaluate(model, data)})
        runs.append({"name": name, "order": order_name(order), "loss": losses, "epochs": evals,
                     "final": evals[-1], "seconds": time.perf_counter() - started})
        print(f"reference {name:14s} {order_name(order):12s} final loss {losses[-1]:.6f} test AUC "
              f"{evals[-1]['auc']:.4f} accuracy {evals[-1]['accuracy']:.4f} ({runs[-1]['seconds']:.1f} s)",
              flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump({"mode": "reference", "world": args.world, "seed": args.seed, "steps": args.steps,
                       "steps_per_epoch": args.steps, "runs": runs}, f)
    return 0


def main(argv=None):
    args = parse_args(argv)
    if args.mode == "reference":
        return run_reference(args)
    if args.mode == "netreduce" and not args.api:
        raise SystemExit("dlrm_train: --mode netreduce needs --api (the appliance's control API)")
    return run_rank(args)


if __name__ == "__main__":
    sys.exit(main())

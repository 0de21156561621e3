"""DDP training of a small CNN on scikit-learn's 8x8 digits, one rank per process (scripts/train.sh runs it).

    /usr/bin/python3 scripts/train/ddp_train.py --mode netreduce|gloo --rank R --world W --master 10.77.0.1 \
        [--port 29500] [--epochs 10 | --steps N] [--out FILE] \
        [--api unix:/path/api.sock --netreduce .../aggregator-daemon/target/netreduce --ring-id 1 ...]
    /usr/bin/python3 scripts/train/ddp_train.py --mode reference --world W [--epochs ...] --out FILE

The data set is `sklearn.datasets.load_digits` (1797 8x8 images, shipped inside Debian's python3-sklearn: nothing is
downloaded). A fixed stratified split holds out 20 % for testing. Every epoch draws one permutation of the training
set from the seed (the same on every rank and in every mode); global batch s is the slice [s*W*B, (s+1)*W*B) of it
and rank r trains on the r-th B samples of that slice (the tail that does not fill a global batch is left out).
The model is initialised from the same seed on every rank (DDP also broadcasts rank 0's parameters).

Modes:
  netreduce  DDP with netreduce.allreduce_hook: each gradient bucket is summed through the appliance (sidecar
             transport; the appliance sums fp32 in rank order) and divided by W.
  gloo       plain DDP: the process group's own all-reduce (gloo ring) of the bucket, pre-divided by W.
  reference  no processes, no network: the W ranks simulated in this one process, the same batches, gradients summed
             in each of several fixed orders (rank order, reversed, every rotation, a pairwise tree), one training
             run per order. Rank order is what the appliance computes, so the netreduce run must reproduce it bit for
             bit; the spread between the orders is what fp32 reassociation alone does to the loss curve, which
             scripts/train/compare.py turns into the tolerance for netreduce vs gloo.

Per step, every rank records its loss (the mean cross-entropy of its batch), its time for the step (forward, backward
including the gradient all-reduce, optimizer step) and the bytes its eth0 sent during the step
(/sys/class/net/eth0/statistics/tx_bytes in the worker's namespace: frames with their headers, whatever the transport;
in netreduce mode also the sidecar's RDMA bytes posted). Nothing but the gradient all-reduce crosses the network
during a step: the losses are gathered once at the end. Test accuracy is taken at the end of every epoch. Rank 0
writes one JSON file with everything.
"""
import argparse
import hashlib
import json
import os
import sys
import time

# W ranks share the machine, so each trainer computes on one thread (torch.set_num_threads(1) below). That does not
# reach the OpenBLAS of Debian's torch: its own worker thread spins in sched_yield between matrix products, all the
# time in a training loop (one such thread costs a rank about ten times the CPU of its products). Set before torch
# loads OpenBLAS; a value the caller gave wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

SUPPORTED_MODES = ("netreduce", "gloo", "reference")


def add_stats_every_step(ap):
    """The trainers' --stats-every-step (this script's and dlrm_train.py's)."""
    ap.add_argument("--stats-every-step", action="store_true",
                    help="netreduce: ask the sidecar for its counters after every step (each step's RDMA bytes "
                         "posted); otherwise once before the first step and once after the last (a JSON request "
                         "per step costs each sidecar and trainer CPU that gloo's runs do not pay)")


class PostedBytes:
    """The RDMA payload a rank's sidecar posted (its transport's bytesPosted): read after every step with
    --stats-every-step (``per_step``), else before the first step and after the last (``total``)."""

    def __init__(self, session, every_step):
        self.session, self.every_step, self.per_step = session, every_step, []
        self.start = self.last = session.stats()["transport"].get("bytesPosted", 0) if session is not None else 0

    def after_step(self):
        if self.session is None or not self.every_step:
            return
        now = self.session.stats()["transport"].get("bytesPosted", self.last)
        self.per_step.append(now - self.last if now >= self.last else now)  # a fresh transport counts from 0
        self.last = now

    def total(self, stats):
        """The bytes posted over the run, from the session's final ``stats``; None when read after every step or
        without a session."""
        if self.session is None or self.every_step:
            return None
        return stats["transport"].get("bytesPosted", self.start) - self.start


def exit_without_teardown(status):
    """Leave the process at once, while the DDP module is still referenced. With torch 1.13's gloo, freeing it can
    deadlock: the reducer's destructor joins a process-group thread that is freeing a tensor and waits for the GIL the
    main thread holds, while the store's thread spins on the closed socket of rank 0, which has exited (gdb on a rank
    hung at 100 % CPU with its results written, until train.sh's timeout killed it: about one run in ten). The DDP
    module is freed when the function holding it returns, so call this from that function, once everything is
    written and closed."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status or 0)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=SUPPORTED_MODES, required=True)
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--master", default="10.77.0.1", help="rank 0's address (the TCP store)")
    ap.add_argument("--port", type=int, default=29500)
    ap.add_argument("--dev", default="eth0", help="interface: gloo's, the sidecar's, and the one whose tx bytes count")
    ap.add_argument("--model", choices=("cnn", "mlp"), default="cnn")
    ap.add_argument("--hidden", type=int, default=1536, help="hidden units of --model mlp")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: all epochs)")
    ap.add_argument("--batch", type=int, default=32, help="samples per rank per step")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--out", help="JSON file rank 0 writes")
    # netreduce session
    ap.add_argument("--api", help="the appliance's control API (unix:/path/api.sock)")
    ap.add_argument("--netreduce", help="the netreduce launcher (aggregator-daemon/target/netreduce)")
    ap.add_argument("--ring-id", type=int, default=1)
    ap.add_argument("--window", type=int, default=8)
    ap.add_argument("--msg-len", type=int, default=16)
    ap.add_argument("--payload", type=int, default=4096)
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds without progress before a call fails")
    ap.add_argument("--fallback", action="store_true",
                    help="netreduce: a failed call falls back to gloo, and the ranks go back to the appliance when "
                         "it answers again (Session(fallback=True)); the run then succeeds with fallbacks")
    ap.add_argument("--recover-after", type=float, default=30.0,
                    help="with --fallback: seconds on gloo before trying the appliance again")
    ap.add_argument("--progress", help="rank 0 writes the index of each step it finished to this file")
    add_stats_every_step(ap)
    # reference
    ap.add_argument("--orders", default="",
                    help="reference mode: summation orders, e.g. '0123,3210,(01)(23)' (default: rank order, "
                         "reversed, every rotation, pairwise tree)")
    return ap.parse_args(argv)


# -- what every mode shares: data, model, batches, evaluation -------------------------------------------------------

def load_data(seed):
    import numpy as np
    import torch
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.data.astype(np.float32) / 16.0).reshape(-1, 1, 8, 8)
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y)
    # Standardised with the training set's mean and deviation: without it the CNN sits on a plateau for ~25 steps
    # and then escapes it along an unstable direction that amplifies every rounding difference ~1e5-fold.
    mean, std = x_train.mean(dtype=np.float64), x_train.std(dtype=np.float64)
    x_train = ((x_train - mean) / std).astype(np.float32)
    x_test = ((x_test - mean) / std).astype(np.float32)
    return (torch.from_numpy(np.ascontiguousarray(x_train)), torch.from_numpy(y_train),
            torch.from_numpy(np.ascontiguousarray(x_test)), torch.from_numpy(y_test))


def model_name(model: str, hidden: int) -> str:
    return "CNN conv16-conv32-pool-fc128-fc10" if model == "cnn" else f"MLP fc{hidden}-fc{hidden}-fc10"


def make_model(seed, model="cnn", hidden=1536):
    """cnn: 71,754 parameters (a latency-bound all-reduce: one 287 KB bucket per step); mlp: two hidden layers of
    `hidden` units (1536: 2.47 M parameters, 9.9 MB of gradient per step: bandwidth-bound at 1 Gbit/s)."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    if model == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                             nn.Linear(hidden, 10))
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 4 * 4, 128), nn.ReLU(), nn.Linear(128, 10))


def schedule(n_train, world, batch, epochs, max_steps):
    """[(epoch, step_in_epoch)] for every step that runs."""
    per_epoch = n_train // (world * batch)
    if per_epoch == 0:
        raise SystemExit(f"ddp_train: {n_train} training samples do not fill one global batch of {world}x{batch}")
    steps = [(e, s) for e in range(epochs) for s in range(per_epoch)]
    if max_steps:
        if max_steps > len(steps):
            epochs = -(-max_steps // per_epoch)
            steps = [(e, s) for e in range(epochs) for s in range(per_epoch)]
        steps = steps[:max_steps]
    return steps, per_epoch


def epoch_permutation(n_train, seed, epoch):
    import torch

    return torch.randperm(n_train, generator=torch.Generator().manual_seed(seed * 1000 + epoch))


def batch_indices(permutation, step_in_epoch, rank, world, batch):
    start = (step_in_epoch * world + rank) * batch
    return permutation[start:start + batch]


def evaluate(model, x_test, y_test):
    import torch

    with torch.no_grad():
        logits = model(x_test)
        loss = torch.nn.functional.cross_entropy(logits, y_test).item()
        predicted = logits.argmax(dim=1)
    correct = int((predicted == y_test).sum().item())
    return {"correct": correct, "total": int(y_test.numel()), "accuracy": correct / y_test.numel(), "loss": loss,
            "predictions_sha1": hashlib.sha1(predicted.numpy().tobytes()).hexdigest()}


def parameter_digest(model):
    h = hashlib.sha1()
    for p in model.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def read_tx(dev):
    try:
        with open(f"/sys/class/net/{dev}/statistics/tx_bytes", encoding="ascii") as f:
            return int(f.read())
    except OSError:
        return -1


# -- one rank of DDP -------------------------------------------------------------------------------------------------

def run_rank(args):
    os.environ.setdefault("GLOO_SOCKET_IFNAME", args.dev)
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)  # W ranks share the machine; one thread also keeps every kernel's sum order fixed
    t_start = time.perf_counter()
    x_train, y_train, x_test, y_test = load_data(args.seed)
    dist.init_process_group("gloo", init_method=f"tcp://{args.master}:{args.port}", rank=args.rank,
                            world_size=args.world)
    model = make_model(args.seed, args.model, args.hidden)
    grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    session = None
    if args.mode == "netreduce":
        import netreduce

        session = netreduce.Session(device=args.dev, appliance=args.api, ring_id=args.ring_id, element_type="fp32",
                                    window=args.window, msg_len=args.msg_len, payload_size=args.payload,
                                    timeout=args.timeout, fallback=args.fallback,
                                    recover_after=args.recover_after,
                                    sidecar_command=[args.netreduce] if args.netreduce else None)
        ddp.register_comm_hook(session, netreduce.allreduce_hook)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    criterion = torch.nn.CrossEntropyLoss()
    steps, per_epoch = schedule(len(y_train), args.world, args.batch, args.epochs, args.steps)
    dist.barrier()
    setup_s = time.perf_counter() - t_start

    losses, step_ms, tx_bytes, epochs_done, paths = [], [], [], [], []
    step_end_unix = []  # this rank's wall clock at each step's end: lines the steps up with outside CPU samples
    fallen = 0
    permutation, epoch = None, -1
    posted = PostedBytes(session, args.stats_every_step)
    train_start = time.perf_counter()
    for index, (e, s) in enumerate(steps):
        if e != epoch:
            epoch, permutation = e, epoch_permutation(len(y_train), args.seed, e)
        idx = batch_indices(permutation, s, args.rank, args.world, args.batch)
        xb, yb = x_train[idx], y_train[idx]
        tx0 = read_tx(args.dev)
        t0 = time.perf_counter()
        optimizer.zero_grad()
        loss = criterion(ddp(xb), yb)
        loss.backward()  # returns once DDP has every bucket's all-reduced gradients
        optimizer.step()
        t1 = time.perf_counter()
        tx1 = read_tx(args.dev)
        losses.append(loss.item())
        step_ms.append((t1 - t0) * 1e3)
        step_end_unix.append(time.time())
        tx_bytes.append(tx1 - tx0 if tx0 >= 0 and tx1 >= 0 else -1)
        if session is not None:
            posted.after_step()
            # Which way this step's buckets went: through the appliance, or (some or all) through gloo.
            paths.append("fallback" if session.fallback_calls > fallen else "appliance")
            fallen = session.fallback_calls
        if args.progress and args.rank == 0:
            with open(args.progress, "w", encoding="utf-8") as f:
                f.write(f"{index}\n")
        if index + 1 == len(steps) or steps[index + 1][0] != e:
            epochs_done.append({"epoch": e, "step": index, **evaluate(model, x_test, y_test)})
    train_s = time.perf_counter() - train_start

    stats = session.stats() if session is not None else None
    # Everything crosses the network only now, after the last step.
    def gather(values, dtype):
        t = torch.tensor(values, dtype=dtype)
        out = [torch.zeros_like(t) for _ in range(args.world)]
        dist.all_gather(out, t)
        return [o.tolist() for o in out]

    all_losses = gather(losses, torch.float64)
    all_ms = gather(step_ms, torch.float64)
    all_tx = gather(tx_bytes, torch.int64)
    all_posted = gather(posted.per_step, torch.int64) if session is not None and args.stats_every_step else None
    extras = [None] * args.world
    dist.all_gather_object(extras, {"params_sha1": parameter_digest(model), "stats": stats,
                                    "rdma_bytes_posted_total": posted.total(stats),
                                    "setup_s": setup_s, "train_s": train_s, "final": epochs_done[-1]})
    if session is not None:
        session.close()
    if args.rank == 0 and args.out:
        result = {
            "mode": args.mode, "world": args.world, "seed": args.seed, "batch_per_rank": args.batch, "lr": args.lr,
            "momentum": args.momentum, "steps": len(steps), "steps_per_epoch": per_epoch,
            "model": model_name(args.model, args.hidden), "parameters": grad_bytes // 4, "grad_bytes": grad_bytes,
            "train_samples": len(y_train), "test_samples": len(y_test), "torch": torch.__version__,
            "loss": [sum(rank[i] for rank in all_losses) / args.world for i in range(len(steps))],
            "loss_per_rank": all_losses, "step_ms": all_ms, "step_end_unix": step_end_unix, "tx_bytes": all_tx, "rdma_bytes_posted": all_posted,
            "epochs": epochs_done, "final": epochs_done[-1], "paths": paths,
            "params_identical": len({x["params_sha1"] for x in extras}) == 1,
            "ranks": extras,
        }
        tmp = args.out + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(result, f)
        os.replace(tmp, args.out)
    # Every rank past its last collective before any tears down: rank 0 hosts the store, and one gloo rank of a
    # train.sh run (1 in about 6) was seen never to exit after rank 0 had finished and gone.
    dist.barrier()
    dist.destroy_process_group()
    status = 0
    if session is not None and stats and (stats.get("fallback_calls") or stats.get("broken")) and not args.fallback:
        print(f"ddp_train: rank {args.rank}: {stats.get('fallback_calls')} calls fell back to gloo "
              f"({stats.get('broken')})", file=sys.stderr)
        status = 1
    exit_without_teardown(status)  # here, with `ddp` still alive


# -- reference: the W ranks in one process, summed in fixed orders --------------------------------------------------

def default_orders(world):
    ranks = list(range(world))
    orders = [("rank order", ranks), ("reversed", ranks[::-1])]
    for k in range(1, world):
        orders.append((f"rotation {k}", ranks[k:] + ranks[:k]))
    tree = ranks
    while len(tree) > 1:  # pairwise: ((0+1)+(2+3)), ...
        tree = [tree[i:i + 2] if i + 1 < len(tree) else tree[i] for i in range(0, len(tree), 2)]
    orders.append(("pairwise tree", tree[0]))
    unique, seen = [], set()
    for name, order in orders:  # with 2 ranks reversed is rotation 1; with 3 the tree (01)2 is rank order
        if order_name(canonical(order)) not in seen:
            seen.add(order_name(canonical(order)))
            unique.append((name, order))
    return unique


def canonical(order):
    """The same sum written left to right where it can be: ((01)2) is 012."""
    order = [o if isinstance(o, int) else canonical(o) for o in order]
    while order and not isinstance(order[0], int):
        order = order[0] + order[1:]
    return [o[0] if isinstance(o, list) and len(o) == 1 else o for o in order]


def parse_order(text):
    """'0123' or '3,2,1,0' (a left-to-right sum) or '(01)(23)' (nested)."""
    stack = [[]]
    for ch in text.replace(",", ""):
        if ch == "(":
            stack.append([])
        elif ch == ")":
            inner = stack.pop()
            stack[-1].append(inner)
        elif ch.isdigit():
            stack[-1].append(int(ch))
    return stack[0]


def order_name(order):
    return "".join(str(o) if isinstance(o, int) else "(" + order_name(o) + ")" for o in order)


def sum_in_order(order, grads):
    """Left-to-right fp32 sum of the nested order: [0, 1, 2] is (g0 + g1) + g2, [[0, 1], [2, 3]] is (g0+g1)+(g2+g3)."""
    total = None
    for item in order:
        term = grads[item] if isinstance(item, int) else sum_in_order(item, grads)
        total = term.clone() if total is None else total.add_(term)
    return total


def run_reference(args):
    import torch

    torch.set_num_threads(1)
    x_train, y_train, x_test, y_test = load_data(args.seed)
    steps, per_epoch = schedule(len(y_train), args.world, args.batch, args.epochs, args.steps)
    if args.orders:
        orders = [(order_name(parse_order(o)), parse_order(o)) for o in args.orders.split()]
    else:
        orders = default_orders(args.world)
    runs = []
    for name, order in orders:
        started = time.perf_counter()
        model = make_model(args.seed, args.model, args.hidden)
        params = list(model.parameters())
        optimizer = torch.optim.SGD(params, lr=args.lr, momentum=args.momentum)
        criterion = torch.nn.CrossEntropyLoss()
        losses, epochs_done, permutation, epoch = [], [], None, -1
        for index, (e, s) in enumerate(steps):
            if e != epoch:
                epoch, permutation = e, epoch_permutation(len(y_train), args.seed, e)
            grads, step_losses = [], []
            for r in range(args.world):
                idx = batch_indices(permutation, s, r, args.world, args.batch)
                optimizer.zero_grad()
                loss = criterion(model(x_train[idx]), y_train[idx])
                loss.backward()
                grads.append(torch.cat([p.grad.reshape(-1) for p in params]))
                step_losses.append(loss.item())
            # as the netreduce hook: the fp32 sum, then divided by W (exact when W is a power of two)
            mean = sum_in_order(order, grads).div_(args.world)
            offset = 0
            for p in params:
                p.grad.copy_(mean[offset:offset + p.numel()].view_as(p))
                offset += p.numel()
            optimizer.step()
            losses.append(sum(step_losses) / args.world)
            if index + 1 == len(steps) or steps[index + 1][0] != e:
                epochs_done.append({"epoch": e, "step": index, **evaluate(model, x_test, y_test)})
        runs.append({"name": name, "order": order_name(order), "loss": losses, "epochs": epochs_done,
                     "final": epochs_done[-1], "seconds": time.perf_counter() - started})
        print(f"reference {name:14s} {order_name(order):12s} final loss {losses[-1]:.6f} "
              f"accuracy {epochs_done[-1]['accuracy']:.4f} ({runs[-1]['seconds']:.1f} s)", flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump({"mode": "reference", "world": args.world, "seed": args.seed, "steps": len(steps),
                       "steps_per_epoch": per_epoch, "runs": runs}, f)
    return 0


def main(argv=None):
    args = parse_args(argv)
    if args.mode == "reference":
        return run_reference(args)
    if args.mode == "netreduce" and not args.api:
        raise SystemExit("ddp_train: --mode netreduce needs --api (the appliance's control API)")
    return run_rank(args)


if __name__ == "__main__":
    sys.exit(main())

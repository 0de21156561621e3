"""One rank of the namespace tests of the netreduce package (run by test_bed.py inside a worker namespace).

    bed_worker.py SCENARIO --rank R --world W --master IP --port P --out FILE [--api unix:PATH] [--netreduce CMD]
                  [--transport sidecar|verbs --device DEV --payload B --window N --msg-len L]

The soft-RoCE VM harness (scripts/interop/run.sh --only session) runs the same scenarios over the verbs transport.

Each scenario does its work through a real session (sidecar transport, the daemon in the appliance namespace) and
writes one JSON object to FILE: {"ok": bool, ...details}. Checks are made here, on real results: every DDP bucket
and every allreduce_ result is compared bit for bit with the sum of every rank's input in rank order (the order the
appliance adds in), which the ranks learn from each other over the gloo process group.
"""
import argparse
import json
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def rank_ordered(inputs, world, average):
    import torch

    total = inputs[0].clone()
    for r in range(1, world):
        total += inputs[r]
    if average:
        total.div_(world)
    return total


def gathered(tensor, world):
    import torch
    import torch.distributed as dist

    parts = [torch.empty_like(tensor) for _ in range(world)]
    dist.all_gather(parts, tensor)
    return parts


def session_of(args, **overrides):
    import netreduce

    settings = dict(device=args.device, appliance=args.api, transport=args.transport, timeout=args.call_timeout,
                    payload_size=args.payload, window=args.window, msg_len=args.msg_len)
    if args.transport == "sidecar":
        settings["sidecar_command"] = args.netreduce.split()
        if args.agent:
            settings["agent"] = args.agent.format(rank=args.rank)
    settings.update(overrides)
    return netreduce.Session(**settings)


def recording(hook, records):
    """A DDP communication hook that runs ``hook`` and appends (bucket index, bucket before, result) of every bucket
    to ``records``."""
    def checking_hook(state, bucket):
        before = bucket.buffer().clone()

        def keep(done):
            records.append((bucket.index(), before, done.value().clone()))
            return done.value()

        return hook(state, bucket).then(keep)

    return checking_hook


def layered_model(torch, in_features):
    """Over DDP's 1 MB first bucket, so several buckets of different sizes go through per step (with
    bucket_cap_mb=0.05)."""
    return torch.nn.Sequential(torch.nn.Linear(in_features, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                               torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                               torch.nn.Linear(512, 10))


def ddp_bucket_checks(args, session, device, checked):
    """Three DDP steps of the layered model on ``device`` with the session's allreduce_hook (bucket_cap_mb=0.05, so
    several buckets a step); every bucket's result checked against the rank-order sum of what each rank had,
    divided where the bucket lives, as DDP's own hook and the session divide: on a GPU, PyTorch divides by a number
    as a product with its reciprocal, which for W = 3 can differ from the host's quotient in the last bit. Returns
    the model."""
    import torch
    import netreduce

    world = args.world
    torch.manual_seed(0)
    model = layered_model(torch, 64).to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(
        model, device_ids=None if device.type == "cpu" else [device.index], bucket_cap_mb=0.05)
    records = []
    ddp.register_comm_hook(session, recording(netreduce.allreduce_hook, records))
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(100 + args.rank)
    kind = "" if device.type == "cpu" else f"{device.type} "
    for step in range(3):
        records.clear()
        x = torch.randn(32, 64, generator=g).to(device)
        y = torch.randint(0, 10, (32,), generator=g).to(device)
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        for index, before, after in sorted(records, key=lambda r: r[0]):
            summed = rank_ordered(gathered(before.cpu(), world), world, average=False)
            expected = summed.to(device).div_(world).cpu()
            checked.append({"what": f"step {step} {kind}bucket {index} ({before.numel()} fp32)",
                            "exact": bool(after.device == before.device and torch.equal(after.cpu(), expected))})
    return model


def scenario_ddp(args, out):
    """allreduce_ of odd sizes (one larger than the shared memory), then DDP with the hook, every bucket checked."""
    import torch
    import netreduce

    world = args.world
    session = session_of(args, shm_bytes=1 << 20)
    checked = []
    try:
        for elements in (1, 1023, 1024 * 1024 // 4 + 777, 700_001):
            g = torch.Generator().manual_seed(10 * args.rank + elements)
            mine = torch.randn(elements, generator=g)
            result = netreduce.allreduce_(mine.clone(), session)
            expected = rank_ordered(gathered(mine, world), world, average=False)
            checked.append({"what": f"allreduce_ {elements}", "exact": bool(torch.equal(result, expected))})

        ddp_bucket_checks(args, session, torch.device("cpu"), checked)
        if args.transport == "sidecar":
            # Set up: the shared memory and socket names are gone, so a killed trainer leaves nothing behind.
            transport = session.transport
            out["leftover_files"] = [p for p in (transport._shm_path, transport._socket_path, transport._dir)
                                     if os.path.exists(p)]
            checked.append({"what": "no named files left once set up", "exact": not out["leftover_files"]})
        out["buckets"] = sum(1 for c in checked if "bucket" in c["what"])
        out["stats"] = session.stats()
    finally:
        session.close()
    out["checked"] = checked
    out["ok"] = all(c["exact"] for c in checked) and out["buckets"] >= 6


def scenario_agent(args, out):
    """Two Sessions one after the other, each a session of this host's sidecar agent (``--agent``, started by the
    test in the rank's namespace): both sum exactly, the second on the agent's already compiled code."""
    import torch
    import netreduce

    world = args.world
    agent = args.agent.format(rank=args.rank)
    checked, sessions = [], []
    for turn in range(2):
        session = session_of(args, shm_bytes=1 << 20)
        try:
            sessions.append(session.transport._process.description)
            for elements in (1023, 300_001):
                g = torch.Generator().manual_seed(100 * turn + 10 * args.rank + elements)
                mine = torch.randn(elements, generator=g)
                result = netreduce.allreduce_(mine.clone(), session)
                expected = rank_ordered(gathered(mine, world), world, average=False)
                checked.append({"what": f"session {turn + 1}: allreduce_ {elements}",
                                "exact": bool(torch.equal(result, expected))})
            stats = session.stats()
            out.setdefault("stats", stats)
            out["stats"]["fallback_calls"] = max(out["stats"].get("fallback_calls", 0), stats["fallback_calls"])
        finally:
            session.close()
    out["sessions"] = sessions
    checked.append({"what": "two sessions of the same agent", "exact": len(set(sessions)) == 2 and
                    all(agent in s for s in sessions)})
    out["checked"] = checked
    out["ok"] = all(c["exact"] for c in checked)


def scenario_cuda(args, out):
    """A model on the GPU through the real sidecar and appliance: allreduce_ of CUDA tensors (one larger than the
    shared memory, so several pinned pieces per call), DDP's CUDA buckets with allreduce_hook, and the fp16
    compression hook on CUDA buckets (fp16 ring); every result compared on the host with the rank-order sum of
    what each rank had."""
    import torch
    import netreduce

    world = args.world
    device = torch.device("cuda", 0)
    checked = []
    session = session_of(args, shm_bytes=1 << 20, cuda_piece_bytes=1 << 16)
    try:
        for elements in (1, 1023, 1024 * 1024 // 4 + 777, 700_001):
            g = torch.Generator().manual_seed(10 * args.rank + elements)
            mine = torch.randn(elements, generator=g)
            expected = rank_ordered(gathered(mine, world), world, average=False)
            on_gpu = mine.to(device)
            result = netreduce.allreduce_(on_gpu, session)
            checked.append({"what": f"cuda allreduce_ {elements}",
                            "exact": bool(result is on_gpu and result.is_cuda and torch.equal(result.cpu(), expected))})

        model = ddp_bucket_checks(args, session, device, checked)
        out["buckets"] = sum(1 for c in checked if "bucket" in c["what"])
        replica = torch.cat([p.detach().reshape(-1).cpu() for p in model.parameters()])
        checked.append({"what": "replicas identical after 3 steps",
                        "exact": all(torch.equal(replica, other) for other in gathered(replica, world))})
        out["stats"] = session.stats()
    finally:
        session.close()

    half = session_of(args, element_type="fp16", ring_id=2, cuda_piece_bytes=1 << 16)
    try:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)).to(device)
        ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0], bucket_cap_mb=0.01)
        records = []
        ddp.register_comm_hook(half, recording(netreduce.fp16_compress_hook, records))
        g = torch.Generator().manual_seed(200 + args.rank)
        for step in range(2):
            records.clear()
            ddp(torch.randn(16, 32, generator=g).to(device)).square().mean().backward()
            torch.cuda.synchronize()
            for index, before, after in sorted(records, key=lambda r: r[0]):
                # Divided on the GPU before the cast, as fp16_compress_hook does there (see the fp32 buckets).
                inputs = [t.to(device).div_(world).to(torch.float16).to(torch.float32).cpu()
                          for t in gathered(before.cpu(), world)]
                expected = rank_ordered(inputs, world, average=False).to(torch.float16).to(torch.float32)
                checked.append({"what": f"step {step} fp16 cuda bucket {index}",
                                "exact": bool(after.is_cuda and torch.equal(after.cpu(), expected))})
    finally:
        half.close()
    out["device_name"] = torch.cuda.get_device_name(device)
    out["checked"] = checked
    out["ok"] = all(c["exact"] for c in checked) and out["buckets"] >= 6


def scenario_fp16(args, out):
    """The fp16 compression hook on an fp16 ring: the fp32 bucket comes back as the sum of every rank's bucket
    divided by the world size and cast to fp16 (as PyTorch's fp16_compress_hook does), the sum taken as the
    appliance takes it: widened to fp32, added in rank order, rounded once."""
    import torch
    import netreduce

    world = args.world
    session = session_of(args, element_type="fp16", ring_id=2)
    checked = []
    try:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
        ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.01)
        records = []

        ddp.register_comm_hook(session, recording(netreduce.fp16_compress_hook, records))
        g = torch.Generator().manual_seed(200 + args.rank)
        for step in range(2):
            records.clear()
            x = torch.randn(16, 32, generator=g)
            ddp(x).square().mean().backward()
            for index, before, after in sorted(records, key=lambda r: r[0]):
                # The appliance widens fp16 to fp32, adds in rank order and rounds once to fp16.
                inputs = [t.div(world).to(torch.float16).to(torch.float32) for t in gathered(before, world)]
                expected = rank_ordered(inputs, world, average=False).to(torch.float16).to(torch.float32)
                checked.append({"what": f"step {step} bucket {index}", "exact": bool(torch.equal(after, expected))})
    finally:
        session.close()
    out["checked"] = checked
    out["ok"] = bool(checked) and all(c["exact"] for c in checked)


def scenario_install(args, out):
    """The session installs the ring through the control API, uses it, and removes it at close."""
    import torch
    import netreduce

    session = session_of(args, install=True, job_name="pytest-install", ring_id=7)
    try:
        mine = torch.full((5000,), float(args.rank + 1))
        result = netreduce.allreduce_(mine, session)
        out["exact"] = bool(torch.equal(result, torch.full((5000,), float(sum(range(1, args.world + 1))))))
    finally:
        session.close()
    out["ok"] = out["exact"]


def scenario_unaggregated(args, out):
    """No ring on the appliance and no API given: the results come back unaggregated; the call must raise, and
    the tensor keep this rank's values (never a wrong gradient)."""
    import torch
    import netreduce

    session = session_of(args, appliance=None, ring_id=9, timeout=5.0)
    try:
        mine = torch.full((10_000,), float(args.rank + 1))
        if args.rank == 1:
            # Rank 0's message is waiting here, unaggregated, before this rank calls: the case where this rank
            # must still send its own (its sidecar fails the call and goes on) so that rank 0 fails for the same
            # reason and not by timeout. Without the pause it happens only sometimes.
            time.sleep(0.5)
        try:
            netreduce.allreduce_(mine, session)
            out["raised"] = None
        except netreduce.TransportError as error:
            out["raised"] = str(error)
        out["untouched"] = bool(torch.equal(mine, torch.full((10_000,), float(args.rank + 1))))
    finally:
        session.close()
    out["ok"] = out["raised"] is not None and out["untouched"]


def scenario_fallback(args, out):
    """The same, with fallback=True: the process group's all-reduce gives the right sum, logged once and counted."""
    import torch
    import netreduce

    session = session_of(args, appliance=None, ring_id=9, timeout=5.0, fallback=True)
    try:
        results = []
        for call in range(3):
            mine = torch.full((3000,), float(args.rank + 1 + call))
            netreduce.allreduce_(mine, session)
            expected = float(sum(r + 1 + call for r in range(args.world)))
            results.append(bool(torch.equal(mine, torch.full((3000,), expected))))
        out["results_exact"] = results
        out["fallback_calls"] = session.fallback_calls
    finally:
        session.close()
    out["ok"] = all(results) and out["fallback_calls"] == 3


def scenario_mismatch(args, out):
    """A ring installed with window 8, a session asking for window 4: refused at start, naming the setting."""
    import netreduce

    try:
        session_of(args, window=4).close()
        out["raised"] = None
    except netreduce.RingMismatch as error:
        out["raised"] = str(error)
    out["ok"] = out["raised"] is not None and "window" in out["raised"]


def scenario_mismatched_memory(args, out):
    """Rank 1 opens with less shared memory than its neighbours expect of it: every rank gets a SetupError at
    start naming the failing rank, promptly, instead of the others waiting at a barrier."""
    import time
    import netreduce

    start = time.monotonic()
    try:
        session_of(args, shm_bytes=(1 << 20) if args.rank == 1 else (4 << 20)).close()
        out["raised"] = None
    except netreduce.SetupError as error:
        out["raised"] = str(error)
    out["seconds"] = time.monotonic() - start
    out["ok"] = (out["raised"] is not None and "could not connect the ring on rank 0" in out["raised"]
                 and out["seconds"] < 60)


def scenario_unreachable(args, out):
    """An appliance address where nothing listens: a clear ApplianceUnreachable at start."""
    import netreduce

    try:
        session_of(args, appliance="unix:/nonexistent/netreduce-api.sock").close()
        out["raised"] = None
    except netreduce.ApplianceUnreachable as error:
        out["raised"] = str(error)
    out["ok"] = out["raised"] is not None


def switchml_bound(inputs, world, block):
    """Per element, SwitchML's fp32 error bound (docs/architecture.md, "The worker"): with e the block's largest
    exponent over the workers (IEEE exponent field - 126: every |x| of the block below 2^e; -126 for zeros and
    denormals) and the sum taken in float64 (within W 2^(e-53) of the exact sum, inside the bound's slack),
    |result - sum| <= (1 + 2^-18) W^2 2^(e-1) / (2^31 - 1) + 2^-24 |sum| + 2^-150. ``inputs``: every rank's 1-d
    fp32 tensor of one call, whose blocks of ``block`` elements start at element 0. Returns (sum, bound), float64."""
    import torch

    stacked = torch.stack(inputs).to(torch.float64)
    total = stacked.sum(0)
    n = total.numel()
    padded = torch.zeros(world, (n + block - 1) // block * block, dtype=torch.float64)
    padded[:, :n] = stacked.abs()
    largest = padded.view(world, -1, block).amax(dim=(0, 2))
    _, exponent = torch.frexp(largest)                     # largest = m 2^k, 0.5 <= m < 1: k = floor(log2) + 1 = e
    e = torch.clamp(exponent, min=-126).to(torch.float64)  # zeros and denormals: -126
    e = e.repeat_interleave(block)[:n]
    bound = (1 + 2.0 ** -18) * world ** 2 * torch.pow(2.0, e - 1) / (2 ** 31 - 1) + 2.0 ** -24 * total.abs() \
        + 2.0 ** -150
    return total, bound


def wrapped_int32_sum(inputs):
    import torch

    total = torch.stack(inputs).to(torch.int64).sum(0)
    return ((total + 2 ** 31) % 2 ** 32 - 2 ** 31).to(torch.int32)


def scenario_switchml(args, out):
    """The switchml transport through the daemon's SwitchML controller and job: int32 allreduce_ exact (wrapping),
    fp32 allreduce_ within the bound, then DDP with the unchanged allreduce_hook, every bucket within the bound (of
    the average) and the replicas' parameters identical on every rank after each step."""
    import torch
    import netreduce

    world = args.world
    block = 256
    shm_bytes = 1 << 20   # 262144 elements: the 300 000-element calls go in two pieces
    settings = dict(transport="switchml", device=args.device, controller="10.77.0.253:50099",
                    switchml_elements=block, shm_bytes=shm_bytes, timeout=args.call_timeout,
                    sidecar_command=args.netreduce.split())
    checked = []

    session = netreduce.Session(element_type="int32", **settings)
    try:
        for elements in (1, 1000, 300_000):
            g = torch.Generator().manual_seed(7 * args.rank + elements)
            # the whole int32 range, so that sums wrap
            mine = torch.randint(-2 ** 31, 2 ** 31, (elements,), generator=g, dtype=torch.int64).to(torch.int32)
            result = netreduce.allreduce_(mine.clone(), session)
            expected = wrapped_int32_sum(gathered(mine, world))
            checked.append({"what": f"int32 allreduce_ {elements}", "exact": bool(torch.equal(result, expected))})
        out["int32_stats"] = session.stats()
    finally:
        session.close()

    session = netreduce.Session(element_type="fp32", **settings)
    try:
        for elements in (5, 1000, 300_000):
            g = torch.Generator().manual_seed(11 * args.rank + elements)
            # blocks of very different magnitudes (2^-30 .. 2^30), some all zero
            scale = torch.pow(2.0, torch.randint(-30, 31, ((elements + block - 1) // block,), generator=g).float())
            scale[::7] = 0
            mine = torch.randn(elements, generator=g) * scale.repeat_interleave(block)[:elements]
            result = netreduce.allreduce_(mine.clone(), session)
            inputs = gathered(mine, world)
            pieces = [(0, elements)] if elements <= shm_bytes // 4 else \
                [(0, shm_bytes // 4), (shm_bytes // 4, elements)]
            worst = 0.0
            for a, b in pieces:
                total, bound = switchml_bound([t[a:b] for t in inputs], world, block)
                worst = max(worst, float(((result[a:b].double() - total).abs() / bound).max()))
            checked.append({"what": f"fp32 allreduce_ {elements}", "exact": worst <= 1.0, "worst_of_bound": worst})

        torch.manual_seed(0)
        model = layered_model(torch, 32)
        ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.05)
        records = []

        ddp.register_comm_hook(session, recording(netreduce.allreduce_hook, records))
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(100 + args.rank)
        losses = []
        for step in range(3):
            records.clear()
            x = torch.randn(32, 32, generator=g)
            y = torch.randint(0, 10, (32,), generator=g)
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(ddp(x), y)
            loss.backward()
            optimizer.step()
            losses.append(float(loss))
            for index, before, after in sorted(records, key=lambda r: r[0]):
                # The hook averages: the sum (within the bound), divided by W in fp32 (one more rounding).
                total, bound = switchml_bound(gathered(before, world), world, block)
                error = (after.double() - total / world).abs()
                allowed = bound / world + 2.0 ** -24 * (total / world).abs() + 2.0 ** -150
                worst = float((error / allowed).max())
                checked.append({"what": f"step {step} bucket {index} ({before.numel()} fp32)", "exact": worst <= 1.0,
                                "worst_of_bound": worst})
            # Every rank got the same bits for every bucket, so the replicas stay identical.
            flat = torch.cat([p.detach().view(-1) for p in model.parameters()])
            checked.append({"what": f"step {step}: parameters equal on every rank",
                            "exact": all(torch.equal(flat, other) for other in gathered(flat, world))})
        out["losses"] = losses
        out["buckets"] = sum(1 for c in checked if "bucket" in c["what"])
        out["stats"] = session.stats()
    finally:
        session.close()
    out["checked"] = checked
    out["ok"] = all(c["exact"] for c in checked) and out["buckets"] >= 6


def _sparse_grad(seed, rows, dim, rank, hot_only_on):
    """An uncoalesced sparse gradient with duplicate rows, values of spread magnitudes and some -0.0; None or
    empty now and then; rows 0..9 only on the ranks in ``hot_only_on``."""
    import torch

    g = torch.Generator().manual_seed(seed)
    kind = int(torch.randint(0, 8, (1,), generator=g))
    if kind == 0:
        return None
    if kind == 1:
        return torch.sparse_coo_tensor(torch.empty(1, 0, dtype=torch.int64), torch.empty(0, dim), (rows, dim))
    n = int(torch.randint(1, 300, (1,), generator=g))
    indices = (torch.rand(n, generator=g) ** 3 * rows).long().clamp(max=rows - 1)
    if rank not in hot_only_on:
        indices = indices[indices >= 10]
    values = torch.randn(len(indices), dim, generator=g) * 10 ** torch.randint(-4, 5, (len(indices), 1),
                                                                                generator=g).float()
    values[torch.rand(values.shape, generator=g) < 0.05] = -0.0
    return torch.sparse_coo_tensor(indices.unsqueeze(0), values, (rows, dim))


def scenario_sparse(args, out):
    """netreduce.sparse through the daemon: hot rows through the appliance, cold rows all-gathered; every step's
    result compared bit for bit (fp32 bit patterns) with the rank-order reference of every rank's gradient: hot set
    sampled, re-sampled, then set by hand (it changes between steps); duplicates, rows on some ranks only, empty
    gradients."""
    import torch
    import torch.distributed as dist
    from netreduce.sparse import HotColdReducer, rank_order_reference

    world = args.world
    shapes = [(1000, 8), (257, 3), (600, 8)]
    params = [torch.nn.Parameter(torch.zeros(r, d)) for r, d in shapes]
    session = session_of(args, shm_bytes=1 << 20)
    checked, hot_sizes = [], []
    try:
        reducer = HotColdReducer(session, {f"t{i}": p for i, p in enumerate(params)}, sample_steps=3,
                                 resample_every=5, min_frequency=0.0, drift=0.0, budget_bytes=60 * 9 * 4)
        for step in range(16):
            if step == 13:
                reducer.set_hot_rows({"t0": range(0, 1000, 7), "t1": [0, 1, 2], "t2": []})
            hot_only_on = {step % world}
            grads = [[_sparse_grad(1000 * step + 10 * t + 100_000 * r, rows, dim, r, hot_only_on)
                      for t, (rows, dim) in enumerate(shapes)] for r in range(world)]
            for p, g in zip(params, grads[args.rank]):
                p.grad = None if g is None else g.clone()
            reducer.reduce_()
            hot_sizes.append(sum(int(v.numel()) for v in reducer.hot_rows().values()))
            for t, (rows, dim) in enumerate(shapes):
                expected = rank_order_reference([grads[r][t] for r in range(world)], rows, dim, average=True)
                got = params[t].grad
                exact = (got.is_coalesced() and torch.equal(got._indices(), expected._indices())
                         and torch.equal(got._values().contiguous().view(torch.int32),
                                         expected._values().contiguous().view(torch.int32)))
                checked.append({"what": f"step {step} table {t} ({got._nnz()} rows)", "exact": bool(exact)})
        stats = reducer.stats()
        out["sparse"] = {k: stats[k] for k in ("appliance_fraction", "appliance_bytes", "cold_bytes", "hot_rows",
                                               "selections")}
        out["hot_sizes"] = hot_sizes
        everyone = [None] * world
        dist.all_gather_object(everyone, hot_sizes)
        out["same_hot_sets"] = all(h == everyone[0] for h in everyone)
        out["stats"] = session.stats()
    finally:
        session.close()
    out["checked"] = checked
    changes = len(set(hot_sizes[3:]))
    out["ok"] = (all(c["exact"] for c in checked) and out["same_hot_sets"] and hot_sizes[0] == 0 and changes >= 2
                 and 0 < out["sparse"]["appliance_fraction"] < 1)


SCENARIOS = {name[len("scenario_"):]: fn for name, fn in globals().items() if name.startswith("scenario_")}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", choices=sorted(SCENARIOS))
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--master", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--api")
    ap.add_argument("--netreduce", help="the launcher, for the sidecar transport")
    ap.add_argument("--transport", default="sidecar", choices=("sidecar", "verbs"))
    ap.add_argument("--device", default="eth0", help="sidecar: the interface; verbs: the RDMA device (rxe0)")
    ap.add_argument("--payload", type=int, default=4096)
    ap.add_argument("--window", type=int, default=8)
    ap.add_argument("--msg-len", type=int, default=16)
    ap.add_argument("--call-timeout", type=float, default=10.0)
    ap.add_argument("--ifname", default="eth0", help="the interface gloo (rendezvous, fallback) binds to")
    ap.add_argument("--agent", help="the sidecar agent's socket ({rank} is replaced by the rank)")
    args = ap.parse_args()
    if args.transport == "sidecar" and not args.netreduce:
        ap.error("--netreduce is needed with the sidecar transport")
    os.environ.setdefault("GLOO_SOCKET_IFNAME", args.ifname)
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://{args.master}:{args.port}", rank=args.rank,
                            world_size=args.world)
    out = {"ok": False, "rank": args.rank}
    try:
        SCENARIOS[args.scenario](args, out)
    except Exception:  # noqa: BLE001 - written out for the test to show
        out["ok"] = False
        out["error"] = traceback.format_exc()
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f)
    dist.destroy_process_group()
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

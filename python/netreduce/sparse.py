"""Sparse embedding gradients through the appliance, as Libra does it: hot rows in the switch, cold rows by the hosts.

In a recommendation model most parameters are embedding rows, and a step touches few of them; yet a small set of
"hot" rows is updated in almost every step by almost every worker (Libra, §3.1). :class:`HotColdReducer` sums the
sparse gradients of ``nn.Embedding`` / ``nn.EmbeddingBag`` tables (``sparse=True``) across the ranks:

* **hot rows** (a set every rank agrees on) go through the appliance as one dense fp32 block per step: every rank
  packs the same hot rows in the same order, its own coalesced gradient where it touched a row and zeros where it did
  not, plus one "touched" flag per row; the appliance sums the block in rank order like any tensor;
* **cold rows** go through the process group: every rank's indices and values are all-gathered and summed on the
  host, in rank order.

The result is **bit for bit** the rank-order sum of the ranks' gradients, defined as follows. Let ``D_r`` be rank
r's gradient coalesced (``grad.coalesce()``: duplicates within the rank summed as PyTorch does) and made dense, with
+0.0 in the rows rank r did not touch. The reference is the sparse tensor whose rows are the union U of the rows any
rank touched, sorted, and whose values are ``((D_0 + D_1) + D_2) + ... + D_{W-1}`` on U, in IEEE fp32 (then divided by
W when ``average``). That is what the appliance computes for a dense tensor (it adds rank 0's value to rank 1's,
and so on, starting from rank 0's, not from zero), so the hot rows give it directly; the cold rows are summed on the
host in exactly that way. The trainer gets it as an ordinary coalesced sparse ``.grad`` (what ``torch.optim.SGD``,
``SparseAdam`` and ``Adagrad`` take), with the rows U: a hot row nobody touched is not in it.

**Hot-row identification** (Libra §3.3, Principle 1): over the first ``sample_steps`` steps every row's update
frequency is counted (how many (rank, step) pairs touched it; ``sample_rate`` of those steps are counted); the ranks
add their counts with one all-reduce, so every rank holds the same counts and picks the same hot set: the rows by
descending frequency (ties by table, then row) while the block fits ``budget_bytes`` and until they hold
``coverage`` of all counted updates, skipping rows updated in fewer than ``min_frequency`` of the counted rank-steps.
Until then every row is cold. With ``resample_every=K`` the counts are taken again over the ``sample_steps`` steps
before every K-th step and the hot set is replaced when the new one covers more than ``drift`` more of the window's
updates than the old one; it changes between steps, never within one.

Use it with DDP for the dense parameters (DDP cannot take sparse gradients through a communication hook): leave the
tables out of DDP with :func:`ignore_in_ddp` before wrapping the model, and call :meth:`HotColdReducer.reduce_` after
``backward()``::

    tables = netreduce.sparse.embedding_tables(model)          # {name: weight} of the sparse embeddings
    reducer = netreduce.sparse.HotColdReducer(session, tables, budget_bytes=1 << 20, sample_steps=20)
    netreduce.sparse.ignore_in_ddp(model, tables)
    ddp = DistributedDataParallel(model)
    ddp.register_comm_hook(session, netreduce.allreduce_hook)
    for batch in loader:
        optimizer.zero_grad(set_to_none=True)
        loss_fn(ddp(batch)).backward()                          # dense gradients through the appliance (DDP)
        reducer.reduce_()                                       # sparse ones: hot through the appliance, cold by gather
        optimizer.step()
"""
import time
from typing import Dict, Optional

from .errors import SetupError

__all__ = ["HotColdReducer", "embedding_tables", "ignore_in_ddp", "rank_order_reference"]


def _torch():
    import torch  # noqa: PLC0415
    import torch.distributed as dist  # noqa: PLC0415

    return torch, dist


def embedding_tables(model) -> Dict[str, object]:
    """``{name: weight}`` of every ``nn.Embedding`` and ``nn.EmbeddingBag`` of ``model`` with ``sparse=True``, names
    as ``model.named_parameters()`` gives them (what :func:`ignore_in_ddp` needs)."""
    torch, _ = _torch()
    tables = {}
    for module_name, module in model.named_modules():
        if isinstance(module, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and module.sparse:
            tables[f"{module_name}.weight" if module_name else "weight"] = module.weight
    return tables


def ignore_in_ddp(model, tables) -> None:
    """Leave ``tables`` (a ``{name: parameter}`` dict, or parameters of ``model``) out of the
    ``DistributedDataParallel`` that will wrap ``model``: DDP then neither all-reduces their gradients nor broadcasts
    them at start (initialise them the same on every rank, e.g. from one seed). Call it before ``DistributedDataParallel(model)``."""
    torch, _ = _torch()
    wanted = {id(p) for p in (tables.values() if isinstance(tables, dict) else tables)}
    names = [name for name, p in model.named_parameters() if id(p) in wanted]
    if len(names) != len(wanted):
        raise SetupError("ignore_in_ddp: some tables are not parameters of the model")
    torch.nn.parallel.DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(model, names)


def coalesced_rows(grad, rows: int, dim: int):
    """(indices int64 [n], values fp32 [n, dim]) of a table's gradient, coalesced; empty for None or no entries."""
    torch, _ = _torch()
    if grad is None or (grad.is_sparse and grad._nnz() == 0):
        return torch.empty(0, dtype=torch.int64), torch.empty(0, dim, dtype=torch.float32)
    if not grad.is_sparse:
        raise TypeError("netreduce.sparse sums sparse gradients (nn.Embedding/EmbeddingBag with sparse=True); this "
                        "table's gradient is dense: give it to DDP instead")
    if grad.sparse_dim() != 1:
        grad = grad.coalesce().to_dense().to_sparse(1)
    grad = grad.coalesce()
    return grad._indices()[0], grad._values().reshape(-1, dim)


def rank_order_reference(grads, rows: int, dim: int, average: bool = False):
    """The reference sum of one table's gradients, ``grads[r]`` being rank r's (sparse, or None): the module's
    definition (coalesce each, dense with +0.0 where untouched, add in rank order from rank 0's, keep the rows any rank
    touched), as a coalesced sparse tensor. For tests and for checking a training run."""
    torch, _ = _torch()
    world = len(grads)
    parts = [coalesced_rows(g, rows, dim) for g in grads]
    union = torch.unique(torch.cat([i for i, _ in parts])) if parts else torch.empty(0, dtype=torch.int64)
    total = None
    for indices, values in parts:
        dense = torch.zeros(rows, dim, dtype=torch.float32)
        dense[indices] = values
        total = dense if total is None else total.add_(dense)
    values = total[union]
    if average:
        values = values.div_(world)
    return torch.sparse_coo_tensor(union.unsqueeze(0), values, (rows, dim))._coalesced_(True)


class _Table:
    def __init__(self, name, param):
        torch, _ = _torch()
        if param.dim() != 2 or param.dtype != torch.float32:
            raise SetupError(f"table {name}: netreduce.sparse takes 2-d fp32 embedding weights, not "
                             f"{tuple(param.shape)} {param.dtype}")
        if param.shape[0] >= 2 ** 31:
            raise SetupError(f"table {name}: {param.shape[0]} rows; at most 2^31 - 1")
        self.name, self.param = name, param
        self.rows, self.dim = int(param.shape[0]), int(param.shape[1])
        self.counts = torch.zeros(self.rows, dtype=torch.int32)
        self.set_hot(torch.empty(0, dtype=torch.int64))

    def set_hot(self, hot):
        torch, _ = _torch()
        self.hot = hot  # sorted row numbers
        self.slot_of = torch.full((self.rows,), -1, dtype=torch.int64)
        self.slot_of[hot] = torch.arange(hot.numel(), dtype=torch.int64)


class HotColdReducer:
    """Sums the sparse gradients of embedding tables across the ranks: hot rows through ``session``'s appliance
    ring, cold rows through ``process_group`` (module docstring). Every rank constructs it at the same point (it
    creates a process group) with the same arguments.

    * ``session``: a :class:`~netreduce.Session` on an fp32 ring (or None: every row cold, through the process group).
    * ``tables``: ``{name: weight}`` (:func:`embedding_tables`) or a list of weights / embedding modules.
    * ``average``: divide the sums by the world size (as DDP and ``allreduce_hook`` do for dense gradients).
    * ``budget_bytes``: most bytes of the hot block per step (each hot row takes ``(dim + 1) * 4``: its values and its
      touched flag): the ring's share of the appliance's aggregator memory in Libra's terms (``c`` x memory).
    * ``coverage``: Libra's ``p``: stop adding hot rows once they hold this fraction of the counted updates.
    * ``min_frequency``: a row is hot only if updated in at least this fraction of the counted rank-steps. A hot row
      costs every worker ``(dim + 1) * 4`` bytes a step whether it touched it or not; a cold one about
      ``(W - 1) * (dim + 1) * 4`` for each rank that touched it (the all-gather), so rows updated in fewer than
      1 / (W - 1) of the rank-steps are cheaper cold. ``"auto"`` uses that break-even, 0 takes every updated row.
    * ``sample_steps``: steps in a sampling window (the first window: steps 0 .. sample_steps - 1, all cold).
    * ``sample_rate``: fraction of a window's steps whose updates are counted (every round(1 / rate)-th step).
    * ``resample_every``: K > 0: count again over the ``sample_steps`` steps before every K-th step after the first
      selection and replace the hot set there when it covers more than ``drift`` more of the window's updates.
    * ``hot_rows``: a fixed hot set instead of sampling: ``{name: rows}`` or a list per table (the same on every
      rank: checked).
    * ``process_group``: for the cold rows and the counts; default: a new group of every rank (so that nothing else,
      e.g. the session's fallback, runs a collective on it at the same time).
    """

    def __init__(self, session, tables, *, average: bool = True, budget_bytes: int = 1 << 20,
                 coverage: float = 1.0, min_frequency="auto", sample_steps: int = 20, sample_rate: float = 1.0,
                 resample_every: int = 0, drift: float = 0.01, hot_rows=None, process_group=None):
        torch, dist = _torch()
        if not dist.is_available() or not dist.is_initialized():
            raise SetupError("HotColdReducer needs torch.distributed initialised first")
        self._torch, self._dist = torch, dist
        self.group = process_group if process_group is not None else dist.new_group()
        self.rank = dist.get_rank(self.group)
        self.world_size = dist.get_world_size(self.group)
        if session is not None:
            if session.element_type != "fp32":
                raise SetupError(f"HotColdReducer sums fp32 rows: the session's ring is {session.element_type}")
            if session.world_size != self.world_size or session.rank != self.rank:
                raise SetupError(f"the session's rank {session.rank} of {session.world_size} is not this process "
                                 f"group's {self.rank} of {self.world_size}")
        if not 0 < sample_rate <= 1:
            raise SetupError(f"sample_rate must be in (0, 1]: {sample_rate}")
        if sample_steps < 1 and hot_rows is None and session is not None:
            raise SetupError(f"sample_steps must be at least 1: {sample_steps}")
        if resample_every and resample_every < sample_steps:
            raise SetupError(f"resample_every ({resample_every}) must be at least sample_steps ({sample_steps})")
        if not 0 < coverage <= 1:
            raise SetupError(f"coverage must be in (0, 1]: {coverage}")
        self.session = session
        self.average = average
        self.budget_bytes = int(budget_bytes)
        self.coverage = coverage
        self.min_frequency = (1.0 / max(1, self.world_size - 1)) if min_frequency == "auto" else float(min_frequency)
        self.sample_steps, self.sample_rate = int(sample_steps), sample_rate
        self.resample_every, self.drift = int(resample_every), drift
        self._stride = max(1, round(1 / sample_rate))
        if isinstance(tables, dict):
            items = list(tables.items())
        else:
            items = [(f"table{i}", getattr(t, "weight", t)) for i, t in enumerate(tables)]
        if not items:
            raise SetupError("HotColdReducer needs at least one table")
        self.tables = [_Table(name, param) for name, param in items]
        self.step = 0
        self._sampled_steps = 0
        self._fixed = hot_rows is not None
        self._buffer = None
        self._selections = []
        self._totals = dict(steps=0, grad_rows=0, hot_grad_rows=0, grad_bytes=0, hot_grad_bytes=0,
                            appliance_bytes=0, cold_bytes=0, cold_padded_bytes=0, result_rows=0)
        self._times = dict(pack=0.0, cold=0.0, wait=0.0, merge=0.0, select=0.0)
        self.last = {}
        if hot_rows is not None:
            self.set_hot_rows(hot_rows)

    # -- the hot set ------------------------------------------------------------------------------------------------

    def set_hot_rows(self, hot_rows) -> None:
        """Use ``hot_rows`` (``{name: rows}`` or a list per table) as the hot set from the next :meth:`reduce_` on.
        Every rank must give the same rows (checked with two integer all-reduces); duplicates are dropped."""
        torch, dist = self._torch, self._dist
        if self.session is None:
            raise SetupError("set_hot_rows: without a session every row is cold")
        rows = [hot_rows.get(t.name, []) for t in self.tables] if isinstance(hot_rows, dict) else list(hot_rows)
        if len(rows) != len(self.tables):
            raise SetupError(f"hot_rows: {len(rows)} entries for {len(self.tables)} tables")
        chosen = []
        for table, r in zip(self.tables, rows):
            r = torch.unique(torch.as_tensor(r, dtype=torch.int64))
            if r.numel() and (int(r[0]) < 0 or int(r[-1]) >= table.rows):
                raise SetupError(f"hot_rows of {table.name}: rows outside 0..{table.rows - 1}")
            chosen.append(r)
        digest = torch.tensor([hash(tuple(int(x) for r in chosen for x in [-1, *r.tolist()])) & ((1 << 62) - 1)],
                              dtype=torch.int64)
        low, high = digest.clone(), digest.clone()
        dist.all_reduce(low, op=dist.ReduceOp.MIN, group=self.group)
        dist.all_reduce(high, op=dist.ReduceOp.MAX, group=self.group)
        if int(low) != int(high):
            raise SetupError("set_hot_rows: the ranks gave different hot sets")
        self._install(chosen)

    def _install(self, chosen) -> None:
        torch = self._torch
        for table, rows in zip(self.tables, chosen):
            table.set_hot(rows)
        size, offset = 0, 0
        for table in self.tables:
            table.offset = offset
            offset += table.hot.numel() * table.dim
        flags = offset
        for table in self.tables:
            table.flag_offset = flags
            flags += table.hot.numel()
        size = flags
        self._buffer = torch.zeros(size, dtype=torch.float32) if size else None

    def hot_rows(self) -> Dict[str, object]:
        """The hot set now: ``{name: sorted rows}``."""
        return {t.name: t.hot.clone() for t in self.tables}

    def _counting(self, step: int) -> bool:
        """Whether this step's updates are counted: inside a sampling window, one step in round(1 / sample_rate)."""
        if self._fixed or self.session is None:
            return False
        if step < self.sample_steps:
            start = 0
        elif self.resample_every:
            after = step - self.sample_steps
            next_selection = self.sample_steps + (after // self.resample_every + 1) * self.resample_every
            start = next_selection - self.sample_steps
            if step < start:
                return False
        else:
            return False
        return (step - start) % self._stride == 0

    def _selecting(self, step: int) -> bool:
        if self._fixed or self.session is None or step < self.sample_steps:
            return False
        if step == self.sample_steps:
            return True
        return bool(self.resample_every) and (step - self.sample_steps) % self.resample_every == 0

    def _select(self) -> None:
        """Libra's Principle 1 on the counts every rank now shares: by descending frequency (ties: table, then row),
        while the block fits the budget, until ``coverage`` of the counted updates, frequency at least
        ``min_frequency``."""
        torch, dist = self._torch, self._dist
        started = time.perf_counter()
        counts = torch.cat([t.counts for t in self.tables])
        dist.all_reduce(counts, group=self.group)  # integer sums: every rank the same counts
        for t in self.tables:
            t.counts.zero_()
        rank_steps = self._sampled_steps * self.world_size
        self._sampled_steps = 0
        total = int(counts.sum())
        table_of = torch.cat([torch.full((t.rows,), i, dtype=torch.int64) for i, t in enumerate(self.tables)])
        row_of = torch.cat([torch.arange(t.rows, dtype=torch.int64) for t in self.tables])
        cost_of = torch.tensor([(t.dim + 1) * 4 for t in self.tables], dtype=torch.int64)
        floor = max(1, int(-(-self.min_frequency * rank_steps // 1))) if rank_steps else 1
        candidates = (counts >= floor).nonzero().squeeze(1)
        order = torch.sort(counts[candidates], descending=True, stable=True).indices
        picked = candidates[order]
        cost = torch.cumsum(cost_of[table_of[picked]], 0)
        k = int((cost <= self.budget_bytes).sum())
        if self.coverage < 1 and total:
            held = torch.cumsum(counts[picked].to(torch.int64), 0)
            k = min(k, int((held < self.coverage * total).sum()) + 1)
        picked = picked[:k]
        new_cover = int(counts[picked].sum()) / total if total else 0.0
        old_hot = torch.cat([t.hot + sum(u.rows for u in self.tables[:i]) for i, t in enumerate(self.tables)])
        old_cover = int(counts[old_hot].sum()) / total if total else 0.0
        changed = not self._selections or new_cover - old_cover > self.drift
        if changed:
            chosen = [torch.sort(row_of[picked[table_of[picked] == i]]).values for i in range(len(self.tables))]
            self._install(chosen)
        self._selections.append({
            "step": self.step, "changed": changed, "counted_rank_steps": rank_steps, "counted_updates": total,
            "hot_rows": [t.hot.numel() for t in self.tables], "coverage": new_cover if changed else old_cover,
            "coverage_new": new_cover, "coverage_old": old_cover,
            "block_bytes": 0 if self._buffer is None else self._buffer.numel() * 4})
        self._times["select"] += time.perf_counter() - started

    # -- a step ---------------------------------------------------------------------------------------------------

    def reduce_(self) -> None:
        """Sum every table's ``.grad`` across the ranks (call it on every rank after ``backward()``, before the
        optimizer); each table's ``.grad`` becomes the coalesced sparse sum (or mean, with ``average``)."""
        torch, dist = self._torch, self._dist
        if self._selecting(self.step):
            self._select()
        counting = self._counting(self.step)
        started = time.perf_counter()
        parts = [coalesced_rows(t.param.grad, t.rows, t.dim) for t in self.tables]
        grad_rows = sum(i.numel() for i, _ in parts)
        hot_grad_rows = grad_bytes = hot_bytes = 0
        if counting:
            self._sampled_steps += 1
            for table, (indices, _) in zip(self.tables, parts):
                table.counts[indices] += 1  # coalesced: each row once
        # Split: hot rows into the block (zeros elsewhere, flag 1 where touched), the rest stays for the gather.
        buffer, future = self._buffer, None
        colds = []
        if buffer is not None:
            buffer.zero_()
        for table, (indices, values) in zip(self.tables, parts):
            grad_bytes += indices.numel() * table.dim * 4
            if buffer is None or not table.hot.numel():
                colds.append((indices, values))
                continue
            slots = table.slot_of[indices]
            hot = slots >= 0
            colds.append((indices[~hot], values[~hot]))
            hot_slots = slots[hot]
            hot_grad_rows += hot_slots.numel()
            hot_bytes += hot_slots.numel() * table.dim * 4
            block = buffer[table.offset:table.offset + table.hot.numel() * table.dim].view(-1, table.dim)
            block[hot_slots] = values[hot]
            buffer[table.flag_offset + hot_slots] = 1.0
        if buffer is not None:
            future = self.session.submit(buffer)
        self._times["pack"] += time.perf_counter() - started
        # Cold rows through the process group while the appliance sums the block.
        started = time.perf_counter()
        cold_sums, cold_bytes, padded = self._gather_cold(colds)
        self._times["cold"] += time.perf_counter() - started
        started = time.perf_counter()
        if future is not None:
            future.wait()
        self._times["wait"] += time.perf_counter() - started
        started = time.perf_counter()
        result_rows = 0
        for table, (cold_rows, cold_values) in zip(self.tables, cold_sums):
            if buffer is not None and table.hot.numel():
                k = table.hot.numel()
                block = buffer[table.offset:table.offset + k * table.dim].view(k, table.dim)
                touched = buffer[table.flag_offset:table.flag_offset + k] > 0
                rows = torch.cat([table.hot[touched], cold_rows])
                values = torch.cat([block[touched], cold_values])
                order = torch.argsort(rows)
                rows, values = rows[order], values[order]
            else:
                rows, values = cold_rows, cold_values
            if self.average:
                values = values.div_(self.world_size) if values.numel() else values
            result_rows += rows.numel()
            table.param.grad = torch.sparse_coo_tensor(rows.unsqueeze(0), values,
                                                       (table.rows, table.dim))._coalesced_(True)
        self._times["merge"] += time.perf_counter() - started
        appliance_bytes = 0 if buffer is None else buffer.numel() * 4
        self.last = {"step": self.step, "grad_rows": grad_rows, "hot_grad_rows": hot_grad_rows,
                     "grad_bytes": grad_bytes, "hot_grad_bytes": hot_bytes, "appliance_bytes": appliance_bytes,
                     "cold_bytes": cold_bytes, "cold_padded_bytes": padded, "result_rows": result_rows}
        totals = self._totals
        totals["steps"] += 1
        for key, value in self.last.items():
            if key != "step":
                totals[key] += value
        self.step += 1

    def _gather_cold(self, colds):
        """All-gather every rank's cold (indices, values) and sum them per table in rank order on the host:
        one all-gather of the counts, one of the rows (int32 indices, then the values' bits as int32)."""
        torch, dist = self._torch, self._dist
        world, group = self.world_size, self.group
        counts = torch.tensor([i.numel() for i, _ in colds], dtype=torch.int64)
        all_counts = [torch.empty_like(counts) for _ in range(world)]
        dist.all_gather(all_counts, counts, group=group)
        widths = [1 + t.dim for t in self.tables]
        lengths = [sum(int(c[i]) * widths[i] for i in range(len(self.tables))) for c in all_counts]
        longest = max(lengths)
        mine = lengths[self.rank]
        sums = []
        if longest == 0:
            for table in self.tables:
                sums.append((torch.empty(0, dtype=torch.int64), torch.empty(0, table.dim, dtype=torch.float32)))
            return sums, 0, 0
        payload = torch.zeros(longest, dtype=torch.int32)
        at = 0
        for (indices, values) in colds:
            n = indices.numel()
            payload[at:at + n] = indices.to(torch.int32)
            at += n
            payload[at:at + values.numel()] = values.contiguous().view(torch.int32).reshape(-1)
            at += values.numel()
        gathered = [torch.empty_like(payload) for _ in range(world)]
        dist.all_gather(gathered, payload, group=group)
        per_rank = []  # per rank: [(indices, values) per table]
        for r in range(world):
            at, tables = 0, []
            for i, table in enumerate(self.tables):
                n = int(all_counts[r][i])
                indices = gathered[r][at:at + n].to(torch.int64)
                at += n
                values = gathered[r][at:at + n * table.dim].view(torch.float32).view(n, table.dim)
                at += n * table.dim
                tables.append((indices, values))
            per_rank.append(tables)
        for i, table in enumerate(self.tables):
            union = torch.unique(torch.cat([per_rank[r][i][0] for r in range(world)]))
            total = None
            for r in range(world):
                indices, values = per_rank[r][i]
                dense = torch.zeros(union.numel(), table.dim, dtype=torch.float32)
                if indices.numel():
                    dense[torch.searchsorted(union, indices)] = values
                total = dense if total is None else total.add_(dense)  # ((D0 + D1) + D2) + ...
            sums.append((union, total))
        return sums, mine * 4, longest * 4

    # -- what happened ----------------------------------------------------------------------------------------------

    def stats(self) -> dict:
        """Totals over the steps so far, this rank's: ``grad_bytes`` (its coalesced gradient rows' values),
        ``hot_grad_bytes`` (those in hot rows), ``appliance_fraction`` (their ratio: the fraction of the gradient
        bytes summed by the appliance), ``appliance_bytes`` (the hot blocks it sent, zeros and flags included),
        ``cold_bytes`` (the cold rows' indices and values it put in the all-gathers; ``cold_padded_bytes``: padded to
        the longest rank's, what the all-gather moves per rank), the hot set now, every selection, and seconds spent
        packing, gathering cold rows, waiting for the appliance, merging and selecting. ``last``: the last step's."""
        totals = dict(self._totals)
        totals["appliance_fraction"] = (totals["hot_grad_bytes"] / totals["grad_bytes"]) if totals["grad_bytes"] else 0.0
        totals["hot_rows"] = {t.name: t.hot.numel() for t in self.tables}
        totals["block_bytes"] = 0 if self._buffer is None else self._buffer.numel() * 4
        totals["selections"] = list(self._selections)
        totals["seconds"] = dict(self._times)
        totals["last"] = dict(self.last)
        return totals

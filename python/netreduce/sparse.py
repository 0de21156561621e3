"""Sparse embedding gradients through the appliance, as Libra does it: hot rows in the switch, cold rows by the hosts.

In a recommendation model most parameters are embedding rows, and a step touches few of them; yet a small set of
"hot" rows is updated in almost every step by almost every worker (Libra, §3.1). :class:`HotColdReducer` sums the
sparse gradients of ``nn.Embedding`` / ``nn.EmbeddingBag`` tables (``sparse=True``) across the ranks:

* **hot rows** (a set every rank agrees on) go through the appliance as one dense fp32 block per step: every rank
  packs the same hot rows in the same order, its own coalesced gradient where it touched a row and zeros where it did
  not, plus one "touched" flag per row; the appliance sums the block in rank order like any tensor;
* **cold rows** go through the process group: every rank's indices and values are sent to every rank and summed on the
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
        reducer.reduce_()                                       # sparse ones: hot through the appliance, cold by exchange
        optimizer.step()
"""
import collections
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


def _union(keys):
    """(the sorted distinct values of ``keys``, each key's place among them). One sort: ``torch.unique`` hashes on the
    CPU (0.47 ms for 5,000 keys here, against 0.09 for a sort), and a ``searchsorted`` per rank for the places cost as
    much again."""
    torch, _ = _torch()
    ordered, order = torch.sort(keys)
    first = torch.ones(keys.numel(), dtype=torch.bool)
    first[1:] = ordered[1:] != ordered[:-1]
    places = torch.empty_like(keys)
    places[order] = torch.cumsum(first, 0) - 1
    return ordered[first], places


class _Table:
    def __init__(self, name, param, offset):
        torch, _ = _torch()
        if param.dim() != 2 or param.dtype != torch.float32:
            raise SetupError(f"table {name}: netreduce.sparse takes 2-d fp32 embedding weights, not "
                             f"{tuple(param.shape)} {param.dtype}")
        self.name, self.param = name, param
        self.rows, self.dim = int(param.shape[0]), int(param.shape[1])
        self.offset = offset  # of its rows in the reducer's key space (every table's rows one after the other)


class _Group:
    """The tables of one width: their rows are packed, gathered, summed and merged together, as keys
    ``table.offset + row`` (sorted by key = by table, then row)."""

    def __init__(self, dim, tables):
        torch, _ = _torch()
        self.dim, self.tables = dim, tables
        self.hot = torch.empty(0, dtype=torch.int64)  # sorted keys
        self.bounds = torch.tensor([t.offset for t in tables] + [tables[-1].offset + tables[-1].rows])


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
      ``(W - 1) * (dim + 1) * 4`` for each rank that touched it (the exchange), so rows updated in fewer than
      1 / (W - 1) of the rank-steps are cheaper cold. ``"auto"`` uses that break-even, 0 takes every updated row.
    * ``sample_steps``: steps in a sampling window (the first window: steps 0 .. sample_steps - 1, all cold).
    * ``sample_rate``: fraction of a window's steps whose updates are counted (every round(1 / rate)-th step).
    * ``resample_every``: K > 0: count again over the ``sample_steps`` steps before every K-th step after the first
      selection and replace the hot set there when it covers more than ``drift`` more of the window's updates.
    * ``hot_rows``: a fixed hot set instead of sampling: ``{name: rows}`` or a list per table (the same on every
      rank: checked).
    * ``process_group``: for the cold rows and the counts; default: a new group of every rank (so that nothing else,
      e.g. the session's fallback, runs a collective on it at the same time).
    * ``fill_messages``: where the session sends whole messages (``Session.message_data_bytes``: the sidecar pads a
      call's last message with zeros to MsgLen x payload size), add the next rows by frequency, below
      ``min_frequency`` and ``coverage`` but within ``budget_bytes``, until the block fills its last message: they
      cost nothing more on the wire and take rows out of the exchange.
    * ``dense``: dense parameters to sum (and average, with ``average``) in the same appliance call as the hot rows,
      instead of through DDP: for models whose dense part is small (a DLRM's MLPs), one call per step instead of
      two. Their ``.grad`` (zeros where None) goes first in the block; each becomes the rank-order sum / W, as
      ``allreduce_hook`` makes it. Leave these parameters out of DDP, or do without DDP (initialise every rank the
      same).
    * ``cold_exchange``: how the cold rows travel. ``"alltoall"`` (default): one ``all_to_all_single`` in which every
      rank sends its payload to every other rank at once: one hop, where gloo's ``all_gather`` is a ring of W - 1
      hops, each waiting for the next rank to be scheduled (on a host whose cores the trainers share, that wait is
      most of the exchange). ``"allgather"``: ``all_gather``, for a process group whose backend has no all-to-all.
      Both move the same bytes and give the same sums.
    """

    def __init__(self, session, tables, *, average: bool = True, budget_bytes: int = 1 << 20,
                 coverage: float = 1.0, min_frequency="auto", sample_steps: int = 20, sample_rate: float = 1.0,
                 resample_every: int = 0, drift: float = 0.01, hot_rows=None, process_group=None, dense=None,
                 fill_messages: bool = True, cold_exchange: str = "alltoall"):
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
        if cold_exchange not in ("alltoall", "allgather"):
            raise SetupError(f"cold_exchange must be 'alltoall' or 'allgather': {cold_exchange!r}")
        self.cold_exchange = cold_exchange
        self.session = session
        self.average = average
        self.budget_bytes = int(budget_bytes)
        self.coverage = coverage
        self.min_frequency = (1.0 / max(1, self.world_size - 1)) if min_frequency == "auto" else float(min_frequency)
        self.sample_steps, self.sample_rate = int(sample_steps), sample_rate
        self.resample_every, self.drift = int(resample_every), drift
        self.fill_messages = fill_messages
        self._stride = max(1, round(1 / sample_rate))
        if isinstance(tables, dict):
            items = list(tables.items())
        else:
            items = [(f"table{i}", getattr(t, "weight", t)) for i, t in enumerate(tables)]
        if not items:
            raise SetupError("HotColdReducer needs at least one table")
        self.tables, offset = [], 0
        for name, param in items:
            self.tables.append(_Table(name, param, offset))
            offset += self.tables[-1].rows
        if offset >= 2 ** 31:
            raise SetupError(f"{offset} rows in all; at most 2^31 - 1 (row keys travel as int32)")
        self.total_rows = offset
        widths = sorted({t.dim for t in self.tables})
        self.groups = [_Group(d, [t for t in self.tables if t.dim == d]) for d in widths]
        self._ends = torch.tensor([t.offset + t.rows for t in self.tables])
        self._costs = torch.tensor([(t.dim + 1) * 4 for t in self.tables], dtype=torch.int64)
        self.counts = torch.zeros(self.total_rows, dtype=torch.int32)
        self.dense = list(dense or [])
        self._dense_size = sum(p.numel() for p in self.dense)
        if any(p.dtype != torch.float32 for p in self.dense):
            raise SetupError("dense= takes fp32 parameters")
        if self.dense and session is None:
            raise SetupError("dense= sums through the appliance: it needs a session")
        self.hot = torch.empty(0, dtype=torch.int64)  # sorted keys of every hot row
        self.step = 0
        self._sampled_steps = 0
        self._fixed = hot_rows is not None
        self._install(self.hot)
        self._selections = []
        self._totals = dict(steps=0, dense_bytes=0, grad_rows=0, hot_grad_rows=0, grad_bytes=0, hot_grad_bytes=0,
                            appliance_bytes=0, cold_bytes=0, cold_padded_bytes=0, result_rows=0)
        self._times = dict(pack=0.0, cold=0.0, wait=0.0, merge=0.0, select=0.0)
        self._capacity = len(self.groups)  # int32 words of the cold exchange (grows to what the steps need)
        self._longest = collections.deque(maxlen=8)  # the longest payload of each of the last steps, less the header
        self._gathers = 0
        self.last = {}
        if hot_rows is not None:
            self.set_hot_rows(hot_rows)

    # -- the hot set ------------------------------------------------------------------------------------------------

    def set_hot_rows(self, hot_rows) -> None:
        """Use ``hot_rows`` (``{name: rows}`` or a list per table) as the hot set from the next :meth:`reduce_` on,
        and stop sampling (the hot set stays this one until the next call). Every rank must give the same rows
        (checked with two integer all-reduces); duplicates are dropped."""
        torch, dist = self._torch, self._dist
        if self.session is None:
            raise SetupError("set_hot_rows: without a session every row is cold")
        rows = [hot_rows.get(t.name, []) for t in self.tables] if isinstance(hot_rows, dict) else list(hot_rows)
        if len(rows) != len(self.tables):
            raise SetupError(f"hot_rows: {len(rows)} entries for {len(self.tables)} tables")
        keys = []
        for table, r in zip(self.tables, rows):
            r = torch.unique(torch.as_tensor(r, dtype=torch.int64))
            if r.numel() and (int(r[0]) < 0 or int(r[-1]) >= table.rows):
                raise SetupError(f"hot_rows of {table.name}: rows outside 0..{table.rows - 1}")
            keys.append(r + table.offset)
        keys = torch.cat(keys)
        digest = torch.tensor([hash(tuple(keys.tolist())) & ((1 << 62) - 1)], dtype=torch.int64)
        low, high = digest.clone(), digest.clone()
        dist.all_reduce(low, op=dist.ReduceOp.MIN, group=self.group)
        dist.all_reduce(high, op=dist.ReduceOp.MAX, group=self.group)
        if int(low) != int(high):
            raise SetupError("set_hot_rows: the ranks gave different hot sets")
        self._fixed = True
        self._install(keys)

    def _install(self, keys) -> None:
        """Make ``keys`` (sorted) the hot set: each group's hot keys, its block's place in the buffer (every group's
        values, then every group's touched flags)."""
        torch = self._torch
        self.hot = keys
        offset = self._dense_size
        for group in self.groups:
            lo, hi = torch.searchsorted(keys, group.bounds[[0, -1]]).tolist()
            group.hot = keys[lo:hi]
            if len(group.tables) > 1:  # the group's tables need not be neighbours in the key space
                inside = torch.zeros(keys.numel(), dtype=torch.bool)
                for t in group.tables:
                    inside |= (keys >= t.offset) & (keys < t.offset + t.rows)
                group.hot = keys[inside]
            group.offset = offset
            offset += group.hot.numel() * group.dim
        for group in self.groups:
            group.flag_offset = offset
            offset += group.hot.numel()
        self._buffer = torch.zeros(offset, dtype=torch.float32) if offset else None

    def hot_rows(self) -> Dict[str, object]:
        """The hot set now: ``{name: sorted rows}``."""
        torch = self._torch
        out = {}
        for t in self.tables:
            lo, hi = torch.searchsorted(self.hot, torch.tensor([t.offset, t.offset + t.rows])).tolist()
            out[t.name] = self.hot[lo:hi] - t.offset
        return out

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

    def _summed_counts(self):
        """Every rank's update counts added up. A window touches few of the rows: each rank sends its non-zero
        (row, count) pairs to every rank (one all-to-all, after an all-reduce of the pair count), not the dense
        array of every row (1.6 MB for 4 x 10^5 rows, through gloo's ring at each selection); integer sums, so every
        rank gets the same counts whatever the order."""
        torch, dist = self._torch, self._dist
        counts, world = self.counts, self.world_size
        if self.cold_exchange != "alltoall":
            dist.all_reduce(counts, group=self.group)
            return counts
        rows = counts.nonzero().squeeze(1)
        longest = torch.tensor([rows.numel()], dtype=torch.int64)
        dist.all_reduce(longest, op=dist.ReduceOp.MAX, group=self.group)  # every rank then takes the same way
        width = int(longest) + 1
        if 2 * width * world >= counts.numel():  # the pairs would be no smaller than the dense counts
            dist.all_reduce(counts, group=self.group)
            return counts
        out = torch.empty(world, 2, width, dtype=torch.int32)
        mine = out[self.rank]
        mine.zero_()
        mine[0, 0] = rows.numel()
        mine[0, 1:1 + rows.numel()] = rows.to(torch.int32)
        mine[1, 1:1 + rows.numel()] = counts[rows]
        dist.all_to_all_single(out, mine.expand(world, 2, width).contiguous(), group=self.group)
        counts.zero_()
        for r in range(world):
            n = int(out[r, 0, 0])
            counts.index_add_(0, out[r, 0, 1:1 + n].to(torch.int64), out[r, 1, 1:1 + n])
        return counts

    def _select(self) -> None:
        """Libra's Principle 1 on the counts every rank now shares: by descending frequency (ties: table, then row),
        while the block fits the budget, until ``coverage`` of the counted updates, frequency at least
        ``min_frequency``."""
        torch, dist = self._torch, self._dist
        started = time.perf_counter()
        counts = self._summed_counts()  # integer sums: every rank the same counts
        rank_steps = self._sampled_steps * self.world_size
        self._sampled_steps = 0
        total = int(counts.sum())
        floor = max(1, int(-(-self.min_frequency * rank_steps // 1))) if rank_steps else 1
        counted = (counts > 0).nonzero().squeeze(1)
        ranked = counted[torch.sort(counts[counted], descending=True, stable=True).indices]  # ties: by key
        cost = torch.cumsum(self._costs[torch.searchsorted(self._ends, ranked, right=True)], 0)
        k = min(int((counts[ranked] >= floor).sum()), int((cost <= self.budget_bytes).sum()))
        if self.coverage < 1 and total:
            held = torch.cumsum(counts[ranked].to(torch.int64), 0)
            k = min(k, int((held < self.coverage * total).sum()) + 1)
        principled = k
        granule = getattr(self.session, "message_data_bytes", None) if self.fill_messages else None
        if granule and (k or self._dense_size):
            used = self._dense_size * 4 + (int(cost[k - 1]) if k else 0)
            capacity = min(-(-used // granule) * granule, self._dense_size * 4 + self.budget_bytes)
            k = max(k, int((cost + self._dense_size * 4 <= capacity).sum()))
        picked = ranked[:k]
        new_cover = int(counts[picked].sum()) / total if total else 0.0
        old_cover = int(counts[self.hot].sum()) / total if total else 0.0
        changed = not self._selections or new_cover - old_cover > self.drift
        if changed:
            self._install(torch.sort(picked).values)
        counts.zero_()
        self._selections.append({
            "step": self.step, "changed": changed, "counted_rank_steps": rank_steps, "counted_updates": total,
            "hot_rows": [int(v.numel()) for v in self.hot_rows().values()], "filled_rows": k - principled,
            "coverage": new_cover if changed else old_cover, "coverage_new": new_cover, "coverage_old": old_cover,
            "block_bytes": 0 if self._buffer is None else self._buffer.numel() * 4})
        self._times["select"] += time.perf_counter() - started

    # -- a step ---------------------------------------------------------------------------------------------------

    def reduce_(self) -> None:
        """Sum every table's ``.grad`` across the ranks (call it on every rank after ``backward()``, before the
        optimizer); each table's ``.grad`` becomes the coalesced sparse sum (or mean, with ``average``)."""
        torch = self._torch
        if self._selecting(self.step):
            self._select()
        counting = self._counting(self.step)
        if counting:
            self._sampled_steps += 1
        started = time.perf_counter()
        buffer, future = self._buffer, None
        if buffer is not None:
            at = 0
            for p in self.dense:
                if p.grad is None:
                    buffer[at:at + p.numel()].zero_()
                else:
                    buffer[at:at + p.numel()].view_as(p).copy_(p.grad)
                at += p.numel()
            buffer[at:].zero_()
        grad_rows = hot_grad_rows = grad_bytes = hot_bytes = 0
        colds = []
        for group in self.groups:
            # this rank's rows of the group's tables, coalesced, as sorted keys
            parts = [coalesced_rows(t.param.grad, t.rows, t.dim) for t in group.tables]
            if len(parts) == 1:
                keys, values = parts[0][0] + group.tables[0].offset, parts[0][1]
            else:
                keys = torch.cat([i + t.offset for (i, _), t in zip(parts, group.tables)])
                values = torch.cat([v for _, v in parts])
            grad_rows += keys.numel()
            grad_bytes += keys.numel() * group.dim * 4
            if counting:
                self.counts[keys] += 1  # coalesced: each row once
            k = group.hot.numel()
            if buffer is None or not k or not keys.numel():
                colds.append((keys, values))
                continue
            # hot rows into the block (zeros elsewhere), a touched flag each; the rest stays for the gather
            slots = torch.searchsorted(group.hot, keys).clamp_(max=k - 1)
            hot = group.hot[slots] == keys
            slots = slots[hot]
            colds.append((keys[~hot], values[~hot]))
            hot_grad_rows += slots.numel()
            hot_bytes += slots.numel() * group.dim * 4
            buffer[group.offset:group.offset + k * group.dim].view(k, group.dim)[slots] = values[hot]
            buffer[group.flag_offset + slots] = 1.0
        if buffer is not None:
            future = self.session.submit(buffer)
        self._times["pack"] += time.perf_counter() - started
        # cold rows through the process group while the appliance sums the block
        started = time.perf_counter()
        cold_sums, cold_bytes, padded = self._gather_cold(colds)
        self._times["cold"] += time.perf_counter() - started
        started = time.perf_counter()
        if future is not None:
            future.wait()
        self._times["wait"] += time.perf_counter() - started
        started = time.perf_counter()
        result_rows, at = 0, 0
        for p in self.dense:
            grad = buffer[at:at + p.numel()].view_as(p)
            p.grad = grad.div(self.world_size) if self.average else grad.clone()
            at += p.numel()
        for group, (keys, values) in zip(self.groups, cold_sums):
            k = group.hot.numel()
            if buffer is not None and k:
                touched = buffer[group.flag_offset:group.flag_offset + k] > 0
                block = buffer[group.offset:group.offset + k * group.dim].view(k, group.dim)
                keys = torch.cat([group.hot[touched], keys])
                values = torch.cat([block[touched], values])
                order = torch.argsort(keys)
                keys, values = keys[order], values[order]
            if self.average and values.numel():
                values = values.div_(self.world_size)
            result_rows += keys.numel()
            bounds = torch.searchsorted(keys, group.bounds).tolist()
            for t, lo, hi in zip(group.tables, bounds, bounds[1:]):
                t.param.grad = torch.sparse_coo_tensor((keys[lo:hi] - t.offset).unsqueeze(0), values[lo:hi],
                                                       (t.rows, t.dim))._coalesced_(True)
        self._times["merge"] += time.perf_counter() - started
        appliance_bytes = 0 if buffer is None else buffer.numel() * 4
        self.last = {"step": self.step, "dense_bytes": self._dense_size * 4, "grad_rows": grad_rows, "hot_grad_rows": hot_grad_rows,
                     "grad_bytes": grad_bytes, "hot_grad_bytes": hot_bytes, "appliance_bytes": appliance_bytes,
                     "cold_bytes": cold_bytes, "cold_padded_bytes": padded, "result_rows": result_rows}
        totals = self._totals
        totals["steps"] += 1
        for key, value in self.last.items():
            if key != "step":
                totals[key] += value
        self.step += 1

    def _gather_cold(self, colds):
        """Exchange every rank's cold (keys, values) (``cold_exchange``: an all-to-all or an all-gather) and sum them
        per group in rank order on the host.

        One exchange per step, of a capacity every rank knows (1.05 x the longest payload of the last 8 steps: on
        the DLRM bed a step's longest payload was at most 1.08 x the step before's, p99 1.05, so 1.25 x the step
        before's, as it was, padded a quarter of the bytes for nothing; the window follows a noisier load): each
        rank's payload is a header (its row count per group), then per group its int32 keys and its values' bits as
        int32. A rank whose payload does not fit sends its header only; everyone sees the longest from the headers,
        and only then is there a second exchange, of the payloads at their full length."""
        torch, dist = self._torch, self._dist
        world, group = self.world_size, self.group
        header = len(self.groups)
        widths = [1 + g.dim for g in self.groups]
        counts = [keys.numel() for keys, _ in colds]
        length = header + sum(c * w for c, w in zip(counts, widths))

        def gather(size, whole):
            # every rank's payload: (world, size), this rank's row sent to every rank; the received rows, in rank order
            out = torch.empty(world, size, dtype=torch.int32)
            payload = out[self.rank] if self.cold_exchange == "alltoall" else torch.empty(size, dtype=torch.int32)
            payload.zero_()
            payload[:header] = torch.tensor(counts, dtype=torch.int32)
            if whole:
                at = header
                for keys, values in colds:
                    n = keys.numel()
                    payload[at:at + n] = keys
                    payload[at + n:at + n + values.numel()] = values.reshape(-1).view(torch.int32)
                    at += n + values.numel()
            if self.cold_exchange == "alltoall":
                sent = payload.expand(world, size).contiguous()
                dist.all_to_all_single(out, sent, group=group)
            else:
                dist.all_gather(list(out.unbind(0)), payload, group=group)
            return out

        capacity = self._capacity
        gathered = gather(capacity, length <= capacity)
        all_counts = [g[:header].tolist() for g in gathered]
        lengths = [header + sum(c * w for c, w in zip(row, widths)) for row in all_counts]
        longest = max(lengths)
        moved = capacity
        if longest > capacity:
            gathered = gather(longest, True)
            moved += longest
        self._longest.append(longest - header)
        self._capacity = header + -(-max(self._longest) * 21 // 20)
        self._gathers += 2 if longest > capacity else 1
        sums = []
        starts = [header] * world
        for i, g in enumerate(self.groups):
            ranks = []
            for r in range(world):
                n, at = all_counts[r][i], starts[r]
                ranks.append((gathered[r][at:at + n],
                              gathered[r][at + n:at + n * (1 + g.dim)].view(torch.float32).view(n, g.dim)))
                starts[r] = at + n * (1 + g.dim)
            union, places = _union(torch.cat([keys for keys, _ in ranks]).to(torch.int64))
            total, at = None, 0
            for keys, values in ranks:
                n = keys.numel()
                dense = torch.zeros(union.numel(), g.dim, dtype=torch.float32)
                if n:
                    dense[places[at:at + n]] = values
                at += n
                total = dense if total is None else total.add_(dense)  # ((D0 + D1) + D2) + ...
            sums.append((union, total))
        return sums, (length - header) * 4, moved * 4

    # -- what happened ----------------------------------------------------------------------------------------------

    def stats(self) -> dict:
        """Totals over the steps so far, this rank's: ``grad_bytes`` (its coalesced gradient rows' values),
        ``hot_grad_bytes`` (those in hot rows), ``appliance_fraction`` (their ratio: the fraction of the gradient
        bytes summed by the appliance), ``appliance_bytes`` (the blocks it sent: ``dense_bytes`` of dense gradients,
        the hot rows with their zeros and flags),
        ``cold_bytes`` (the cold rows' keys and values it put in the exchanges; ``cold_padded_bytes``: what the
        exchanges moved per rank, headers and padding included; ``cold_gathers``: how many, one per step unless a
        payload outgrew the capacity), the hot set now, every selection, and seconds spent
        packing, gathering cold rows, waiting for the appliance, merging and selecting. ``last``: the last step's."""
        totals = dict(self._totals)
        totals["appliance_fraction"] = (totals["hot_grad_bytes"] / totals["grad_bytes"]) if totals["grad_bytes"] else 0.0
        totals["hot_rows"] = {name: int(rows.numel()) for name, rows in self.hot_rows().items()}
        totals["block_bytes"] = 0 if self._buffer is None else self._buffer.numel() * 4
        totals["selections"] = list(self._selections)
        totals["seconds"] = dict(self._times)
        totals["cold_gathers"] = self._gathers
        totals["last"] = dict(self.last)
        return totals

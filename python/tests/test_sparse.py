"""netreduce.sparse: hot/cold aggregation of sparse embedding gradients, against the transport double that sums for
real in rank order (summing_transport.py) as the appliance does. Ranks are processes with a gloo process group on
this machine; no bed, no JDK.

Every result is compared bit for bit (the fp32 bit patterns, so -0.0 and +0.0 differ) with
``netreduce.sparse.rank_order_reference`` computed by each rank from every rank's raw gradient (the ranks regenerate
each other's gradients from their seeds): coalesce each rank's gradient, make it dense with +0.0 where untouched,
add the ranks in order 0..W-1 starting from rank 0's, keep the rows any rank touched.
"""
import datetime
import json
import os
import sys
import tempfile
import traceback

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from summing_transport import SummingTransport  # noqa: E402

ROWS, DIMS = (1000, 257, 600), (8, 3, 8)  # two tables of one width, apart in the key space
WORLD = 3


SCENARIOS = []


def scenario(function):
    """A scenario every rank runs, in the one group of ranks this module starts (spawning ranks costs seconds)."""
    SCENARIOS.append(function.__name__)
    return function


@pytest.fixture(scope="module")
def outcomes():
    """Spawn WORLD ranks once; each runs every scenario in turn and records "ok" or its traceback per scenario."""
    with tempfile.TemporaryDirectory() as directory:
        mp.spawn(_rank, args=(WORLD, directory), nprocs=WORLD, join=True)
        results = []
        for rank in range(WORLD):
            with open(os.path.join(directory, f"rank{rank}.json"), encoding="utf-8") as f:
                results.append(json.load(f))
    return results


def _rank(rank, world, directory):
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(1)
    # A scenario failing on one rank leaves the others in a collective: they give up after the timeout.
    dist.init_process_group("gloo", init_method=f"file://{directory}/store", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    results = {}
    try:
        for name in SCENARIOS:
            try:
                globals()[name](rank, world)
                results[name] = "ok"
            except BaseException:  # noqa: BLE001 - reported by the test of that scenario
                results[name] = traceback.format_exc()
    finally:
        with open(os.path.join(directory, f"rank{rank}.json"), "w", encoding="utf-8") as f:
            json.dump(results, f)
        dist.destroy_process_group()


def _check(outcomes, name):
    failed = [f"rank {r}: {o.get(name, 'not run')}" for r, o in enumerate(outcomes) if o.get(name) != "ok"]
    assert not failed, "\n".join(failed)


def _session(memory_bytes=1 << 16):
    from netreduce import Session

    # Small memory: a hot block of more than a few KiB goes through in several pieces.
    return Session(transport=SummingTransport(memory_bytes, layout=True), element_type="fp32")


def _bits_equal(actual, expected) -> bool:
    """The same sparse tensor to the bit: same rows, same fp32 bit patterns (sign of zero included)."""
    return (actual.is_coalesced() and torch.equal(actual._indices(), expected._indices())
            and torch.equal(actual._values().contiguous().view(torch.int32),
                            expected._values().contiguous().view(torch.int32)))


def _random_grad(seed, rows, dim, *, hot_only_on=None, rank=0):
    """An uncoalesced sparse gradient: Zipf-ish rows with duplicates, values of spread magnitudes (so that another
    summation order gives other bits), some -0.0; None for an empty one now and then; rows 0..9 only on the ranks
    of ``hot_only_on``."""
    g = torch.Generator().manual_seed(seed)
    kind = int(torch.randint(0, 8, (1,), generator=g))
    if kind == 0:
        return None  # this rank did not use the table this step
    if kind == 1:
        return torch.sparse_coo_tensor(torch.empty(1, 0, dtype=torch.int64), torch.empty(0, dim), (rows, dim))
    n = int(torch.randint(1, 200, (1,), generator=g))
    skewed = (torch.rand(n, generator=g) ** 3 * rows).long().clamp(max=rows - 1)
    if hot_only_on is not None and rank not in hot_only_on:
        skewed = skewed[skewed >= 10]
    values = torch.randn(len(skewed), dim, generator=g) * 10 ** torch.randint(-4, 5, (len(skewed), 1),
                                                                               generator=g).float()
    values[torch.rand(values.shape, generator=g) < 0.05] = -0.0
    return torch.sparse_coo_tensor(skewed.unsqueeze(0), values, (rows, dim))


def _tables():
    return [torch.nn.Parameter(torch.zeros(r, d)) for r, d in zip(ROWS, DIMS)]


def _check_step(reducer, params, world, seed, step, average, hot_only_on=None, rank=0):
    """Give each table this rank's random gradient, reduce, compare with the reference built from every rank's."""
    from netreduce.sparse import rank_order_reference

    failures = []
    for t, p in enumerate(params):
        rows, dim = p.shape
        p.grad = _random_grad(seed * 1000 + step * 10 + t + 100_000 * rank, rows, dim, hot_only_on=hot_only_on,
                              rank=rank)
    reducer.reduce_()
    for t, p in enumerate(params):
        rows, dim = p.shape
        grads = [_random_grad(seed * 1000 + step * 10 + t + 100_000 * r, rows, dim, hot_only_on=hot_only_on, rank=r)
                 for r in range(world)]
        expected = rank_order_reference(grads, rows, dim, average=average)
        if not _bits_equal(p.grad, expected):
            failures.append(f"step {step} table {t}")
    return failures


# -- exact sums ----------------------------------------------------------------------------------------------------

def _fixed_hot_set(rank, world, average, cold_exchange="alltoall"):
    from netreduce.sparse import HotColdReducer

    session = _session()
    params = _tables()
    # Hot rows: the skewed head (rows 0..9 touched on some ranks only), rows nobody ever touches (990..999 of the
    # first table are never drawn often), and the second table's odd rows.
    hot = {"a": list(range(0, 40)) + [990, 995, 999], "b": list(range(1, 257, 2)), "c": list(range(20)) + [599]}
    reducer = HotColdReducer(session, {"a": params[0], "b": params[1], "c": params[2]}, hot_rows=hot,
                             average=average, cold_exchange=cold_exchange)
    try:
        failures = []
        for step in range(12):
            failures += _check_step(reducer, params, world, seed=1, step=step, average=average,
                                    hot_only_on={0, 2} if step % 2 else {1}, rank=rank)
        assert not failures, failures
        stats = reducer.stats()
        assert stats["steps"] == 12
        assert 0 < stats["appliance_fraction"] < 1, stats
        assert stats["appliance_bytes"] == 12 * ((43 * 9) + (128 * 4) + (21 * 9)) * 4, stats
        assert stats["hot_rows"] == {"a": 43, "b": 128, "c": 21}, stats
        assert stats["hot_grad_bytes"] <= stats["grad_bytes"]
        # one session call per step, each in pieces of the double's small memory
        assert session.calls == 12
    finally:
        session.close()


@scenario
def fixed_hot_set_sum(rank, world):
    _fixed_hot_set(rank, world, average=False)


@scenario
def fixed_hot_set_average(rank, world):
    _fixed_hot_set(rank, world, average=True)


@scenario
def fixed_hot_set_allgather(rank, world):
    from netreduce.errors import SetupError
    from netreduce.sparse import HotColdReducer

    _fixed_hot_set(rank, world, average=False, cold_exchange="allgather")
    with pytest.raises(SetupError, match="cold_exchange"):
        HotColdReducer(None, _tables(), cold_exchange="ring")


@pytest.mark.parametrize("average", [False, True], ids=["sum", "average"])
def test_should_sum_hot_and_cold_rows_bit_exact_against_the_rank_order_reference(outcomes, average):
    _check(outcomes, "fixed_hot_set_average" if average else "fixed_hot_set_sum")


def test_should_give_the_same_sums_when_the_cold_rows_are_all_gathered(outcomes):
    _check(outcomes, "fixed_hot_set_allgather")


@scenario
def all_cold(rank, world):
    from netreduce.sparse import HotColdReducer

    params = _tables()
    reducer = HotColdReducer(None, params, average=False)
    failures = []
    for step in range(6):
        failures += _check_step(reducer, params, world, seed=2, step=step, average=False, rank=rank)
    assert not failures, failures
    assert reducer.stats()["appliance_bytes"] == 0 and reducer.stats()["appliance_fraction"] == 0


def test_should_sum_every_row_through_the_process_group_without_a_session(outcomes):
    _check(outcomes, "all_cold")


def test_should_tell_rank_order_from_another_order():
    """The checks can tell rank order from another: reversed order gives other bits for these inputs."""
    from netreduce.sparse import coalesced_rows, rank_order_reference

    world = 4
    rows, dim = ROWS[0], DIMS[0]
    grads = [_random_grad(7 + 100_000 * r, rows, dim) for r in range(world)]
    grads = [g if g is not None and g._nnz() else _random_grad(8 + r, rows, dim) for r, g in enumerate(grads)]
    forward = rank_order_reference(grads, rows, dim)
    backward = rank_order_reference(grads[::-1], rows, dim)
    assert torch.equal(forward._indices(), backward._indices())
    assert not torch.equal(forward._values().view(torch.int32), backward._values().view(torch.int32))
    assert coalesced_rows(None, rows, dim)[0].numel() == 0



@scenario
def everything_empty(rank, world):
    from netreduce.sparse import HotColdReducer, rank_order_reference

    session = _session()
    params = _tables()
    reducer = HotColdReducer(session, params, hot_rows=[[1, 2, 3], [], [5]])
    try:
        for step in range(2):
            for p in params:
                p.grad = None
            reducer.reduce_()
            for p in params:
                assert p.grad.is_sparse and p.grad._nnz() == 0
        # only one rank has anything, in a hot row and a cold one
        for p in params:
            p.grad = None
        grads = [None] * (world - 1) + [torch.sparse_coo_tensor(torch.tensor([[2, 500, 2]]),
                                                                 torch.randn(3, 8, generator=torch.Generator()
                                                                             .manual_seed(3)), (1000, 8))]
        if rank == world - 1:
            params[0].grad = grads[-1].clone()
        reducer.reduce_()
        assert _bits_equal(params[0].grad, rank_order_reference(grads, 1000, 8, average=True))
        assert params[0].grad._indices().tolist() == [[2, 500]]
    finally:
        session.close()


def test_should_handle_empty_gradients_and_a_row_touched_by_one_rank(outcomes):
    _check(outcomes, "everything_empty")


# -- hot-row identification ----------------------------------------------------------------------------------------

def _zipf_grad(step, rank, rows, dim, shift):
    """Rows drawn from a Zipf-like law whose head moves by ``shift`` rows (the distribution drifts)."""
    g = torch.Generator().manual_seed(10_000 * rank + step)
    n = 300
    ranks = torch.multinomial(torch.arange(1, rows + 1, dtype=torch.float64) ** -1.2, n, replacement=True,
                              generator=g)
    indices = (ranks + shift) % rows
    return torch.sparse_coo_tensor(indices.unsqueeze(0), torch.randn(n, dim, generator=g), (rows, dim))


@scenario
def sparse_counts(rank, world):
    from netreduce.sparse import HotColdReducer

    session = _session()
    reducer = HotColdReducer(session, {"emb": torch.nn.Parameter(torch.zeros(50_000, 4))}, sample_steps=2)
    try:
        for touched in (0, 300, 40_000):  # nothing; few rows (the pairs travel); most rows (the dense counts do)
            g = torch.Generator().manual_seed(rank * 7 + touched)
            mine = torch.zeros(50_000, dtype=torch.int32)
            if touched:
                mine[torch.randperm(50_000, generator=g)[:touched + 50 * rank]] = torch.randint(
                    1, 9, (touched + 50 * rank,), dtype=torch.int32, generator=g)
            expected = mine.clone()
            dist.all_reduce(expected)
            reducer.counts.copy_(mine)
            assert torch.equal(reducer._summed_counts(), expected), touched
    finally:
        session.close()


def test_should_add_the_ranks_update_counts_from_their_non_zero_pairs(outcomes):
    _check(outcomes, "sparse_counts")


@scenario
def sampling(rank, world):
    from netreduce.sparse import HotColdReducer, rank_order_reference

    session = _session(1 << 15)
    rows, dim = 2000, 6
    param = torch.nn.Parameter(torch.zeros(rows, dim))
    budget = 50 * (dim + 1) * 4  # at most 50 hot rows
    reducer = HotColdReducer(session, {"emb": param}, budget_bytes=budget, sample_steps=4, sample_rate=0.5,
                             resample_every=8, drift=0.05, min_frequency=0.0)
    try:
        hot_sets, failures = [], []
        for step in range(30):
            shift = 0 if step < 12 else 700  # the head moves at step 12
            param.grad = _zipf_grad(step, rank, rows, dim, shift)
            reducer.reduce_()
            expected = rank_order_reference([_zipf_grad(step, r, rows, dim, shift) for r in range(world)], rows, dim,
                                            average=True)
            if not _bits_equal(param.grad, expected):
                failures.append(step)
            hot_sets.append(reducer.hot_rows()["emb"])
        assert not failures, failures
        stats = reducer.stats()
        selections = stats["selections"]
        # selections at steps 4, 12, 20, 28; counted in windows [0,4), [8,12), [16,20), [24,28), every other step
        assert [s["step"] for s in selections] == [4, 12, 20, 28], selections
        assert all(s["counted_rank_steps"] == 2 * world for s in selections), selections
        assert hot_sets[3].numel() == 0 and 0 < hot_sets[4].numel() <= 50
        # the window [8, 12) still saw the old head: no change at 12; [16, 20) saw the new one: replaced at 20
        assert [s["changed"] for s in selections] == [True, False, True, False], selections
        assert torch.equal(hot_sets[19], hot_sets[4]) and not torch.equal(hot_sets[20], hot_sets[19])
        assert int(((hot_sets[4] - 0) % rows < 60).sum()) > 40 and int(((hot_sets[20] - 700) % rows < 60).sum()) > 40
        # every rank has the same hot sets
        mine = torch.cat([h.float() for h in hot_sets] + [torch.tensor([float(len(h)) for h in hot_sets])])
        everyone = [torch.empty_like(mine) for _ in range(world)]
        dist.all_gather(everyone, mine)
        assert all(torch.equal(everyone[0], other) for other in everyone[1:])
        assert stats["appliance_fraction"] > 0.15, stats
        # one cold all-gather per step once its capacity has grown to the steps' (the first step needs two)
        assert 31 <= stats["cold_gathers"] <= 34, stats["cold_gathers"]
    finally:
        session.close()


def test_should_sample_pick_agree_and_resample_the_hot_set_staying_exact(outcomes):
    _check(outcomes, "sampling")


@scenario
def principle_one(rank, world):
    """Budget, coverage and min_frequency pick the prefix of rows by descending count, ties by table then row."""
    from netreduce.sparse import HotColdReducer

    session = _session()
    a, b = torch.nn.Parameter(torch.zeros(100, 3)), torch.nn.Parameter(torch.zeros(50, 1))

    def run(fill_messages=False, **options):
        reducer = HotColdReducer(session, {"a": a, "b": b}, sample_steps=2, fill_messages=fill_messages, **options)
        # counts over 2 steps x world ranks: a: row 5 by every rank-step, row 7 by rank 0 only (2);
        # b: row 3 by every rank-step, row 4 on step 0 of every rank (world), row 9 once (rank 0, step 0)
        for step in range(3):
            rows_a = [5] + ([7] if rank == 0 else [])
            rows_b = [3] + ([4] if step == 0 else []) + ([9] if step == 0 and rank == 0 else [])
            a.grad = torch.sparse_coo_tensor(torch.tensor([rows_a]), torch.ones(len(rows_a), 3), (100, 3))
            b.grad = torch.sparse_coo_tensor(torch.tensor([rows_b]), torch.ones(len(rows_b), 1), (50, 1))
            reducer.reduce_()
        hot = reducer.hot_rows()
        return hot["a"].tolist(), hot["b"].tolist(), reducer.stats()

    everything = run(min_frequency=0.0)
    assert everything[:2] == ([5, 7], [3, 4, 9]), everything
    assert everything[2]["selections"][0]["counted_updates"] == 2 * world * 2 + 2 + world + 1
    # budget for three rows of a (16 B each) or b (8 B): 5(a) and 3(b) tie: a first, then 3(b), 4(b) [world], 7(a)
    assert run(min_frequency=0.0, budget_bytes=16 + 8 + 8)[:2] == ([5], [3, 4])
    # coverage (Libra's p): the fewest rows whose counts reach p of all: a5 holds 2 world of 5 world + 3
    assert run(min_frequency=0.0, coverage=0.3)[:2] == ([5], [])
    assert run(min_frequency=0.0, coverage=0.6)[:2] == ([5], [3])
    # min_frequency: rows in at least half the counted rank-steps
    assert run(min_frequency=0.5)[:2] == ([5], [3, 4])
    # filling the block's last message (the double's: 4088 bytes of data): every counted row fits, within the budget
    assert session.message_data_bytes == 4096 - 8
    filled = run(min_frequency=0.5, fill_messages=True)
    assert filled[:2] == ([5, 7], [3, 4, 9]) and filled[2]["selections"][0]["filled_rows"] == 2, filled[2]
    assert run(min_frequency=0.5, fill_messages=True, budget_bytes=16 + 8 + 8)[:2] == ([5], [3, 4])
    session.close()


def test_should_pick_hot_rows_by_frequency_under_budget_and_coverage(outcomes):
    _check(outcomes, "principle_one")


@scenario
def different_hot_sets(rank, world):
    from netreduce import SetupError
    from netreduce.sparse import HotColdReducer

    session = _session()
    try:
        with pytest.raises(SetupError, match="different hot sets"):
            HotColdReducer(session, _tables(), hot_rows=[[rank], [], []])
    finally:
        session.close()


def test_should_refuse_hot_sets_that_differ_between_ranks(outcomes):
    _check(outcomes, "different_hot_sets")


# -- with DDP ------------------------------------------------------------------------------------------------------

@scenario
def with_ddp(rank, world):
    import netreduce
    from netreduce.sparse import HotColdReducer, embedding_tables, ignore_in_ddp, rank_order_reference

    session = _session(1 << 18)
    torch.manual_seed(0)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.EmbeddingBag(500, 8, mode="sum", sparse=True)
            self.top = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))

        def forward(self, indices, offsets):
            return self.top(self.emb(indices, offsets)).squeeze(1)

    model = Model()
    tables = embedding_tables(model)
    assert list(tables) == ["emb.weight"]
    reducer = HotColdReducer(session, tables, sample_steps=2, min_frequency=0.0, budget_bytes=40 * 9 * 4)
    ignore_in_ddp(model, tables)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    ddp.register_comm_hook(session, netreduce.allreduce_hook)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    try:
        for step in range(5):
            g = torch.Generator().manual_seed(100 * step + rank)
            indices = (torch.rand(64, generator=g) ** 4 * 500).long()
            offsets = torch.arange(0, 64, 4)
            optimizer.zero_grad(set_to_none=True)
            torch.nn.functional.mse_loss(ddp(indices, offsets), torch.ones(16)).backward()
            mine = model.emb.weight.grad.clone()
            everyone = [None] * world
            dist.all_gather_object(everyone, mine)
            reducer.reduce_()
            assert _bits_equal(model.emb.weight.grad, rank_order_reference(everyone, 500, 8, average=True)), step
            optimizer.step()
            assert torch.isfinite(model.emb.weight).all()
        assert reducer.stats()["hot_rows"]["emb.weight"] > 0
        for name, p in model.named_parameters():
            everyone = [torch.empty_like(p.detach()) for _ in range(world)]
            dist.all_gather(everyone, p.detach().clone())
            assert all(torch.equal(everyone[0], other) for other in everyone[1:]), f"replicas differ: {name}"
    finally:
        session.close()


@scenario
def fused_dense(rank, world):
    """dense=: the dense parameters' gradients in the same appliance call as the hot rows, no DDP: each the
    rank-order sum / W of every rank's; one session call per step."""
    from netreduce.sparse import HotColdReducer, rank_order_reference

    session = _session(1 << 18)
    torch.manual_seed(0)
    emb = torch.nn.EmbeddingBag(500, 8, mode="sum", sparse=True)
    top = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    dense = list(top.parameters())
    reducer = HotColdReducer(session, [emb], dense=dense, sample_steps=2, min_frequency=0.0)
    try:
        for step in range(4):
            g = torch.Generator().manual_seed(100 * step + rank)
            indices = (torch.rand(64, generator=g) ** 4 * 500).long()
            emb.zero_grad(set_to_none=True)
            top.zero_grad(set_to_none=True)
            top(emb(indices, torch.arange(0, 64, 4))).square().mean().backward()
            if rank == 1 and step == 3:
                dense[-1].grad = None  # a parameter this rank did not use: zeros
            mine = [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in dense]
            everyone = [None] * world
            dist.all_gather_object(everyone, (mine, emb.weight.grad.clone()))
            reducer.reduce_()
            for i, p in enumerate(dense):
                total = everyone[0][0][i].clone()
                for r in range(1, world):
                    total += everyone[r][0][i]
                assert torch.equal(p.grad.view(torch.int32), total.div(world).view(torch.int32)), (step, i)
            assert _bits_equal(emb.weight.grad, rank_order_reference([e[1] for e in everyone], 500, 8,
                                                                     average=True)), step
        assert session.calls == 4 and reducer.stats()["dense_bytes"] == 4 * 4 * sum(p.numel() for p in dense)
    finally:
        session.close()


def test_should_sum_dense_parameters_in_the_hot_rows_call(outcomes):
    _check(outcomes, "fused_dense")


def test_should_train_with_ddp_for_dense_parameters_and_the_reducer_for_tables(outcomes):
    _check(outcomes, "with_ddp")

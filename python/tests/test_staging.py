"""What a Session does around its transport, against a transport double that sums for real (summing_transport.py):
host tensors cut into pieces, CUDA tensors staged through pinned host memory with the caller's stream semantics,
the DDP hooks on a GPU model, and the fallback. Ranks are processes with a gloo process group on this machine.

The CUDA tests need a CUDA device and skip without one (``torch.cuda.is_available()`` is False), as in CI; they
were run on an H200 (see docs/python.md).
"""
import os
import sys
import tempfile
import threading
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from summing_transport import SummingTransport  # noqa: E402

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="needs a CUDA device (torch.cuda.is_available() is False)")


def _spawn(scenario, world: int = 3, **options):
    with tempfile.TemporaryDirectory() as directory:
        mp.spawn(_rank, args=(world, os.path.join(directory, "store"), scenario, options), nprocs=world, join=True)


def _rank(rank, world, store, scenario, options):
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # the ranks are on this machine
    os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")  # fewer streams sharing a hardware queue
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    try:
        globals()[scenario](rank, world, **options)
    finally:
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        dist.destroy_process_group()


def _inputs(rank, elements, dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(1000 * seed + rank)
    if dtype == torch.int32:
        return torch.randint(-2 ** 30, 2 ** 30, (elements,), generator=generator, dtype=torch.int32)
    return torch.randn(elements, generator=generator).to(dtype)


def _rank_order_sum(tensors):
    total = tensors[0].clone()
    for other in tensors[1:]:
        total += other
    return total


def _session(transport, element_type="fp32", **options):
    from netreduce import Session

    return Session(transport=transport, element_type=element_type, **options)


# -- host tensors --------------------------------------------------------------------------------------------------

def host_pieces(rank, world, layout, memory_bytes=1 << 18):
    transport = SummingTransport(memory_bytes, layout=layout)
    session = _session(transport)
    try:
        # one element, a part message, whole messages, many pieces with a tail
        for elements in (1, 1021, 3 * 1022, 100_003, 300_007):
            tensor = _inputs(rank, elements)
            expected = _rank_order_sum([_inputs(r, elements) for r in range(world)])
            session.allreduce_(tensor)
            assert torch.equal(tensor, expected), f"{elements} elements"
        assert transport.calls > 5, "the largest tensors went through in several pieces"
    finally:
        session.close()


# In message areas, 256 KiB of memory is 32 messages of 4 KiB per area: every piece is copied one message at a time
# (session._ROW_COPY_MAX_MESSAGES); 1 MiB is 128: whole pieces go through torch's strided copy, the tails by rows.
@pytest.mark.parametrize("layout,memory_bytes", [(True, 1 << 18), (True, 1 << 20), (False, 1 << 18)],
                         ids=["message-areas-rows", "message-areas-strided", "flat-memory"])
def test_should_sum_host_tensors_in_pieces_bit_exact_in_rank_order(layout, memory_bytes):
    _spawn("host_pieces", layout=layout, memory_bytes=memory_bytes)


class OverwritingTransport(SummingTransport):
    """Sums, then writes a request's tag over the second message's result tag, as a message passing the appliance
    unaggregated would between the sidecar's check and the session's copy."""

    def allreduce(self, *args):
        super().allreduce(*args)
        memory = torch.frombuffer(self.memory, dtype=torch.uint8)
        at = self.layout["output"] + self.layout["messageBytes"]
        memory[at:at + 4].copy_(torch.tensor(list(b"NRED"), dtype=torch.uint8))


def overwritten_result(rank, world, memory_bytes):
    from netreduce.errors import TransportError
    session = _session(OverwritingTransport(memory_bytes), fallback=False)
    try:
        tensor = _inputs(rank, 3000)  # three messages of 4 KiB
        mine = tensor.clone()
        try:
            session.allreduce_(tensor)
        except TransportError as error:
            assert "overwritten" in str(error), str(error)
        else:
            raise AssertionError("a result whose tag was overwritten was taken")
        assert torch.equal(tensor, mine), "the tensor keeps this rank's own values"
    finally:
        session.close()


@pytest.mark.parametrize("memory_bytes", [1 << 18, 1 << 20], ids=["rows", "strided"])
def test_should_refuse_a_result_whose_tag_was_overwritten_while_it_was_read(memory_bytes):
    _spawn("overwritten_result", world=2, memory_bytes=memory_bytes)


# -- CUDA tensors --------------------------------------------------------------------------------------------------

def cuda_pieces(rank, world, layout, dtype_name):
    dtype = {"fp32": torch.float32, "int32": torch.int32, "fp16": torch.float16}[dtype_name]
    transport = SummingTransport(1 << 20, layout=layout)
    session = _session(transport, element_type=dtype_name, cuda_piece_bytes=1 << 16)
    try:
        for elements in (1, 4093, 200_003):  # one element, part of a piece, many pieces with a tail
            tensor = _inputs(rank, elements, dtype).cuda()
            expected = _rank_order_sum([_inputs(r, elements, dtype) for r in range(world)])
            result = session.allreduce_(tensor)
            assert result is tensor and tensor.is_cuda
            assert torch.equal(tensor.cpu(), expected), f"{elements} elements of {dtype_name}"
        strided = _inputs(rank, 2 * 5000, dtype).view(5000, 2).cuda().t()  # not contiguous
        expected = _rank_order_sum([_inputs(r, 2 * 5000, dtype).view(5000, 2).t() for r in range(world)])
        session.allreduce_(strided)
        assert torch.equal(strided.cpu(), expected), "a non-contiguous tensor"
        averaged = _inputs(rank, 3000).cuda() if dtype_name == "fp32" else None
        if averaged is not None:
            session.allreduce_(averaged, average=True)
            assert torch.equal(averaged.cpu(), _rank_order_sum([_inputs(r, 3000) for r in range(world)]).cuda()
                               .div(world).cpu())
    finally:
        session.close()


@needs_cuda
@pytest.mark.parametrize("layout", [True, False], ids=["message-areas", "flat-memory"])
@pytest.mark.parametrize("dtype_name", ["fp32", "int32", "fp16"])
def test_should_sum_cuda_tensors_through_pinned_pieces_bit_exact_in_rank_order(layout, dtype_name):
    _spawn("cuda_pieces", layout=layout, dtype_name=dtype_name)


def cuda_streams(rank, world):
    session = _session(SummingTransport(4 << 20))
    try:
        elements = 300_000  # one piece: the call takes one of the double's round trips
        values = _inputs(rank, elements).cuda()
        expected = _rank_order_sum([_inputs(r, elements) for r in range(world)])
        session.allreduce_(values.clone())  # the first call makes the pinned buffers and the copy stream
        torch.cuda.synchronize()
        producer, unrelated = torch.cuda.Stream(), torch.cuda.Stream()
        with torch.cuda.stream(producer):
            bucket = torch.zeros(elements, device="cuda")
            torch.cuda._sleep(int(2e8))  # the bucket is written only after this: the call must wait for it
            bucket.copy_(values)
            future = session.submit(bucket)
        # Then a long kernel on a stream the call has nothing to do with (queued after the producer's work, so
        # that a hardware queue the two streams may share cannot hold the producer back behind it).
        with torch.cuda.stream(unrelated):
            torch.cuda._sleep(int(1e10))
        while not future.done():
            time.sleep(0.001)
        assert not unrelated.query(), "the call waited for a stream it had nothing to do with"
        with torch.cuda.stream(producer):
            result = future.wait()  # the producer's stream waits for the sums' copies; the host does not
            copied = result.clone()
        producer.synchronize()
        assert torch.equal(copied.cpu(), expected), "the sum read the bucket before its stream had written it"
    finally:
        session.close()


@needs_cuda
def test_should_wait_for_the_callers_stream_and_no_other():
    _spawn("cuda_streams", world=2)


class _Bucket:
    def __init__(self, tensor):
        self._tensor = tensor

    def buffer(self):
        return self._tensor


def cuda_hooks(rank, world):
    from netreduce.hooks import allreduce_hook, bf16_compress_hook, fp16_compress_hook

    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.manual_seed(7)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).cuda()
    reference = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).cuda()
    reference.load_state_dict(model.state_dict())
    inputs = [torch.randn(32, 64, generator=torch.Generator().manual_seed(r)).cuda() for r in range(world)]
    targets = [torch.randint(0, 10, (32,), generator=torch.Generator().manual_seed(100 + r)).cuda()
               for r in range(world)]

    # Every rank's own gradients, computed here for all ranks, averaged in rank order: what the hook must give.
    local = []
    for r in range(world):
        reference.zero_grad()
        torch.nn.functional.cross_entropy(reference(inputs[r]), targets[r]).backward()
        local.append([p.grad.detach().cpu().clone() for p in reference.parameters()])
    expected = [_rank_order_sum([local[r][i] for r in range(world)]).cuda().div(world).cpu()
                for i in range(len(local[0]))]

    session = _session(SummingTransport(1 << 20), cuda_piece_bytes=1 << 16)
    try:
        ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[torch.cuda.current_device()],
                                                        bucket_cap_mb=0.02)
        ddp.register_comm_hook(session, allreduce_hook)
        for step in range(3):
            ddp.zero_grad()
            torch.nn.functional.cross_entropy(ddp(inputs[rank]), targets[rank]).backward()
            for index, parameter in enumerate(model.parameters()):
                assert torch.equal(parameter.grad.cpu(), expected[index]), f"step {step}, parameter {index}"
        assert session.calls >= 3, "a bucket per step at least"
    finally:
        session.close()

    for hook, element_type, dtype in ((fp16_compress_hook, "fp16", torch.float16),
                                      (bf16_compress_hook, "bf16", torch.bfloat16)):
        session = _session(SummingTransport(1 << 20), element_type=element_type, cuda_piece_bytes=1 << 16)
        try:
            buffers = [_inputs(r, 50_001, seed=3).cuda() for r in range(world)]
            compressed = [b.div(world).to(dtype).cpu() for b in buffers]  # cast on the GPU, as the hook does
            want = _rank_order_sum(compressed).cuda().to(torch.float32).cpu()
            bucket = buffers[rank].clone()
            got = hook(session, _Bucket(bucket)).wait()
            assert got is bucket and got.dtype == torch.float32 and got.is_cuda
            assert torch.equal(got.cpu(), want), element_type
        finally:
            session.close()


@needs_cuda
def test_should_average_ddp_gpu_buckets_and_compressed_gpu_buckets_bit_exact():
    _spawn("cuda_hooks", world=3)


def cuda_fallback(rank, world):
    pieces = -(-100_000 * 4 // (1 << 16))  # of the first tensor
    session = _session(SummingTransport(1 << 20, fail_at_call=pieces + 2 if rank == 1 else 0), fallback=True,
                       cuda_piece_bytes=1 << 16)
    try:
        first = _inputs(rank, 100_000).cuda()
        session.allreduce_(first)
        assert torch.equal(first.cpu(), _rank_order_sum([_inputs(r, 100_000) for r in range(world)]))
        # The double fails from rank 1's second transport call on, in the middle of this tensor's pieces: every
        # rank falls back for the whole tensor, from its own values, not from half-summed ones.
        second = _inputs(rank, 100_000, seed=1).cuda()
        session.allreduce_(second)
        want = _rank_order_sum([_inputs(r, 100_000, seed=1) for r in range(world)])
        assert torch.allclose(second.cpu(), want, rtol=1e-6, atol=1e-5)
        assert session.fallback_calls == 1 and session.stats()["broken"]
    finally:
        session.close()


@needs_cuda
def test_should_fall_back_from_a_cuda_tensors_own_values_when_a_piece_fails():
    _spawn("cuda_fallback", world=3)


# -- back from the fallback ------------------------------------------------------------------------------------------

def recovery(rank, world, fresh_fails_once):
    from netreduce.errors import SetupError

    made = []

    def factory():
        # The first transport fails from its third call on; the next ones work. With fresh_fails_once, rank 1
        # cannot start the second one (as a sidecar that does not come up), and the ranks must stay on the
        # fallback together and try again at the next step boundary.
        transport = SummingTransport(1 << 18, fail_at_call=3 if not made else 0)
        made.append(transport)
        if fresh_fails_once and rank == 1 and len(made) == 2:
            raise SetupError("the fresh transport did not start")
        return transport

    session = _session(factory, fallback=True, recover_after=0)
    try:
        def call(seed, boundary):
            tensor = _inputs(rank, 5000, seed=seed)
            want = _rank_order_sum([_inputs(r, 5000, seed=seed) for r in range(world)])
            session.submit(tensor, boundary=boundary).wait()
            return tensor, want

        for seed in (1, 2):  # through the first transport
            got, want = call(seed, True)
            assert torch.equal(got, want)
        got, want = call(3, False)  # fails: every rank sums it through the process group, from its own values
        assert torch.allclose(got, want, rtol=1e-6, atol=1e-5) and session.fallback_calls == 1
        got, want = call(4, False)  # still on the fallback; not a step boundary, so no try after it
        assert session.fallback_calls == 2 and session.recoveries == 0 and len(made) == 1
        got, want = call(5, True)  # a step boundary: a fresh transport is prepared after it, in the background
        assert session.fallback_calls == 3
        # Calls go on through the process group until every rank's fresh transport is ready; the ranks switch after
        # a step boundary at which all are.
        seed = 6
        while True:
            before = session.fallback_calls
            got, want = call(seed, True)
            seed += 1
            if session.fallback_calls == before:
                break  # this call went through the appliance
            assert torch.allclose(got, want, rtol=1e-6, atol=1e-5)
            assert seed < 200, "never went back to the appliance"
        assert torch.equal(got, want), "the first call after the switch"
        got, want = call(seed, True)
        assert torch.equal(got, want), "the second call after the switch"
        assert session.recoveries == 1 and session.stats()["broken"] is None
        assert session.transport is made[-1] and made[-1].calls == 2
        assert len(made) == (3 if fresh_fails_once else 2), "one failed start: every rank prepares again"
    finally:
        session.close()


@pytest.mark.parametrize("fresh_fails_once", [False, True], ids=["fresh-transport-starts", "fresh-fails-on-one-rank"])
def test_should_go_back_to_the_appliance_at_a_step_boundary_after_a_fallback(fresh_fails_once):
    _spawn("recovery", fresh_fails_once=fresh_fails_once)


def no_recovery(rank, world):
    session = _session(lambda: SummingTransport(1 << 18, fail_at_call=1), fallback=True, recover_after=None)
    try:
        for seed in range(3):
            tensor = _inputs(rank, 100, seed=seed)
            session.allreduce_(tensor)
        assert session.fallback_calls == 3 and session.recoveries == 0
    finally:
        session.close()


def test_should_stay_on_the_fallback_when_told_not_to_recover():
    _spawn("no_recovery", world=2)


def inline_order(rank, world):
    transport = SummingTransport(1 << 18)
    session = _session(transport)
    try:
        for round_ in range(5):
            first, second = _inputs(rank, 30_000, seed=2 * round_), _inputs(rank, 30_000, seed=2 * round_ + 1)
            queued = session.submit(first, boundary=False)  # on the session's thread
            inline = session.submit(second, inline=True)  # must wait for the queued call, not overtake it
            inline.wait(), queued.wait()
            assert torch.equal(first, _rank_order_sum([_inputs(r, 30_000, seed=2 * round_) for r in range(world)]))
            assert torch.equal(second, _rank_order_sum([_inputs(r, 30_000, seed=2 * round_ + 1)
                                                        for r in range(world)]))
        # The session's thread completes a call's future before its own bookkeeping (so that the trainer goes on
        # meanwhile); until that is done the session is not idle and an inline call queues behind it, by design.
        deadline = time.monotonic() + 10
        while session._pending and time.monotonic() < deadline:
            time.sleep(0.001)
        alone = _inputs(rank, 1000, seed=99)
        session.allreduce_(alone)  # nothing queued: made on this thread
        assert torch.equal(alone, _rank_order_sum([_inputs(r, 1000, seed=99) for r in range(world)]))
        assert session.calls == 11 and transport.threads[-1] == threading.get_ident()
        assert session._thread.ident in transport.threads, "the queued calls went through the session's thread"
    finally:
        session.close()


def test_should_make_an_inline_call_after_the_queued_ones_and_in_the_same_order_on_every_rank():
    _spawn("inline_order")


# -- congestion control options ---------------------------------------------------------------------------------------

def bad_ecn_options(rank, world):
    from netreduce.errors import SetupError

    for options, match in (({"ecn_gain": 0}, r"ecn_gain must be in \(0, 1\]: 0"),
                           ({"ecn_min_window": 0}, "ecn_min_window must be an integer of at least 1: 0"),
                           ({"ecn_min_window": 2.0}, "ecn_min_window must be an integer of at least 1: 2.0"),
                           ({"ecn_min_window": True}, "ecn_min_window must be an integer of at least 1: True")):
        with pytest.raises(SetupError, match=match):
            _session(SummingTransport(1 << 18), **options)
    session = _session(SummingTransport(1 << 18), ecn_min_window=2)
    try:
        assert session.ring["ecnMinWindow"] == 2, "the sidecar's open carries the floor"
    finally:
        session.close()


def test_should_refuse_an_ecn_gain_or_minimum_window_out_of_range_and_pass_a_good_floor_to_the_open():
    _spawn("bad_ecn_options", world=2)

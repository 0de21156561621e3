"""One netreduce session per trainer process: the transport, the ring, and every call through it.

A :class:`Session` is set up once (transport started, memory registered, ring neighbours connected, ring parameters
checked against the appliance) and then serves every all-reduce of the process: DDP's gradient buckets through the
communication hooks in :mod:`netreduce.hooks`, or :func:`allreduce_` calls. Calls run in order on one background
thread, so a DDP hook returns at once and the backward pass goes on while a bucket is summed.

Rendezvous is PyTorch's: the ranks exchange their queue pair information with ``all_gather_object`` on the process
group (``env://`` or whatever ``init_process_group`` was given), so no other handshake tool is needed.
"""
import logging
import queue
import threading
from typing import Optional

from .control import ApplianceClient, check_ring_parameters
from .errors import ApplianceUnreachable, NetReduceError, RingMismatch, SetupError, TransportError

log = logging.getLogger("netreduce")

_TORCH_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "int32": "int32"}
_ELEMENT_SIZES = {"fp32": 4, "fp16": 2, "bf16": 2, "int32": 4}

DEFAULT_SHM_BYTES = 64 << 20
INA_LENGTH = 8


def _torch():
    try:
        import torch  # noqa: PLC0415 (the package imports without torch; sessions need it)
        import torch.distributed as dist  # noqa: PLC0415
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise SetupError("netreduce sessions need PyTorch (Debian: python3-torch)") from error
    return torch, dist


class Session:
    """The appliance ring this process all-reduces through.

    Parameters (keyword only):

    * ``device``: the interface the sidecar opens its AF_PACKET port on (its address is the rank's ring address).
    * ``transport``: ``"sidecar"`` (default; the Java software RC endpoint beside the trainer) or an object with the
      transport interface (``open``, ``connect``, ``allreduce``, ``stats``, ``close`` and a writable ``memory``).
    * ``ring_id``, ``element_type`` (fp32, fp16, bf16, int32), ``window``, ``msg_len``, ``payload_size``,
      ``inet_tag``, ``result_tag``: the ring, as installed on the appliance (defaults as the daemon's).
    * ``appliance``: control API address (``unix:/run/netreduce/api.sock`` or ``http://host:port``) and
      ``token_file``. When given, every rank checks the ring's parameters there before the first call (a mismatch
      raises :class:`RingMismatch` instead of stalling), and with ``install=True`` rank 0 installs the ring as job
      ``job_name`` from the ranks' addresses (and removes it at :meth:`close`).
    * ``process_group``: for the rendezvous, the fallback and barriers (default: the default group).
    * ``fallback``: when a call through the appliance fails, run the process group's own ``all_reduce`` for that
      call (all ranks agree on it), log once and count it in :attr:`fallback_calls`, instead of raising.
    * ``timeout``: seconds without progress before a call fails.
    * ``endpoint_nice``: nice value of the sidecar's endpoint thread (default: the sidecar's, -10, so frames get a
      core at once while the trainer keeps the host busy; lowering it needs CAP_SYS_NICE or RLIMIT_NICE, and without
      either the sidecar keeps its value and its warning goes to the ``netreduce`` logger).
    * ``shm_bytes``: the shared memory a call works in; larger tensors go through in pieces of what it holds (for
      the sidecar: half of it, less 8 bytes of every MsgLen x payload_size, as input and output areas of messages;
      for switchml: all of it). Every rank must give the same.

    ``transport="switchml"`` sums through the appliance's SwitchML service instead of a NetReduce ring (a Java
    SwitchML worker beside the trainer, :mod:`netreduce.switchml`): ``device`` as for the sidecar, and

    * ``controller``: ``"HOST:PORT"`` of the appliance's SwitchML controller (required); every rank registers there
      at start, which opens the session's job on the appliance.
    * ``switchml_elements``: elements per packet, a power of two from 32 to 2048 (default 256; 1024 needs links
      with an MTU above 4096 + 52).
    * ``switchml_outstanding``: packets in flight (default 128; at most the appliance's ``sessionPoolSize``).
    * ``element_type``: ``"fp32"`` (SwitchML's block fixed point: each result within a bound of the exact sum,
      docs/python.md) or ``"int32"`` (exact); fp16 and bf16 raise :class:`SetupError`, as does ``install=True``
      (there is no ring to install; ``appliance`` is not consulted). The ring settings do not apply.
    """

    def __init__(self, *, device: Optional[str] = None, transport="sidecar", ring_id: int = 1,
                 element_type: str = "fp32", window: int = 16, msg_len: int = 16, payload_size: int = 4096,
                 inet_tag: str = "NRED", result_tag: str = "NRES", appliance: Optional[str] = None,
                 token_file: Optional[str] = None, install: bool = False, job_name: Optional[str] = None,
                 process_group=None, fallback: bool = False, timeout: float = 30.0,
                 shm_bytes: int = DEFAULT_SHM_BYTES, ip: Optional[str] = None, sidecar_command=None,
                 rto_us: int = 400_000, endpoint_nice: Optional[int] = None, controller: Optional[str] = None,
                 switchml_elements: int = 256, switchml_outstanding: int = 128, cuda_piece_bytes: Optional[int] = None):
        torch, dist = _torch()
        if element_type not in _TORCH_DTYPES:
            raise SetupError(f"element_type must be one of {', '.join(_TORCH_DTYPES)}: {element_type!r}")
        if transport == "switchml":
            from .switchml import check_options  # noqa: PLC0415

            check_options(element_type=element_type, controller=controller, elements=switchml_elements,
                          outstanding=switchml_outstanding)
            if install:
                raise SetupError("install=True installs a NetReduce ring; the switchml transport has none (its "
                                 "session's job is opened through the SwitchML controller at start)")
            if device is None:
                raise SetupError("the switchml transport needs device= (the interface to the switch)")
        elif controller is not None:
            raise SetupError("controller= is the switchml transport's (transport='switchml')")
        if not dist.is_available() or not dist.is_initialized():
            raise SetupError("netreduce.Session needs torch.distributed initialised first "
                             "(dist.init_process_group(...), e.g. with the gloo backend and env://)")
        self._dist = dist
        self._torch = torch
        self.group = process_group
        self.rank = dist.get_rank(process_group)
        self.world_size = dist.get_world_size(process_group)
        self.element_type = element_type
        self.dtype = getattr(torch, _TORCH_DTYPES[element_type])
        self.ring_id = ring_id
        self.fallback = fallback
        self.fallback_calls = 0
        self.calls = 0
        self.bytes_reduced = 0
        self._broken: Optional[str] = None
        self._logged_fallback = False
        self._appliance = ApplianceClient(appliance, token_file) if appliance and transport != "switchml" else None
        self._installed_job = None
        self._closed = False
        self.ring = {"ringId": ring_id, "elementType": element_type, "window": window, "msgLen": msg_len,
                     "payloadSize": payload_size, "inetTag": inet_tag, "resultTag": result_tag,
                     "timeoutMs": int(timeout * 1000)}
        if self.world_size < 2:
            raise SetupError("a netreduce ring needs at least 2 ranks")
        if endpoint_nice is not None and not -20 <= endpoint_nice <= 19:
            raise SetupError(f"endpoint_nice must be -20..19: {endpoint_nice}")

        if transport == "sidecar":
            if device is None:
                raise SetupError("the sidecar transport needs device= (the interface to the switch)")
            from .sidecar import SidecarTransport  # noqa: PLC0415
            self.transport = SidecarTransport(device, shm_bytes, payload_size, ip=ip, command=sidecar_command,
                                              rto_us=rto_us, endpoint_nice=endpoint_nice)
        elif transport == "switchml":
            from .switchml import SwitchMlTransport  # noqa: PLC0415
            self.transport = SwitchMlTransport(device, shm_bytes, controller, elements=switchml_elements,
                                               outstanding=switchml_outstanding, element_type=element_type, ip=ip,
                                               command=sidecar_command, endpoint_nice=endpoint_nice)
        elif transport == "verbs":
            if device is None:
                raise SetupError("the verbs transport needs device= (the RDMA device, e.g. mlx5_0 or rxe0)")
            from .verbs import VerbsTransport  # noqa: PLC0415
            self.transport = VerbsTransport(device, shm_bytes, payload_size, ip=ip)
        elif isinstance(transport, str):
            raise SetupError(f"unknown transport {transport!r} (sidecar, verbs, switchml, or a transport object)")
        else:
            self.transport = transport
        self._label = f"ring {ring_id}" if getattr(self.transport, "needs_ring", True) else \
            f"{getattr(self.transport, 'name', 'transport')} session"
        try:
            self._setup(install, job_name)
        except BaseException:
            self._shutdown_transport()
            raise
        self._memory = torch.frombuffer(self.transport.memory, dtype=torch.uint8)
        self._elements_per_piece = len(self.transport.memory) // _ELEMENT_SIZES[element_type]
        self._layout = getattr(self.transport, "layout", None)
        if self._layout is not None:
            self._placed_areas(self._layout, result_tag)
        if cuda_piece_bytes is not None and cuda_piece_bytes < 1 << 16:
            raise SetupError(f"cuda_piece_bytes must be at least 64 KiB: {cuda_piece_bytes}")
        self._cuda_piece_elements = self._elements_per_piece if cuda_piece_bytes is None else \
            min(self._elements_per_piece, cuda_piece_bytes // _ELEMENT_SIZES[element_type])
        self._streams: dict = {}
        self._pinned_buffers = None
        self._queue: "queue.Queue" = queue.Queue()
        self._thread = threading.Thread(target=self._serve, name="netreduce-session", daemon=True)
        self._thread.start()

    # -- set-up -------------------------------------------------------------------------------------------------

    def _gather(self, value):
        values = [None] * self.world_size
        self._dist.all_gather_object(values, value, group=self.group)
        return values

    def _setup(self, install: bool, job_name: Optional[str]) -> None:
        try:
            mine = self.transport.open(rank=self.rank, world=self.world_size, ring=self.ring)
        except NetReduceError as error:
            mine = {"error": str(error)}
        # Every rank learns of any rank's failure here, so none is left waiting in a later collective.
        infos = self._gather(mine)
        failed = {r: info["error"] for r, info in enumerate(infos) if "error" in info}
        if failed:
            raise SetupError("could not open the transport on " +
                             "; ".join(f"rank {r}: {reason}" for r, reason in failed.items()))
        self.addresses = [info["ip"] for info in infos]
        if not getattr(self.transport, "needs_ring", True):
            self._check_same_session(infos)
            return  # no ring: nothing to install, check or connect (SwitchML: the controller opened the job)
        if self._appliance is not None:
            if install:
                self._install(job_name or f"netreduce-ring-{self.ring_id}")
            try:
                self._check_ring()
                problem = None
            except NetReduceError as error:
                problem = (type(error).__name__, str(error))
            problems = [p for p in self._gather(problem) if p is not None]
            if problems:
                kinds = {"RingMismatch": RingMismatch, "ApplianceUnreachable": ApplianceUnreachable}
                raise kinds.get(problems[0][0], SetupError)(problems[0][1])
        successor = infos[(self.rank + 1) % self.world_size]["receive"]
        predecessor = infos[(self.rank - 1) % self.world_size]["send"]
        try:
            self.transport.connect(successor, predecessor)
            refused = None
        except NetReduceError as error:
            refused = str(error)
        # Every rank learns of any rank's failed connect here (e.g. ranks opened with different shm_bytes), instead
        # of the others waiting for it at a barrier until the process group's timeout. This exchange is also the
        # barrier: nobody sends before every rank's queue pairs are connected (a write into an unconnected QP is
        # lost until the RC timeout).
        refusals = {r: reason for r, reason in enumerate(self._gather(refused)) if reason is not None}
        if refusals:
            raise SetupError("could not connect the ring on " +
                             "; ".join(f"rank {r}: {reason}" for r, reason in refusals.items()))

    def _check_same_session(self, infos) -> None:
        """A transport without a ring (SwitchML): every rank must cut a tensor into the same calls and packets, or the
        appliance would add up values of different positions: the same ``elements`` (what a call takes at most: the
        shared memory) and ``elementsPerPacket``, the same switch, and the same ``elementType`` (the appliance adds
        int32 whatever the ranks mean by them)."""
        keys = ("elements", "elementsPerPacket", "elementType", "switchIp")
        seen = [tuple(info.get(key) for key in keys) for info in infos]
        if len(set(seen)) > 1:
            raise SetupError("the ranks' switchml sessions differ (every rank needs the same shm_bytes, "
                             "switchml_elements and element_type): " + "; ".join(
                                 f"rank {r}: " + ", ".join(f"{key} {value}" for key, value in zip(keys, values))
                                 for r, values in enumerate(seen)))

    def _install(self, job_name: str) -> None:
        error = None
        if self.rank == 0:
            job = {"name": job_name, "rings": [{
                "id": self.ring_id, "elementType": self.element_type, "window": self.ring["window"],
                "msgLen": self.ring["msgLen"], "payloadSize": self.ring["payloadSize"],
                "pmtu": self.ring["payloadSize"], "inetTag": self.ring["inetTag"],
                "resultTag": self.ring["resultTag"],
                "members": [{"rank": r, "ip": ip} for r, ip in enumerate(self.addresses)]}]}
            try:
                self._appliance.add_job(job)
                self._installed_job = job_name
            except NetReduceError as failure:
                error = str(failure)
        errors = self._gather(error)
        if errors[0] is not None:
            raise SetupError(errors[0])

    def _check_ring(self) -> None:
        check_ring_parameters(
            self._appliance.ring_parameters(self.ring_id), ring_id=self.ring_id, world=self.world_size,
            rank=self.rank, window=self.ring["window"], msg_len=self.ring["msgLen"],
            payload=self.ring["payloadSize"], dtype=self.element_type, inet_tag=self.ring["inetTag"],
            result_tag=self.ring["resultTag"], ip=self.addresses[self.rank])

    def _placed_areas(self, layout: dict, result_tag: str) -> None:
        """A transport in message layout (the sidecar): views of its input and output areas' data parts, (messages,
        messageBytes - 8) bytes each, so that a bucket goes in and its sum comes out in one strided copy each."""
        messages, message_bytes = layout["messages"], layout["messageBytes"]
        size = messages * message_bytes
        if messages <= 0 or message_bytes <= INA_LENGTH or max(layout["input"], layout["output"]) + size > \
                self._memory.numel():
            raise SetupError(f"the transport's areas do not fit its memory: {layout}")
        inputs = self._memory[layout["input"]:layout["input"] + size].view(messages, message_bytes)
        outputs = self._memory[layout["output"]:layout["output"] + size].view(messages, message_bytes)
        self._data_bytes = message_bytes - INA_LENGTH
        self._input = inputs[:, INA_LENGTH:]
        self._output = outputs[:, INA_LENGTH:]
        self._output_tags = outputs[:, :4]
        self._result_tag = self._torch.tensor(list(result_tag.encode("ascii")), dtype=self._torch.uint8)
        self._elements_per_piece = messages * self._data_bytes // _ELEMENT_SIZES[self.element_type]

    @property
    def message_data_bytes(self) -> Optional[int]:
        """Tensor bytes one message of the ring carries (MsgLen x payload size less the 8-byte INA header) where the
        transport sends whole messages (the sidecar's message layout: a call's last message goes out zero-padded to
        its full size, so a tensor that fills it costs no more on the wire than one that does not); None otherwise."""
        return self._data_bytes if self._layout is not None else None

    # -- calls --------------------------------------------------------------------------------------------------

    def submit(self, tensor, average: bool = False):
        """Queue an in-place all-reduce of ``tensor``; a ``torch.futures.Future`` holding the tensor when done.

        A tensor on a CUDA device is read once the work queued on its stream so far (the caller's current stream at
        this call) is done, and summed through pinned host memory in pieces (:meth:`_reduce_cuda`). The future is
        CUDA-aware: it completes when the sums are on the device, and whoever waits on it (``wait()``, ``then``,
        DDP) has its current stream wait for the copies, not the host."""
        torch = self._torch
        if self._closed:
            raise NetReduceError("the session is closed")
        if tensor.dtype != self.dtype:
            raise TypeError(f"this session's ring sums {self.element_type}; the tensor is {tensor.dtype} "
                            f"(convert it, or open a session on a ring of that type)")
        if tensor.device.type == "cuda":
            future = torch.futures.Future(devices=[tensor.device])
            ready = torch.cuda.Event()
            ready.record(torch.cuda.current_stream(tensor.device))
            self._queue.put((tensor, average, future, ready))
            return future
        if tensor.device.type != "cpu":
            raise TypeError(f"netreduce sums CPU and CUDA tensors; the tensor is on {tensor.device}")
        future = torch.futures.Future()
        self._queue.put((tensor, average, future, None))
        return future

    def allreduce_(self, tensor, average: bool = False):
        """Sum ``tensor`` across the ranks in place (or average it); returns it. Blocks until done (for a CUDA
        tensor: the caller's current stream waits for the sums; the host does not)."""
        return self.submit(tensor, average).wait()

    def _serve(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            tensor, average, future, ready = item
            try:
                if ready is not None:
                    self._reduce_cuda(tensor, average, future, ready)
                    continue
                self._reduce(tensor)
                if average:
                    tensor.div_(self.world_size)
                future.set_result(tensor)
            except BaseException as error:  # noqa: BLE001 - handed to the caller through the future
                future.set_exception(error)

    def _reduce(self, tensor) -> None:
        flat = tensor.view(-1) if tensor.is_contiguous() else None
        work = flat if flat is not None else tensor.contiguous().view(-1)
        error = self._through_appliance(work) if self._broken is None else self._broken
        self._settle(work, error)
        if flat is None:
            tensor.copy_(work.view_as(tensor))
        self.calls += 1
        self.bytes_reduced += work.numel() * work.element_size()

    def _settle(self, work, error: Optional[str]) -> None:
        """After a call through the appliance: if any rank's failed (with ``fallback``), all sum ``work`` (still
        their own values) through the process group."""
        if self._any_failed(error):
            self._fall_back(work, error or "another rank's call through the appliance failed")

    def _any_failed(self, error: Optional[str]) -> bool:
        """Whether this call must fall back: with ``fallback``, every rank learns whether any failed (every rank
        must take the same path for the call, or a gloo all_reduce would wait for ever); without, a failure
        raises."""
        if not self.fallback:
            if error is not None:
                raise TransportError(error)
            return False
        flag = self._torch.tensor([0 if error is None else 1], dtype=self._torch.int32)
        self._dist.all_reduce(flag, op=self._dist.ReduceOp.MAX, group=self.group)
        return int(flag.item()) != 0

    # -- CUDA tensors ---------------------------------------------------------------------------------------------

    def _reduce_cuda(self, tensor, average: bool, future, ready) -> None:
        """Sum a CUDA tensor: everything on one copy stream of the session's, which first waits for ``ready`` (the
        caller's stream when it submitted), so no unrelated stream is synchronised. The tensor is copied to pinned
        host memory a piece at a time (:meth:`_through_pinned`), and the sums land in a device buffer beside it, so
        that on failure the tensor still holds this rank's own values for the fallback. The future is completed
        inside the copy stream's context: it records the copy stream, and its waiters wait for that."""
        torch = self._torch
        stream = self._copy_stream(tensor.device)
        with torch.cuda.device(tensor.device), torch.cuda.stream(stream):
            stream.wait_event(ready)
            # The caching allocator must not hand the tensor's memory to another stream's work before the copy
            # stream's is done (a compress hook's temporary goes out of scope as soon as the hook returns).
            tensor.record_stream(stream)
            flat = tensor.view(-1) if tensor.is_contiguous() else None
            work = flat if flat is not None else tensor.contiguous().view(-1)
            sums = torch.empty_like(work)
            error = self._through_pinned(work, sums, stream) if self._broken is None else self._broken
            if self._any_failed(error):
                # gloo sums host tensors: this rank's own values go to the host (after the copy stream's work so
                # far), are summed there and come back on the copy stream.
                host = work.to("cpu")
                self._fall_back(host, error or "another rank's call through the appliance failed")
                work.copy_(host)
            else:
                work.copy_(sums)
            if flat is None:
                tensor.copy_(work.view_as(tensor))
            if average:
                tensor.div_(self.world_size)
            self.calls += 1
            self.bytes_reduced += work.numel() * work.element_size()
            future.set_result(tensor)

    def _copy_stream(self, device):
        streams = self._streams
        stream = streams.get(device.index)
        if stream is None:
            stream = streams[device.index] = self._torch.cuda.Stream(device)
        return stream

    def _pinned(self):
        """Two pinned host buffers for pieces on their way out and two for their sums on the way back, made at the
        first CUDA call (pinning is slow) and kept."""
        if self._pinned_buffers is None:
            torch = self._torch
            size = self._cuda_piece_elements * _ELEMENT_SIZES[self.element_type]
            self._pinned_buffers = [torch.empty(size, dtype=torch.uint8).pin_memory() for _ in range(4)]
        return self._pinned_buffers

    def _through_pinned(self, work, sums, stream) -> Optional[str]:
        """Sum ``work`` (on the device) into ``sums`` (on the device) piece by piece through pinned host memory: the
        device-to-host copy of piece k+1 is queued before piece k goes on the ring, and piece k's sums are queued
        back to the device as soon as they are here, so both copies overlap the ring. Two buffers each way; a
        buffer is reused only once the copy that used it is done (its event)."""
        torch = self._torch
        elements = self._cuda_piece_elements
        size = work.element_size()
        outs, backs = self._pinned()[:2], self._pinned()[2:]
        starts = list(range(0, work.numel(), elements))
        back_done = [None, None]

        def fetch(index):
            start = starts[index]
            count = min(elements, work.numel() - start)
            outs[index % 2][:count * size].view(work.dtype).copy_(work[start:start + count], non_blocking=True)
            event = torch.cuda.Event()
            event.record(stream)
            return event

        try:
            fetched = fetch(0)
            for index, start in enumerate(starts):
                count = min(elements, work.numel() - start)
                slot = index % 2
                fetched.synchronize()
                if index + 1 < len(starts):
                    fetched = fetch(index + 1)  # its buffer's last reader was piece index - 1, already summed
                if back_done[slot] is not None:
                    back_done[slot].synchronize()  # piece index - 2's sums have left this buffer
                self._sum_piece(outs[slot][:count * size], backs[slot][:count * size], size)
                sums[start:start + count].copy_(backs[slot][:count * size].view(work.dtype), non_blocking=True)
                back_done[slot] = torch.cuda.Event()
                back_done[slot].record(stream)
            return None
        except NetReduceError as error:
            self._broken = f"{self._label}: {error}"
            return self._broken

    # -- host pieces ----------------------------------------------------------------------------------------------

    def _through_appliance(self, flat) -> Optional[str]:
        """Sum ``flat`` (on the host) piece by piece; None on success, the reason otherwise. The last piece's sum
        goes straight into ``flat``; earlier ones are kept aside until every piece is done, so on failure ``flat``
        still holds this rank's own values (which the fallback then sums)."""
        torch = self._torch
        done = []
        try:
            starts = range(0, flat.numel(), self._elements_per_piece)
            for index, start in enumerate(starts):
                piece = flat[start:start + self._elements_per_piece].view(torch.uint8)
                last = index == len(starts) - 1
                result = piece if last else torch.empty_like(piece)
                self._sum_piece(piece, result, flat.element_size())
                if not last:
                    done.append((piece, result))
            for piece, result in done:
                piece.copy_(result)
            return None
        except NetReduceError as error:
            self._broken = f"{self._label}: {error}"
            return self._broken

    def _sum_piece(self, piece, result, element_size: int) -> None:
        """Sum one piece (host bytes, at most what the transport's memory holds) into ``result`` (host bytes, may be
        ``piece`` itself)."""
        if self._layout is not None:
            self._sum_piece_in_areas(piece, result, element_size)
            return
        view = self._memory
        view[:piece.numel()].copy_(piece)
        self.transport.allreduce(0, piece.numel() // element_size)
        result.copy_(view[:piece.numel()])

    def _sum_piece_in_areas(self, piece, result, element_size: int) -> None:
        """Through a transport in message layout: the piece is copied into the input area's data parts (the last
        message's tail zeroed), summed, and its sum copied out of the output area's data parts."""
        data = self._data_bytes
        full, tail = divmod(piece.numel(), data)
        self._input[:full].copy_(piece[:full * data].view(full, data))
        if tail:
            self._input[full, :tail].copy_(piece[full * data:])
            self._input[full, tail:].zero_()
        self.transport.allreduce(piece.numel() // element_size)
        result[:full * data].view(full, data).copy_(self._output[:full])
        if tail:
            result[full * data:].copy_(self._output[full, :tail])
        # The sidecar checked every header when the sums arrived; a write landing in the output area after that
        # (only traffic passing the appliance unaggregated could, e.g. a ring removed between two calls) shows as
        # a request tag where the result tag was. Checked after the copy, so it covers every byte copied.
        messages = full + (1 if tail else 0)
        if not bool((self._output_tags[:messages] == self._result_tag).all()):
            raise TransportError(f"a result was overwritten while it was read (a message arrived unaggregated: "
                                 f"ring {self.ring_id} removed from the appliance, or the traffic bypasses it)")

    def _fall_back(self, flat, reason: str) -> None:
        self.fallback_calls += 1
        if not self._logged_fallback:
            self._logged_fallback = True
            log.warning("netreduce: all-reduce through the appliance failed (%s); using the process group's "
                        "all_reduce for this and every later call of this session", reason)
        self._broken = self._broken or reason
        self._dist.all_reduce(flat, group=self.group)

    def stats(self) -> dict:
        """Calls, fallbacks and bytes here; the transport's own counters (retransmissions, timeouts)."""
        result = {"calls": self.calls, "fallback_calls": self.fallback_calls, "bytes_reduced": self.bytes_reduced,
                  "broken": self._broken}
        try:
            result["transport"] = self.transport.stats()
        except NetReduceError as error:
            result["transport"] = {"error": str(error)}
        return result

    # -- the end ------------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Finish queued calls, wait for every rank (so no rank's last acknowledgements go unanswered), stop the
        transport, and remove the ring if this session installed it."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        self._thread.join()
        try:
            self._dist.barrier(group=self.group)
        finally:
            self._shutdown_transport()
            if self._installed_job and self._appliance is not None:
                try:
                    self._appliance.remove_job(self._installed_job)
                except NetReduceError as error:
                    log.warning("netreduce: could not remove job %s: %s", self._installed_job, error)

    def _shutdown_transport(self) -> None:
        try:
            self.transport.close()
        except NetReduceError as error:  # pragma: no cover - best effort at the end
            log.warning("netreduce: closing the transport: %s", error)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

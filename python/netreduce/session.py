"""One netreduce session per trainer process: the transport, the ring, and every call through it.

A :class:`Session` is set up once (transport started, memory registered, ring neighbours connected, ring parameters
checked against the appliance) and then serves every all-reduce of the process: DDP's gradient buckets through the
communication hooks in :mod:`netreduce.hooks`, or :func:`allreduce_` calls. Calls run in order on one background
thread, so a DDP hook returns at once and the backward pass goes on while a bucket is summed.

Rendezvous is PyTorch's: the ranks exchange their queue pair information with ``all_gather_object`` on the process
group (``env://`` or whatever ``init_process_group`` was given), so no other handshake tool is needed.
"""
import ctypes
import logging
import queue
import threading
import time
from typing import Optional

from .control import ApplianceClient, check_ring_parameters
from .errors import ApplianceUnreachable, NetReduceError, RingMismatch, SetupError, TransportError

log = logging.getLogger("netreduce")

_TORCH_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "int32": "int32"}
_ELEMENT_SIZES = {"fp32": 4, "fp16": 2, "bf16": 2, "int32": 4}
# A piece of at most this many messages goes into the message layout and out of it one memmove(3) per message, and its
# result tags are compared as bytes: a small call's copies are then a few C calls, where torch's strided copy, zeroing
# and comparison are a dozen dispatched operations (4 KiB: 9.1 against 1.8 us, 287 KB: 21 against 8.5 us on the 2-core
# development VM) and may wake the intra-op thread pool. Larger pieces keep torch's copy, which can use many cores.
_ROW_COPY_MAX_MESSAGES = 64

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
      call (all ranks agree on it), log once and count it in :attr:`fallback_calls`, instead of raising. Later calls
      stay on the process group until the appliance is back (``recover_after``).
    * ``recover_after``: with ``fallback``, seconds on the fallback before the ranks try the appliance again, and
      between tries (default 30; ``None``: stay on the fallback for good). A try happens after a call that ends a
      step (a DDP bucket that is the step's last; every ``allreduce_``), on every rank at the same call: the ring's
      parameters are checked on the appliance (with ``appliance=``), a fresh transport is started and connected,
      and the next call goes through the appliance; a failed try keeps the fallback. Counted in
      :attr:`recoveries`. A transport given as an object cannot be replaced (give a factory: a callable that returns
      one).
    * ``timeout``: seconds without progress before a call fails.
    * ``ecn_window``, ``ecn_gain``, ``ecn_min_window``: the sidecar's window follows ECN marks on results,
      DCTCP-style (PANAMA; on by default, g = 1/16, never cut below ``ecn_min_window`` messages, default 1;
      docs/configuration.md, "Worker congestion control"): without marks it stays at ``window``; marked results
      shrink it on every rank at once. ``stats()["transport"]`` reports ``window``, ``alpha``,
      ``markedResults``.
    * ``endpoint_nice``: nice value of the sidecar's endpoint thread (default: the sidecar's, -10, so frames get a
      core at once while the trainer keeps the host busy; lowering it needs CAP_SYS_NICE or RLIMIT_NICE, and without
      either the sidecar keeps its value and its warning goes to the ``netreduce`` logger).
    * ``agent``: the Unix socket of this host's sidecar agent (``netreduce worker agent``): the sidecar is a
      session of that long-lived process instead of a process of this trainer's own, so its packet path is compiled
      already (docs/python.md, "The sidecar agent"). ``ip`` and ``endpoint_nice`` are then the agent's (its
      ``--ip``, ``--endpoint-nice``). Default: the ``NETREDUCE_AGENT`` environment variable, else the agent the
      shipped unit runs for ``device`` (``/run/netreduce-agent-DEVICE/agent.sock``) when this process can reach it
      (one that gives no session is logged and a sidecar of our own starts instead), else none. ``False`` (or
      ``"off"``, also as the variable's value): a sidecar of this trainer's own.
    * ``doorbell``: the sidecar's calls go through the call doorbell in the shared memory (an 8-byte request word
      and an eventfd each way) instead of a JSON line each way over its socket (default True; control requests and
      errors stay JSON; :mod:`netreduce.sidecar`).
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
                 rto_us: int = 400_000, endpoint_nice: Optional[int] = None, doorbell: bool = True,
                 controller: Optional[str] = None,
                 switchml_elements: int = 256, switchml_outstanding: int = 128, cuda_piece_bytes: Optional[int] = None,
                 recover_after: Optional[float] = 30.0, ecn_window: bool = True, ecn_gain: float = 1 / 16,
                 ecn_min_window: int = 1, agent=None):
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
        self._boundary = True
        self._logged_fallback = False
        self._appliance = ApplianceClient(appliance, token_file) if appliance and transport != "switchml" else None
        self._installed_job = None
        self._installed_job_body = None
        self._closed = False
        self.ring = {"ringId": ring_id, "elementType": element_type, "window": window, "msgLen": msg_len,
                     "payloadSize": payload_size, "inetTag": inet_tag, "resultTag": result_tag,
                     "timeoutMs": int(timeout * 1000), "ecnWindow": bool(ecn_window), "ecnGain": float(ecn_gain),
                     "ecnMinWindow": ecn_min_window}
        if self.world_size < 2:
            raise SetupError("a netreduce ring needs at least 2 ranks")
        if not 0 < ecn_gain <= 1:
            raise SetupError(f"ecn_gain must be in (0, 1]: {ecn_gain}")
        if isinstance(ecn_min_window, bool) or not isinstance(ecn_min_window, int) or ecn_min_window < 1:
            raise SetupError(f"ecn_min_window must be an integer of at least 1: {ecn_min_window!r}")
        if endpoint_nice is not None and not -20 <= endpoint_nice <= 19:
            raise SetupError(f"endpoint_nice must be -20..19: {endpoint_nice}")

        if cuda_piece_bytes is not None and cuda_piece_bytes < 1 << 16:
            raise SetupError(f"cuda_piece_bytes must be at least 64 KiB: {cuda_piece_bytes}")
        if recover_after is not None and recover_after < 0:
            raise SetupError(f"recover_after must be None or at least 0 seconds: {recover_after}")
        self.recover_after = recover_after
        self.recoveries = 0
        self._broken_since = 0.0
        self._after_call: Optional[str] = None
        self._fresh: Optional["_FreshTransport"] = None
        if transport == "sidecar":
            if device is None:
                raise SetupError("the sidecar transport needs device= (the interface to the switch)")
            from .sidecar import sidecar_transport  # noqa: PLC0415

            def factory():
                return sidecar_transport(device, shm_bytes, payload_size, agent=agent, ip=ip, command=sidecar_command,
                                         rto_us=rto_us, endpoint_nice=endpoint_nice, doorbell=doorbell)
        elif transport == "switchml":
            from .switchml import SwitchMlTransport  # noqa: PLC0415

            def factory():
                return SwitchMlTransport(device, shm_bytes, controller, elements=switchml_elements,
                                         outstanding=switchml_outstanding, element_type=element_type, ip=ip,
                                         command=sidecar_command, endpoint_nice=endpoint_nice)
        elif transport == "verbs":
            if device is None:
                raise SetupError("the verbs transport needs device= (the RDMA device, e.g. mlx5_0 or rxe0)")
            from .verbs import VerbsTransport  # noqa: PLC0415

            def factory():
                return VerbsTransport(device, shm_bytes, payload_size, ip=ip)
        elif isinstance(transport, str):
            raise SetupError(f"unknown transport {transport!r} (sidecar, verbs, switchml, or a transport object)")
        elif callable(transport) and not hasattr(transport, "open"):
            factory = transport  # a factory of transport objects: a recovery gets a fresh one
        else:
            factory = None  # one transport object: nothing to recover with
        self._transport_factory = factory
        self.transport = factory() if factory is not None else transport
        self._label = f"ring {ring_id}" if getattr(self.transport, "needs_ring", True) else \
            f"{getattr(self.transport, 'name', 'transport')} session"
        try:
            self._setup(install, job_name)
        except BaseException:
            self._shutdown_transport()
            raise
        self._cuda_piece_bytes = cuda_piece_bytes
        self._result_tag_text = result_tag
        self._streams: dict = {}
        self._pinned_buffers = None
        self._attach_transport()
        self._queue: "queue.Queue" = queue.Queue()
        self._pending = 0  # calls submitted and not yet done
        self._pending_lock = threading.Lock()
        self._serving = threading.Lock()  # one call at a time: the session's thread or an inline caller
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
                self._installed_job_body = job
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

    def _attach_transport(self) -> None:
        """Views of the transport's memory and the piece sizes they give (at start, and after a recovery)."""
        torch = self._torch
        self._memory = torch.frombuffer(self.transport.memory, dtype=torch.uint8)
        self._elements_per_piece = len(self.transport.memory) // _ELEMENT_SIZES[self.element_type]
        self._layout = getattr(self.transport, "layout", None)
        if self._layout is not None:
            self._placed_areas(self._layout, self._result_tag_text)
        pieces = self._elements_per_piece if self._cuda_piece_bytes is None else \
            min(self._elements_per_piece, self._cuda_piece_bytes // _ELEMENT_SIZES[self.element_type])
        if pieces != getattr(self, "_cuda_piece_elements", None):
            self._pinned_buffers = None
        self._cuda_piece_elements = pieces

    def _placed_areas(self, layout: dict, result_tag: str) -> None:
        """A transport in message layout (the sidecar): views of its input and output areas' data parts, (messages,
        messageBytes - 8) bytes each, so that a bucket goes in and its sum comes out in one strided copy each (or one
        memmove per message, for a piece of a few messages: _sum_piece_by_rows)."""
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
        self._result_tag_bytes = result_tag.encode("ascii")
        # Addresses for the row copies (_ROW_COPY_MAX_MESSAGES); self._memory keeps the mapping alive.
        self._message_stride = message_bytes
        self._input_address = self._input.data_ptr()
        self._output_address = self._output.data_ptr()
        self._output_tags_address = self._output_tags.data_ptr()
        self._elements_per_piece = messages * self._data_bytes // _ELEMENT_SIZES[self.element_type]
        # A transport that answers a call at its sums, before its own sends are acknowledged (the sidecar's
        # doorbell), says through wait_input() when the input area may be written again.
        self._wait_input = getattr(self.transport, "wait_input", None) or (lambda: None)

    @property
    def message_data_bytes(self) -> Optional[int]:
        """Tensor bytes one message of the ring carries (MsgLen x payload size less the 8-byte INA header) where the
        transport sends whole messages (the sidecar's message layout: a call's last message goes out zero-padded to
        its full size, so a tensor that fills it costs no more on the wire than one that does not); None otherwise."""
        return self._data_bytes if self._layout is not None else None

    # -- calls --------------------------------------------------------------------------------------------------

    def submit(self, tensor, average: bool = False, boundary: bool = True, inline: bool = False):
        """Queue an in-place all-reduce of ``tensor``; a ``torch.futures.Future`` holding the tensor when done.
        ``boundary``: whether this call ends a step (the DDP hooks pass the bucket's ``is_last()``): only after
        such a call may the ranks go back from the fallback to the appliance. ``inline``: when no earlier call is
        queued or running, make this one on the caller's thread and return a completed future (no hand-over to the
        session's thread and back, which costs milliseconds on a busy host); otherwise queue it as usual. For a
        caller that would wait at once anyway: ``allreduce_``, and the DDP hooks for a step's last bucket.

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
            return self._enqueue((tensor, average, future, ready, boundary), inline)
        if tensor.device.type != "cpu":
            raise TypeError(f"netreduce sums CPU and CUDA tensors; the tensor is on {tensor.device}")
        future = torch.futures.Future()
        return self._enqueue((tensor, average, future, None, boundary), inline)

    def _enqueue(self, item, inline: bool):
        with self._pending_lock:
            run_here = inline and self._pending == 0
            self._pending += 1
        if run_here:
            # Nothing queued or running, and anything submitted from now on queues behind this call (pending), so
            # the order of calls is kept; the lock keeps the session's thread out meanwhile.
            with self._serving:
                self._run(item)
        else:
            self._queue.put(item)
        return item[2]

    def allreduce_(self, tensor, average: bool = False):
        """Sum ``tensor`` across the ranks in place (or average it); returns it. Blocks until done (for a CUDA
        tensor: the caller's current stream waits for the sums; the host does not). Made on the caller's thread
        when the session has nothing else to do."""
        return self.submit(tensor, average, inline=True).wait()

    def _serve(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            with self._serving:
                self._run(item)

    def _run(self, item) -> None:
        """One call (on the session's thread, or inline on the caller's), then what its vote decided."""
        try:
            tensor, average, future, ready, boundary = item
            self._boundary = boundary
            try:
                if ready is not None:
                    self._reduce_cuda(tensor, average, future, ready)
                else:
                    self._reduce(tensor)
                    if average:
                        tensor.div_(self.world_size)
                    future.set_result(tensor)
            except BaseException as error:  # noqa: BLE001 - handed to the caller through the future
                future.set_exception(error)
            action, self._after_call = self._after_call, None
            # After the step's last call is handed back, so that the trainer's optimizer step goes on meanwhile.
            if action == "prepare":
                self._prepare_fresh()
            elif action == "switch":
                self._switch_to_fresh()
        finally:
            with self._pending_lock:
                self._pending -= 1

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
        # The same vote carries the way back to the appliance, decided only at a step boundary: whether any rank
        # wants a fresh transport prepared (on the fallback for recover_after seconds, none being prepared or its
        # last one failed), and whether any rank has none ready. MAX over the ranks: one rank's wish is enough to
        # start, every rank's readiness is needed to switch.
        fresh = self._fresh
        ready = fresh is not None and fresh.ready()
        want = self._broken is not None and self._boundary and self.recover_after is not None and \
            self._transport_factory is not None and not ready and (fresh is None or fresh.failed()) and \
            time.monotonic() - self._broken_since >= self.recover_after
        flag = self._torch.tensor([0 if error is None else 1, 1 if want else 0, 0 if ready else 1],
                                  dtype=self._torch.int32)
        self._dist.all_reduce(flag, op=self._dist.ReduceOp.MAX, group=self.group)
        failed, wanted, not_ready = (int(value) != 0 for value in flag.tolist())
        if self._broken is not None and self._boundary:
            self._after_call = "switch" if not not_ready else "prepare" if wanted else None
        return failed

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
        if full + (1 if tail else 0) <= _ROW_COPY_MAX_MESSAGES and not (piece.is_cuda or result.is_cuda) and \
                piece.is_contiguous() and result.is_contiguous():  # raw host addresses: pinned pieces qualify
            self._sum_piece_by_rows(piece, result, element_size, full, tail)
            return
        self._wait_input()
        self._input[:full].copy_(piece[:full * data].view(full, data))
        if tail:
            self._input[full, :tail].copy_(piece[full * data:])
            self._input[full, tail:].zero_()
        self.transport.allreduce(piece.numel() // element_size)
        self._from_area(self._output, result, full, tail)
        # The sidecar checked every header when the sums arrived; a write landing in the output area after that
        # (only traffic passing the appliance unaggregated could, e.g. a ring removed between two calls) shows as
        # a request tag where the result tag was. Checked after the copy, so it covers every byte copied.
        messages = full + (1 if tail else 0)
        if not bool((self._output_tags[:messages] == self._result_tag).all()):
            # ``result`` may be the caller's tensor: give it back its own values, which the input area still holds,
            # so that a fallback sums those and not what arrived.
            self._from_area(self._input, result, full, tail)
            raise self._overwritten()

    def _from_area(self, area, result, full: int, tail: int) -> None:
        """Copy the data parts of ``area``'s first messages (``full`` whole, then ``tail`` bytes) into ``result``."""
        data = self._data_bytes
        result[:full * data].view(full, data).copy_(area[:full])
        if tail:
            result[full * data:].copy_(area[full, :tail])

    def _sum_piece_by_rows(self, piece, result, element_size: int, full: int, tail: int) -> None:
        """_sum_piece_in_areas for a piece of a few messages: one memmove per message each way, the last message's
        tail zeroed with memset, the result tags compared as bytes (after the copy, as there)."""
        data, stride = self._data_bytes, self._message_stride
        source, target = piece.data_ptr(), self._input_address
        self._wait_input()
        for row in range(full):
            ctypes.memmove(target + row * stride, source + row * data, data)
        if tail:
            ctypes.memmove(target + full * stride, source + full * data, tail)
            ctypes.memset(target + full * stride + tail, 0, data - tail)
        self.transport.allreduce(piece.numel() // element_size)
        target = result.data_ptr()
        self._from_area_by_rows(self._output_address, target, full, tail)
        tags, tag = self._output_tags_address, self._result_tag_bytes
        for row in range(full + (1 if tail else 0)):
            if ctypes.string_at(tags + row * stride, 4) != tag:
                # as in _sum_piece_in_areas: the caller's tensor gets its own values back first
                self._from_area_by_rows(self._input_address, target, full, tail)
                raise self._overwritten()

    def _from_area_by_rows(self, area: int, target: int, full: int, tail: int) -> None:
        """_from_area with one memmove per message: from the data parts of the area at address ``area``."""
        data, stride = self._data_bytes, self._message_stride
        for row in range(full):
            ctypes.memmove(target + row * data, area + row * stride, data)
        if tail:
            ctypes.memmove(target + full * data, area + full * stride, tail)

    def _overwritten(self) -> TransportError:
        return TransportError(f"a result was overwritten while it was read (a message arrived unaggregated: "
                              f"ring {self.ring_id} removed from the appliance, or the traffic bypasses it)")

    def _fall_back(self, flat, reason: str) -> None:
        self.fallback_calls += 1
        if self._broken is None:
            self._broken_since = time.monotonic()
        if not self._logged_fallback:
            self._logged_fallback = True
            log.warning("netreduce: all-reduce through the appliance failed (%s); using the process group's "
                        "all_reduce for this call and later ones%s", reason,
                        "" if self.recover_after is None or self._transport_factory is None else
                        f", trying the appliance again every {self.recover_after:g} s at a step boundary")
        self._broken = self._broken or reason
        self._dist.all_reduce(flat, group=self.group)

    def _prepare_fresh(self) -> None:
        """Every rank at once (a vote decided it): drop any fresh transport from an earlier try and prepare another
        in the background (the ring checked on the appliance, the transport started), while calls go on through the
        process group. The ranks switch to it at a later step boundary, once every rank's is ready."""
        self._broken_since = time.monotonic()
        if self._fresh is not None:
            self._fresh.discard()
        self._fresh = _FreshTransport(self._transport_factory, self._appliance_ready)
        log.info("netreduce: preparing a fresh transport to go back to the appliance")

    def _appliance_ready(self) -> None:
        """In the preparing thread: raises unless the appliance answers with this ring (re-added first when this
        session installed it: a restarted daemon comes back without it)."""
        if self._appliance is None:
            return
        if self._installed_job_body is not None and self.rank == 0:
            try:
                self._appliance.add_job(self._installed_job_body)
            except NetReduceError:
                pass  # still there, or the appliance is down: the check says which
        self._check_ring()

    def _switch_to_fresh(self) -> None:
        """Every rank at once, with every rank's fresh transport ready: open and connect it through the usual set-up
        (its exchanges make a failure on any rank a failure on all), and go back to the appliance."""
        fresh, self._fresh = self._fresh, None
        old, self.transport = self.transport, fresh.transport
        try:
            self._setup(False, None)
        except NetReduceError as error:
            self.transport = old
            self._close_quietly(fresh.transport)
            self._broken_since = time.monotonic()
            log.info("netreduce: could not go back to the appliance (%s); staying on the fallback", error)
            return
        self._attach_transport()
        self._close_quietly(old)
        self.recoveries += 1
        self._broken = None
        self._logged_fallback = False
        log.warning("netreduce: back on the appliance after %d calls on the fallback", self.fallback_calls)

    @staticmethod
    def _close_quietly(transport) -> None:
        try:
            transport.close()
        except NetReduceError as error:  # pragma: no cover - best effort
            log.warning("netreduce: closing a transport: %s", error)

    def stats(self) -> dict:
        """Calls, fallbacks and bytes here; the transport's own counters (retransmissions, timeouts)."""
        result = {"calls": self.calls, "fallback_calls": self.fallback_calls, "bytes_reduced": self.bytes_reduced,
                  "broken": self._broken, "recoveries": self.recoveries}
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
        if getattr(self, "_fresh", None) is not None:
            self._fresh.discard()
            self._fresh = None
        try:
            self.transport.close()
        except NetReduceError as error:  # pragma: no cover - best effort at the end
            log.warning("netreduce: closing the transport: %s", error)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _FreshTransport:
    """A transport being started in the background to go back to the appliance: ``check`` (the appliance answers
    with the ring) then the factory, on a thread of its own; ready when both succeeded, failed when either raised."""

    def __init__(self, factory, check):
        self.transport = None
        self.error: Optional[str] = None
        self._discarded = False
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(factory, check), name="netreduce-fresh-transport",
                                        daemon=True)
        self._thread.start()

    def _run(self, factory, check) -> None:
        try:
            check()
            transport = factory()
        except NetReduceError as error:
            self.error = str(error)
            self._done.set()
            return
        with self._lock:
            if self._discarded:
                Session._close_quietly(transport)
            else:
                self.transport = transport
        self._done.set()

    def ready(self) -> bool:
        return self._done.is_set() and self.transport is not None

    def failed(self) -> bool:
        return self._done.is_set() and self.transport is None

    def discard(self) -> None:
        with self._lock:
            self._discarded = True
            transport, self.transport = self.transport, None
        if transport is not None:
            Session._close_quietly(transport)

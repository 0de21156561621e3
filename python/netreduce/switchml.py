"""The ``switchml`` transport: SwitchML (NSDI '21) through the appliance, from a sidecar beside the trainer.

The sidecar is ``netreduce worker serve --protocol switchml``: the project's Java SwitchML worker on an AF_PACKET
port of ``device``. It starts as the ``sidecar`` transport's does (same shared memory file, owner-only Unix socket,
one JSON line per request: :mod:`netreduce.sidecar`), and differs in what it does with them:

* ``open`` registers this rank with the appliance's SwitchML controller (``controller``, HOST:PORT) as the published
  SwitchML client does: rank 0 broadcasts a session id, every rank opens its UDP session, and the last one opens the
  session's job on the appliance with ``elements`` per packet; it returns once every rank has registered. There is
  no ring: nothing to check against the appliance's API, nothing to install, no ``connect``.
* ``allreduce(offset=0, elements)`` sums the first ``elements`` values of the shared memory in place (native byte
  order: the trainer's tensor bytes as they are). The sidecar copies them into the worker's array and the sums back
  (two bulk copies: the worker quantizes from and dequantizes into a Java array).

Element types: ``int32`` (exact, wrapping) and ``fp32`` (SwitchML's block fixed point: within a bound of the exact
sum, not bit-exact; see docs/python.md). fp16 and bf16 have no SwitchML encoding here and are refused.
"""
from typing import Optional

from .errors import SetupError, TransportError
from .sidecar import SidecarTransport

ELEMENT_TYPES = ("fp32", "int32")
DEFAULT_ELEMENTS = 256
DEFAULT_OUTSTANDING = 128


def check_options(*, element_type: str, controller: Optional[str], elements: int, outstanding: int) -> None:
    """Refuse settings SwitchML cannot serve, with a :class:`SetupError` that says which and why (no process is
    started, nothing is registered)."""
    if element_type not in ELEMENT_TYPES:
        raise SetupError(f"the switchml transport sums fp32 (block fixed point, within a bound) and int32 (exact), "
                         f"not {element_type!r}: use element_type='fp32' (allreduce_hook) or a NetReduce ring for "
                         f"fp16/bf16 compression")
    if not controller or not isinstance(controller, str):
        raise SetupError("the switchml transport needs controller='HOST:PORT' (the appliance's SwitchML controller, "
                         "appliance.switchml.controller.listen)")
    host, colon, port = controller.rpartition(":")
    if not colon or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise SetupError(f"controller must be HOST:PORT, not {controller!r}")
    if not isinstance(elements, int) or elements < 32 or elements > 2048 or elements & (elements - 1):
        raise SetupError(f"switchml_elements must be a power of two from 32 to 2048 (the session's elements per "
                         f"packet: 4 bytes each, and the links' MTU must carry them): {elements!r}")
    if not isinstance(outstanding, int) or not 1 <= outstanding <= 16384:
        raise SetupError(f"switchml_outstanding must be 1..16384 (at most the appliance's "
                         f"switchml.sessionPoolSize): {outstanding!r}")


class SwitchMlTransport(SidecarTransport):
    """One ``netreduce worker serve --protocol switchml`` process and the shared memory it sums in place."""

    name = "switchml"
    #: No ring: the session skips the ring check, the ring install and ``connect``.
    needs_ring = False

    def __init__(self, device: str, shm_bytes: int, controller: str, elements: int = DEFAULT_ELEMENTS,
                 outstanding: int = DEFAULT_OUTSTANDING, element_type: str = "fp32", ip: Optional[str] = None,
                 command: Optional[list] = None, start_timeout: float = 60.0, endpoint_nice: Optional[int] = None):
        check_options(element_type=element_type, controller=controller, elements=elements, outstanding=outstanding)
        if shm_bytes < 4:
            raise SetupError(f"shm_bytes must hold at least one element: {shm_bytes}")
        self.layout = None  # values in place at the memory's start: the session's flat-memory path
        self.elements_per_packet = elements
        self.info: Optional[dict] = None  # open's reply: ip, mac, switchIp, switchMac, udpPort, elements
        self._start(device, shm_bytes, ["--protocol", "switchml", "--controller", controller, "--elements",
                                        str(elements), "--outstanding", str(outstanding)],
                    ip=ip, command=command, start_timeout=start_timeout, endpoint_nice=endpoint_nice)

    def open(self, *, rank: int, world: int, ring: dict) -> dict:
        """Register this rank with the controller (blocks until every rank has): the sidecar's answer."""
        request = {"op": "open", "rank": rank, "world": world, "elementType": ring["elementType"],
                   "timeoutMs": ring["timeoutMs"], "shm": self._shm_path, "shmBytes": self.shm_bytes}
        try:
            self.info = self._call(request)
            return self.info
        except TransportError as error:
            raise SetupError(str(error)) from error
        finally:
            self._unlink(self._shm_path)  # both sides have it mapped (or the open failed)

    def connect(self, successor=None, predecessor=None) -> None:
        """Nothing to connect: the controller named the switch at :meth:`open` (the session does not call this)."""

    def allreduce(self, offset: int, elements: int) -> int:
        """Sum the first ``elements`` values of :attr:`memory` across the workers in place; microseconds taken."""
        if offset != 0:
            raise TransportError(f"the switchml sidecar sums from the memory's first byte, not offset {offset}")
        return self._call({"op": "allreduce", "elements": elements})["us"]

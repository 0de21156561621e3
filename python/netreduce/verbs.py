"""The ``verbs`` transport: the host's own RDMA NIC (or Linux soft-RoCE) through pyverbs.

Set up once per session: one protection domain and completion queue, two RC queue pairs (to the successor, from
the predecessor), and three registered regions that live as long as the session:

* the *work memory* (``memory``, ``shm_bytes``): the trainer copies a bucket in, the NIC sends straight from it
  (each message's data is a scatter-gather entry into it, behind an INA header from a small header region), and the
  sums are written back into it;
* the *header slots*: 2N INA headers, slot k mod 2N for message k;
* the *result slots*: 2N messages, where the predecessor's connection writes result k (header, then the sum).

Message numbering (MsgID = k mod 256, slot k mod 2N, immediate k) continues across calls, as the appliance
expects of a ring whose queue pairs stay up. At most N messages are outstanding; a message is done when both its
result has arrived and its own write has been acknowledged (a retransmission reads the work memory, so the sum
is copied over the data only once no retransmission can read it any more).
"""
import ctypes
import ipaddress
import time
from typing import Optional

from netreduce_verbs import ina

from .errors import SetupError, TransportError

INA_LENGTH = ina.LENGTH
_ELEMENT_SIZES = {"fp32": 4, "fp16": 2, "bf16": 2, "int32": 4}


def _pyverbs():
    try:
        from netreduce_verbs import verbs  # noqa: PLC0415 (pyverbs is optional: Debian's python3-pyverbs)
    except ImportError as error:
        raise SetupError("the verbs transport needs pyverbs (Debian: python3-pyverbs, from rdma-core)") from error
    return verbs


def _first_ipv4_gid(verbs, ctx) -> str:
    """The IPv4 address of the device's first RoCEv2 GID that carries one."""
    table = ctx.query_port(verbs.PORT).gid_tbl_len
    for index in range(table):
        try:
            gid = ipaddress.IPv6Address(ctx.query_gid(verbs.PORT, index).gid)
        except Exception:  # noqa: BLE001 - empty or unreadable GID entries
            continue
        if gid.ipv4_mapped is not None and verbs._gid_type(ctx, index) in ("RoCE v2", None):
            return str(gid.ipv4_mapped)
    raise SetupError(f"{ctx.name} has no RoCEv2 GID with an IPv4 address (pass ip=)")


class VerbsTransport:
    """Persistent RC queue pairs to the ring neighbours on an RDMA device (``rxe0``, ``mlx5_0``, ...)."""

    name = "verbs"

    def __init__(self, device: str, shm_bytes: int, payload_size: int, ip: Optional[str] = None,
                 qp_timeout: int = 16, poll_sleep: float = 0.0005):
        verbs = _pyverbs()
        self._verbs = verbs
        self._payload = payload_size
        self._qp_timeout = qp_timeout
        self._poll_sleep = poll_sleep
        from pyverbs.device import Context  # noqa: PLC0415

        try:
            if ip is None:
                probe = Context(name=device)
                try:
                    ip = _first_ipv4_gid(verbs, probe)
                finally:
                    probe.close()
            self._dev = verbs.Device(device, ip)
        except verbs.VerbsError as error:
            raise SetupError(str(error)) from error
        except Exception as error:  # noqa: BLE001 - pyverbs raises its own PyverbsRDMAError
            raise SetupError(f"cannot open RDMA device {device}: {error}") from error
        if self._dev.path_mtu < payload_size:
            self._dev.close()
            raise SetupError(f"{device}'s active MTU is {self._dev.path_mtu}, below the ring's payload size "
                             f"{payload_size} (each packet must carry exactly payloadSize bytes)")
        self.ip = ip
        self._shm_bytes = shm_bytes
        self._work = None
        self.memory = None
        self._send_qp = None
        self._recv_qp = None
        self._headers = None
        self._results = None
        self._scratch = None
        self._next = 0            # message number k of the session's next message
        self.bytes_posted = 0
        self.calls = 0

    # -- set-up -------------------------------------------------------------------------------------------------

    def open(self, *, rank: int, world: int, ring: dict) -> dict:
        verbs = self._verbs
        if ring["payloadSize"] != self._payload:
            raise SetupError(f"payloadSize {ring['payloadSize']} differs from the transport's {self._payload}")
        self._rank, self._world = rank, world
        self._ring_id = ring["ringId"]
        self._window = ring["window"]
        self._msg_len = ring["msgLen"]
        self._inet_tag = _tag(ring.get("inetTag", "NRED"))
        self._result_tag = _tag(ring.get("resultTag", "NRES"))
        self._stall = ring.get("timeoutMs", 30_000) / 1000.0
        if self._window < 1 or 2 * self._window > 256:
            raise SetupError(f"window {self._window}: need 1 <= N and 2N <= 256 (MsgID is 8 bits)")
        self._slots = 2 * self._window
        self._message_bytes = self._msg_len * self._payload
        self._data_bytes = self._message_bytes - INA_LENGTH
        self._element_size = _ELEMENT_SIZES[ring.get("elementType", "fp32")]
        # The work memory has room behind its shm_bytes for the zero padding of a last message.
        self._work = self._dev.mr(self._shm_bytes + self._message_bytes)
        self.memory = (ctypes.c_ubyte * self._shm_bytes).from_address(self._work.buf)
        self._headers = self._dev.mr(self._slots * INA_LENGTH)
        self._results = self._dev.mr(self._slots * self._message_bytes)
        self._scratch = self._dev.mr(64)
        self._send_qp = verbs.RcQp(self._dev, max_send=self._slots + 2, max_recv=2)
        self._recv_qp = verbs.RcQp(self._dev, max_send=2, max_recv=self._slots + 2)
        return {"ok": True, "ip": self.ip, "send": self._send_qp.local(),
                "receive": dict(self._recv_qp.local(), addr=self._results.buf, rkey=self._results.rkey)}

    def connect(self, successor: dict, predecessor: dict) -> None:
        try:
            self._send_qp.connect(successor, self._payload, timeout=self._qp_timeout)
            self._recv_qp.connect(predecessor, self._payload, timeout=self._qp_timeout)
        except Exception as error:  # noqa: BLE001 - pyverbs' own error types
            raise SetupError(f"cannot connect the ring's queue pairs: {error}") from error
        self._succ_addr = successor["addr"]
        self._succ_rkey = successor["rkey"]
        for slot in range(self._slots):
            self._recv_qp.post_recv(slot, self._scratch)
        self._completions = self._verbs.Completions(self._dev, self._stall)

    # -- calls --------------------------------------------------------------------------------------------------

    def allreduce(self, offset: int, elements: int) -> int:
        """Sum ``elements`` values at ``offset`` of :attr:`memory` across the ring, in place; microseconds taken."""
        verbs = self._verbs
        length = elements * self._element_size
        messages = -(-length // self._data_bytes)
        padded = messages * self._data_bytes
        if elements <= 0 or offset < 0 or offset + length > len(self.memory):
            raise TransportError(f"{elements} elements at offset {offset} do not fit the work memory of "
                                 f"{len(self.memory)} bytes")
        # Every rank pads its last message with zeros, so the padding sums to zero.
        ctypes.memset(self._work.buf + offset + length, 0, padded - length)
        start_ns = time.monotonic_ns()
        first = self._next
        end = first + messages
        posted = first
        done = first                       # messages below this are done (result in place, write acknowledged)
        results, acked = set(), set()
        predecessor = (self._rank - 1) % self._world
        try:
            while done < end:
                while posted < end and posted < done + self._window:
                    self._post(posted, offset + (posted - first) * self._data_bytes)
                    posted += 1
                for wr_id, opcode, imm in self._completions.poll():
                    if opcode == verbs.IS_RECV_IMM:
                        results.add(imm)
                        self._recv_qp.post_recv(wr_id, self._scratch)
                    elif opcode == verbs.IS_SEND:
                        acked.add(wr_id)
                while done < end and done in acked and (done & 0xFFFFFFFF) in results:
                    self._take_result(done, offset + (done - first) * self._data_bytes, predecessor,
                                      min(self._data_bytes, length - (done - first) * self._data_bytes))
                    acked.discard(done)
                    results.discard(done & 0xFFFFFFFF)
                    done += 1
        except verbs.VerbsError as error:
            raise TransportError(f"ring {self._ring_id}, message {done}: {error}") from error
        finally:
            self._next = max(self._next, posted)
        self.calls += 1
        return (time.monotonic_ns() - start_ns) // 1000

    def _post(self, k: int, data_offset: int) -> None:
        slot = k % self._slots
        header = ina.pack(self._ring_id, k, self._msg_len, self._rank, self._inet_tag)
        ctypes.memmove(self._headers.buf + slot * INA_LENGTH, header, INA_LENGTH)
        sges = [self._verbs.sge(self._headers, slot * INA_LENGTH, INA_LENGTH),
                self._verbs.sge(self._work, data_offset, self._data_bytes)]
        self._send_qp.write_imm(k, sges, self._succ_addr + slot * self._message_bytes, self._succ_rkey,
                                k & 0xFFFFFFFF)
        self.bytes_posted += self._message_bytes

    def _take_result(self, k: int, data_offset: int, predecessor: int, length: int) -> None:
        slot_addr = self._results.buf + (k % self._slots) * self._message_bytes
        header = ctypes.string_at(slot_addr, INA_LENGTH)
        tag, ring_id, msg_id, _, rank = ina.unpack(header)
        if tag != self._result_tag:
            what = "arrived unaggregated (ring not installed or bypassed)" if tag == self._inet_tag else \
                f"carries tag 0x{tag:08x}"
            raise TransportError(f"ring {self._ring_id}: result of message {k} {what}")
        if ring_id != self._ring_id or msg_id != (k & 0xFF) or rank != predecessor:
            raise TransportError(f"ring {self._ring_id}: result of message {k} has header {header.hex()}")
        ctypes.memmove(self._work.buf + data_offset, slot_addr + INA_LENGTH, length)

    def stats(self) -> dict:
        return {"calls": self.calls, "bytesPosted": self.bytes_posted, "retransmittedPackets": None,
                "timeouts": None}

    def close(self) -> None:
        for qp in (self._send_qp, self._recv_qp):
            if qp is not None:
                qp.close()
        for mr in (self._headers, self._results, self._scratch, self._work):
            if mr is not None:
                try:
                    mr.close()
                except Exception:  # noqa: BLE001 - best effort at the end
                    pass
        self._dev.close()


def _tag(text: str) -> int:
    try:
        return ina.tag_value(text)
    except (ValueError, UnicodeEncodeError) as error:
        raise SetupError(str(error)) from error

"""How a tensor maps onto NetReduce messages and packets, and onto ring all-reduce chunks.

NetReduce (paper 000, §3.1): the tensor is cut into messages of MsgLen packets, every packet carrying exactly
`payload` bytes (the path MTU: the appliance aggregates packet positions, so every rank's packet i of message m
must have the same size). The first packet of a message starts with the 8-byte INA header, so a message carries
MsgLen * payload - 8 tensor bytes. The last message is zero-padded; every rank pads alike, so the padding sums to
zero and is never read back.
"""
from dataclasses import dataclass

from . import ina


@dataclass(frozen=True)
class MessageLayout:
    """Message geometry of one NetReduce all-reduce."""

    tensor_bytes: int
    payload: int
    msg_len: int

    def __post_init__(self):
        if self.payload < ina.LENGTH + 4 or self.payload % 4:
            raise ValueError(f"payload {self.payload} must be a multiple of 4 and more than the INA header")
        if not 1 <= self.msg_len <= 255:
            raise ValueError(f"MsgLen {self.msg_len} out of 1..255")
        if self.tensor_bytes <= 0 or self.tensor_bytes % 4:
            raise ValueError(f"tensor of {self.tensor_bytes} bytes: must be a positive multiple of 4")

    @property
    def message_bytes(self) -> int:
        """Bytes on the wire per message (RDMA payload): MsgLen full packets."""
        return self.msg_len * self.payload

    @property
    def data_bytes(self) -> int:
        """Tensor bytes per message."""
        return self.message_bytes - ina.LENGTH

    @property
    def messages(self) -> int:
        return -(-self.tensor_bytes // self.data_bytes)

    @property
    def padded_tensor_bytes(self) -> int:
        return self.messages * self.data_bytes

    def data_offset(self, msg: int) -> int:
        """Where message msg's tensor bytes start in the (contiguous) tensor."""
        return msg * self.data_bytes

    def message_offset(self, msg: int) -> int:
        """Where message msg lands in the result buffer (header first, then its tensor bytes)."""
        return msg * self.message_bytes


@dataclass(frozen=True)
class RingChunks:
    """Chunking of a ring all-reduce: world chunks of equal size (the tensor zero-padded to world * chunk)."""

    tensor_bytes: int
    world: int
    element: int = 4

    @property
    def chunk_bytes(self) -> int:
        elements = -(-self.tensor_bytes // self.element)
        return -(-elements // self.world) * self.element

    @property
    def padded_tensor_bytes(self) -> int:
        return self.chunk_bytes * self.world

    def reduce_scatter(self, rank: int, step: int) -> tuple:
        """(chunk sent to the successor, chunk received from the predecessor) at reduce-scatter step."""
        return (rank - step) % self.world, (rank - step - 1) % self.world

    def all_gather(self, rank: int, step: int) -> tuple:
        """(chunk sent, chunk received) at all-gather step; rank starts owning chunk rank+1 fully reduced."""
        return (rank + 1 - step) % self.world, (rank - step) % self.world

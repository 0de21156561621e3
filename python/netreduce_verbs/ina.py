"""The NetReduce INA header (paper 000, Fig. 4): 8 bytes at the start of every message.

Same layout as io.netreduce.protocol.wire.InaHeader:
  bytes 0-3 InetTag (big-endian 0x4E524544, "NRED"), byte 4 RingID, byte 5 MsgID (mod 256), byte 6 MsgLen
  (packets in the message), byte 7 Rank (sender's rank).
"""
import struct

INET_TAG = 0x4E524544
# The appliance rewrites the tag of result messages to "NRES"; a received "NRED" means the message passed
# through unaggregated.
RESULT_TAG = 0x4E524553
LENGTH = 8
_FORMAT = "!IBBBB"


def tag_value(text: str) -> int:
    """The 32-bit big-endian value of a 4-character ASCII tag, e.g. "NRED" -> 0x4E524544."""
    raw = text.encode("ascii")
    if len(raw) != 4 or any(c <= 0x20 or c > 0x7E for c in raw):
        raise ValueError(f"an InetTag is 4 printable ASCII characters: {text!r}")
    return int.from_bytes(raw, "big")


def pack(ring_id: int, msg_id: int, msg_len: int, rank: int, tag: int = INET_TAG) -> bytes:
    """The header of message msg_id (taken mod 256, as on the wire), with the ring's InetTag."""
    if not 0 <= ring_id <= 255:
        raise ValueError(f"ring id {ring_id} out of 0..255")
    if not 1 <= msg_len <= 255:
        raise ValueError(f"MsgLen {msg_len} out of 1..255")
    if not 0 <= rank <= 255:
        raise ValueError(f"rank {rank} out of 0..255")
    return struct.pack(_FORMAT, tag, ring_id, msg_id & 0xFF, msg_len, rank)


def unpack(data: bytes) -> tuple:
    """(inet_tag, ring_id, msg_id, msg_len, rank) from the first 8 bytes of data."""
    return struct.unpack_from(_FORMAT, data, 0)

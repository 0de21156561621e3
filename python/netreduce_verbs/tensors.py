"""Test tensors every rank can make, and the sum it expects, without talking to the others.

Elements are little-endian (the appliance's element order; x86 and ARM hosts store them so). Values are small
integers (int32) or multiples of 1/64 below 16 (fp32), so sums over up to 255 ranks are exact in fp32 as well:
the check is bit-exact for any summation order, and the same check serves NetReduce (rank-order sums in the
appliance) and the ring baseline (ring-order sums on the hosts).
"""
import sys
from array import array

DTYPES = {"int32": "i", "fp32": "f"}


def _code(dtype: str) -> str:
    try:
        return DTYPES[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype}; one of {', '.join(DTYPES)}") from None


def make(dtype: str, elements: int, rank: int, seed: int) -> array:
    """Rank's tensor: a cheap hash of (index, rank, seed) mapped to exact small values."""
    code = _code(dtype)
    mult = 2654435761
    base = (rank * 40503 + seed * 97) & 0xFFFFFFFF
    raw = [((i * mult + base) >> 7) & 0x7FF for i in range(elements)]
    if code == "i":
        return array("i", [v - 1024 for v in raw])
    return array("f", [(v - 1024) / 64.0 for v in raw])


def expected_sum(dtype: str, elements: int, world: int, seed: int) -> array:
    code = _code(dtype)
    total = None
    for rank in range(world):
        t = make(dtype, elements, rank, seed)
        total = t if total is None else array(code, [a + b for a, b in zip(total, t)])
    return total


def add(dtype: str, a: bytes, b: bytes) -> bytes:
    """Elementwise a + b of little-endian element bytes (int32 wraps like the appliance's adds)."""
    x = from_bytes(dtype, a)
    y = from_bytes(dtype, b)
    if x.typecode == "i":
        s = array("i", [((p + q + 2**31) % 2**32) - 2**31 for p, q in zip(x, y)])
    else:
        s = array("f", [p + q for p, q in zip(x, y)])
    return to_bytes(s)


def to_bytes(t: array) -> bytes:
    """Little-endian bytes of t."""
    if sys.byteorder != "little":
        t = array(t.typecode, t)
        t.byteswap()
    return t.tobytes()


def from_bytes(dtype: str, data: bytes) -> array:
    t = array(_code(dtype))
    t.frombytes(data)
    if sys.byteorder != "little":
        t.byteswap()
    return t


def first_mismatch(got: array, want: array):
    """Index of the first differing element, or None when equal."""
    if len(got) != len(want):
        return min(len(got), len(want))
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            return i
    return None

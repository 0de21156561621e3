"""DDP communication hooks that all-reduce gradient buckets through the appliance.

Register one with ``model.register_comm_hook(session, hook)``, the :class:`~netreduce.Session` as the state. Each
hook returns at once with a future; the session's thread sums the bucket through the ring while the backward pass
goes on, and the future holds the averaged gradients, as DDP expects of a hook.

* :func:`allreduce_hook`: fp32 buckets on an fp32 ring (what DDP does by default, through the appliance).
* :func:`fp16_compress_hook`, :func:`bf16_compress_hook`: as PyTorch's own compression hooks: the bucket is divided
  by the world size, cast to fp16 (bf16), summed on a ring of that type (half the bytes on the wire), and cast back
  into the fp32 bucket.
"""
from .errors import SetupError


def _require(session, element_type: str, hook: str) -> None:
    if session.element_type != element_type:
        raise SetupError(f"{hook} needs a session on an {element_type} ring; this session's ring {session.ring_id} "
                         f"is {session.element_type}")


def _is_last(bucket) -> bool:
    """Whether the bucket is the step's last (so that a session on its fallback may try the appliance again after
    it); a bucket object without ``is_last`` counts as one."""
    is_last = getattr(bucket, "is_last", None)
    return bool(is_last()) if callable(is_last) else True


def allreduce_hook(session, bucket):
    """Average the bucket's gradients across the ranks through the appliance (fp32 ring)."""
    _require(session, "fp32", "allreduce_hook")
    last = _is_last(bucket)
    # The step's last bucket is made on this (the autograd) thread when the session is idle: DDP waits for it at
    # once, and the hand-over to the session's thread and back costs milliseconds on a busy host.
    return session.submit(bucket.buffer(), average=True, boundary=last, inline=last)


def _compress_hook(session, bucket, dtype, element_type: str, hook: str):
    _require(session, element_type, hook)
    buffer = bucket.buffer()
    # Divide first, as PyTorch's compression hooks do, so the low-precision sum cannot overflow.
    compressed = buffer.div(session.world_size).to(dtype)
    last = _is_last(bucket)
    future = session.submit(compressed, boundary=last, inline=last)

    def decompress(done):
        buffer.copy_(done.value())
        return buffer

    return future.then(decompress)


def fp16_compress_hook(session, bucket):
    """Average the bucket through an fp16 ring: divided by the world size, cast to fp16, summed, cast back."""
    import torch  # noqa: PLC0415

    return _compress_hook(session, bucket, torch.float16, "fp16", "fp16_compress_hook")


def bf16_compress_hook(session, bucket):
    """Average the bucket through a bf16 ring: divided by the world size, cast to bf16, summed, cast back."""
    import torch  # noqa: PLC0415

    return _compress_hook(session, bucket, torch.bfloat16, "bf16", "bf16_compress_hook")

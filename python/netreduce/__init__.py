"""netreduce: all-reduce through an in-network aggregation appliance, from PyTorch.

    import torch.distributed as dist
    import netreduce

    dist.init_process_group("gloo")                       # rendezvous as usual (env://)
    session = netreduce.Session(device="eth0", appliance="unix:/run/netreduce/api.sock")
    ddp_model.register_comm_hook(session, netreduce.allreduce_hook)
    ...
    netreduce.allreduce_(tensor, session)                 # outside DDP
    reducer = netreduce.sparse.HotColdReducer(session, netreduce.sparse.embedding_tables(model))
    reducer.reduce_()                                     # sparse embedding gradients, after backward()
    session.close()

See docs/python.md in the repository.
"""
from .errors import (ApplianceUnreachable, NetReduceError, RingMismatch, SetupError,  # noqa: F401
                     TransportError)
from .hooks import allreduce_hook, bf16_compress_hook, fp16_compress_hook  # noqa: F401
from .session import Session  # noqa: F401
from . import sparse  # noqa: F401,E402  (hot/cold sums of sparse embedding gradients, Libra)

__version__ = "0.1.0"


def allreduce_(tensor, session, average: bool = False):
    """Sum ``tensor`` across the session's ranks in place (or average it) through the appliance; returns it."""
    return session.allreduce_(tensor, average=average)

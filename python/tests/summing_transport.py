"""A transport double that sums for real, for tests of what the Session does around a transport (pieces, copies,
CUDA staging, fallback) where no appliance is at hand (a GPU machine without a JDK or a bed).

Each call gathers every rank's shared memory through a gloo group of its own and adds the ranks' values in rank
order, so a test can compare bit for bit with a rank-order reference computed from the inputs. With
``layout=True`` it presents its memory as the sidecar does (input and output areas of messages, an 8-byte header
before each message's data, the result tag written into the headers of the messages it summed); otherwise as one
flat buffer that is summed in place (as the verbs and switchml transports do).
"""
import threading

import torch
import torch.distributed as dist

from netreduce.errors import TransportError

INA_LENGTH = 8
_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "int32": torch.int32}


class SummingTransport:
    needs_ring = True
    name = "summing double"

    def __init__(self, memory_bytes: int = 1 << 20, *, layout: bool = True, message_bytes: int = 4096,
                 fail_at_call: int = 0):
        """``fail_at_call``: the call (1-based) at which this rank's transport fails for good (0: never)."""
        self.group = dist.new_group(backend="gloo")
        self.fail_at_call = fail_at_call
        self.calls = 0
        self.summed_elements = []
        self.threads = []  # the thread of each call
        if layout:
            messages = memory_bytes // (2 * message_bytes)
            self.layout = {"messages": messages, "messageBytes": message_bytes, "input": 0,
                           "output": messages * message_bytes}
            self.memory = bytearray(2 * messages * message_bytes)
        else:
            self.layout = None
            self.memory = bytearray(memory_bytes)

    def open(self, *, rank, world, ring):
        self.dtype = _DTYPES[ring["elementType"]]
        self.result_tag = ring["resultTag"].encode("ascii")
        return {"ip": f"10.0.0.{rank + 1}", "receive": {}, "send": {}}

    def connect(self, successor, predecessor):
        pass

    def allreduce(self, *args):
        self.calls += 1
        self.threads.append(threading.get_ident())
        # A failing rank's ring stalls for everyone: the others' calls time out. The ranks agree on that first, so
        # that nobody is left in a gather that one rank never joins.
        failing = torch.tensor([1 if self.fail_at_call and self.calls >= self.fail_at_call else 0])
        dist.all_reduce(failing, op=dist.ReduceOp.MAX, group=self.group)
        if failing.item():
            raise TransportError("the double was told to fail" if self.fail_at_call and
                                 self.calls >= self.fail_at_call else "timed out: a rank's transport failed")
        memory = torch.frombuffer(self.memory, dtype=torch.uint8)
        if self.layout is None:
            offset, elements = args
            size = torch.tensor([], dtype=self.dtype).element_size()
            data = memory[offset * size:(offset + elements) * size]
            self._sum_in_rank_order(data)
            return
        (elements,) = args
        layout = self.layout
        messages, message_bytes = layout["messages"], layout["messageBytes"]
        areas = memory[:2 * messages * message_bytes].view(2, messages, message_bytes)
        data = areas[0, :, INA_LENGTH:].contiguous().view(-1)
        self._sum_in_rank_order(data)
        areas[1, :, INA_LENGTH:].copy_(data.view(messages, message_bytes - INA_LENGTH))
        used = -(-elements * torch.tensor([], dtype=self.dtype).element_size() // (message_bytes - INA_LENGTH))
        areas[1, :used, :4].copy_(torch.tensor(list(self.result_tag), dtype=torch.uint8))
        areas[1, used:, :4].zero_()
        self.summed_elements.append(elements)

    def _sum_in_rank_order(self, data) -> None:
        gathered = [torch.empty_like(data) for _ in range(dist.get_world_size(self.group))]
        dist.all_gather(gathered, data.clone(), group=self.group)
        total = gathered[0].view(self.dtype).clone()
        for other in gathered[1:]:
            total += other.view(self.dtype)
        data.copy_(total.view(torch.uint8))

    def stats(self):
        return {"calls": self.calls}

    def close(self):
        pass

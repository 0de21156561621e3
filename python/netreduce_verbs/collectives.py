"""The two all-reduces over RC queue pairs: NetReduce (the appliance sums) and the plain ring (the hosts sum).

Each run makes its own pair of queue pairs per rank (one to the successor, one from the predecessor): the
appliance binds a queue pair to a ring when it sees its first tagged message, and a ring connection may then
carry nothing but that ring's messages.
"""
import time
from dataclasses import dataclass

from . import ina, tensors
from .layout import MessageLayout, RingChunks
from .ring import TcpRing
from .verbs import IS_RECV_IMM, IS_SEND, Completions, Device, RcQp, VerbsError, sge


@dataclass
class RunResult:
    algo: str
    seconds: float
    result: bytes
    messages: int
    header_errors: list


def _connect_pair(dev: Device, tcp: TcpRing, tag: str, send_qp: RcQp, recv_qp: RcQp, buffers: dict,
                  timeout: int) -> dict:
    """Exchange parameters with both neighbours and bring both QPs to RTS; returns the successor's buffers."""
    tcp.send_succ({"tag": tag, "send": send_qp.local()})
    pred = tcp.recv_pred()
    tcp.send_pred({"tag": tag, "recv": recv_qp.local(), "buffers": buffers})
    succ = tcp.recv_succ()
    if pred.get("tag") != tag or succ.get("tag") != tag:
        raise VerbsError(f"connection exchange out of step: {pred.get('tag')}/{succ.get('tag')} for {tag}")
    send_qp.connect(succ["recv"], dev.path_mtu, timeout=timeout)
    recv_qp.connect(pred["send"], dev.path_mtu, timeout=timeout)
    return succ["buffers"]


def netreduce_allreduce(dev: Device, tcp: TcpRing, data: bytes, payload: int, msg_len: int, window: int,
                        ring_id: int, stall: float, timeout: int = 16, inet_tag: int = ina.INET_TAG,
                        result_tag: int = ina.RESULT_TAG) -> RunResult:
    """NetReduce all-reduce of data (paper 000, §3.1-3.2).

    Message m (INA header + its slice of the tensor) goes to the successor as one RDMA WRITE WITH IMMEDIATE
    (imm = m) into the successor's result buffer at m * message_bytes. At most `window` messages are
    outstanding: a result message m arriving from the predecessor (the receive completion of its write with
    immediate) lets message m + window go. The appliance sums each packet position across ranks and rewrites
    every rank's packet with the sum, so what the predecessor's connection delivers is the full sum, written by
    the NIC straight to its place in the result buffer.
    """
    rank, world = tcp.rank, tcp.world
    layout = MessageLayout(len(data), payload, msg_len)
    msgs = layout.messages
    if window < 1 or 2 * window > 256:
        raise ValueError(f"window {window}: need 1 <= N and 2N <= 256 (MsgID is 8 bits)")
    tensor_mr = dev.mr(layout.padded_tensor_bytes)
    tensor_mr.write(data, len(data), 0)
    headers = b"".join(ina.pack(ring_id, m, msg_len, rank, inet_tag) for m in range(msgs))
    header_mr = dev.mr(len(headers))
    header_mr.write(headers, len(headers), 0)
    result_mr = dev.mr(msgs * layout.message_bytes)
    scratch = dev.mr(64)
    depth = 2 * window + 2
    # A result can overtake the ack of the rank's own write (and without an appliance the predecessor's
    # messages do not wait for ours at all), so the send queue bounds the writes awaiting their ack, too.
    sq_depth = 2 * window + 2
    send_qp = RcQp(dev, max_send=sq_depth, max_recv=2)
    recv_qp = RcQp(dev, max_send=2, max_recv=depth)
    try:
        succ = _connect_pair(dev, tcp, "netreduce", send_qp, recv_qp,
                             {"addr": result_mr.buf, "rkey": result_mr.rkey}, timeout)
        for i in range(depth):
            recv_qp.post_recv(i, scratch)
        comps = Completions(dev, stall)
        tcp.barrier("netreduce-start")
        t0 = time.monotonic()
        sent = results = acked = 0
        while results < msgs or acked < msgs:
            while sent < msgs and sent < results + window and sent - acked < sq_depth:
                sges = [sge(header_mr, ina.LENGTH * sent, ina.LENGTH),
                        sge(tensor_mr, layout.data_offset(sent), layout.data_bytes)]
                send_qp.write_imm(sent, sges, succ["addr"] + layout.message_offset(sent), succ["rkey"], sent)
                sent += 1
            for wr_id, opcode, imm in comps.poll():
                if opcode == IS_RECV_IMM:
                    if imm != results:
                        raise VerbsError(f"rank {rank}: result message {imm} arrived, expected {results}")
                    results += 1
                    recv_qp.post_recv(wr_id, scratch)
                elif opcode == IS_SEND:
                    acked += 1
        seconds = time.monotonic() - t0
        pred_rank = (rank - 1) % world
        out = bytearray()
        header_errors = []
        for m in range(msgs):
            raw = result_mr.read(layout.message_bytes, layout.message_offset(m))
            got = ina.unpack(raw)
            want = (result_tag, ring_id, m & 0xFF, msg_len, pred_rank)
            if got != want and len(header_errors) < 5:
                header_errors.append((m, got, want))
            out += raw[ina.LENGTH:]
        tcp.barrier("netreduce-done")
        return RunResult("netreduce", seconds, bytes(out[:len(data)]), msgs, header_errors)
    finally:
        for o in (send_qp, recv_qp):
            o.close()
        for mr in (tensor_mr, header_mr, result_mr, scratch):
            mr.close()


def ring_allreduce(dev: Device, tcp: TcpRing, data: bytes, dtype: str, stall: float,
                   timeout: int = 16) -> RunResult:
    """Plain ring all-reduce (reduce-scatter, then all-gather), world-1 steps each, over RC writes with imm.

    Reduce-scatter step s: write chunk (rank - s) to the successor's staging buffer; the predecessor's chunk
    (rank - s - 1) arrives in ours, and is added into the tensor. All-gather step s: write the reduced chunk
    (rank + 1 - s) straight into the successor's tensor; chunk (rank - s) arrives in ours.
    """
    rank, world = tcp.rank, tcp.world
    chunks = RingChunks(len(data), world)
    cb = chunks.chunk_bytes
    data_mr = dev.mr(chunks.padded_tensor_bytes)
    data_mr.write(data, len(data), 0)
    stage_mr = dev.mr(chunks.padded_tensor_bytes)
    scratch = dev.mr(64)
    steps = 2 * (world - 1)
    send_qp = RcQp(dev, max_send=4, max_recv=2)
    recv_qp = RcQp(dev, max_send=2, max_recv=steps + 1)
    try:
        succ = _connect_pair(dev, tcp, "ring", send_qp, recv_qp,
                             {"data": data_mr.buf, "data_rkey": data_mr.rkey,
                              "stage": stage_mr.buf, "stage_rkey": stage_mr.rkey}, timeout)
        for i in range(steps):
            recv_qp.post_recv(i, scratch)
        comps = Completions(dev, stall)
        received = set()
        tcp.barrier("ring-start")
        t0 = time.monotonic()

        def step(step_id: int, chunk: int, raddr: int, rkey: int) -> None:
            send_qp.write_imm(step_id, [sge(data_mr, chunk * cb, cb)], raddr + chunk * cb, rkey, step_id)
            sent_done = False
            while not sent_done or step_id not in received:
                for wr_id, opcode, imm in comps.poll():
                    if opcode == IS_RECV_IMM:
                        received.add(imm)
                    elif opcode == IS_SEND and wr_id == step_id:
                        sent_done = True

        for s in range(world - 1):
            c_send, c_recv = chunks.reduce_scatter(rank, s)
            step(s, c_send, succ["stage"], succ["stage_rkey"])
            summed = tensors.add(dtype, data_mr.read(cb, c_recv * cb), stage_mr.read(cb, c_recv * cb))
            data_mr.write(summed, cb, c_recv * cb)
        for s in range(world - 1):
            c_send, _ = chunks.all_gather(rank, s)
            step(world - 1 + s, c_send, succ["data"], succ["data_rkey"])
        seconds = time.monotonic() - t0
        result = data_mr.read(len(data), 0)
        tcp.barrier("ring-done")
        return RunResult("ring", seconds, result, steps, [])
    finally:
        for o in (send_qp, recv_qp):
            o.close()
        for mr in (data_mr, stage_mr, scratch):
            mr.close()

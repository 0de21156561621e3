"""Thin helpers over pyverbs: device and GID selection, RC queue pairs, memory regions, completion polling."""
import ipaddress
import random
import time

import pyverbs.enums as e
from pyverbs.addr import AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import RecvWR, SendWR, SGE

PORT = 1
MTU_BYTES = {1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096}
MTU_ENUM = {v: k for k, v in MTU_BYTES.items()}
ACCESS = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ


class VerbsError(RuntimeError):
    pass


def find_gid_index(ctx: Context, ip: str) -> int:
    """Index of the RoCEv2 GID that carries ip (IPv4-mapped for IPv4): the address RoCE packets leave from."""
    want = ipaddress.ip_address(ip)
    if want.version == 4:
        want = ipaddress.IPv6Address("::ffff:" + ip)
    table = ctx.query_port(PORT).gid_tbl_len
    for index in range(table):
        try:
            gid = ctx.query_gid(PORT, index)
        except Exception:
            continue
        try:
            if ipaddress.IPv6Address(gid.gid) != want:
                continue
        except ValueError:
            continue
        if _gid_type(ctx, index) not in ("RoCE v2", None):
            continue
        return index
    raise VerbsError(f"no RoCEv2 GID for {ip} on {ctx.name} port {PORT}: is the address on the RDMA netdev?")


def _gid_type(ctx: Context, index: int):
    """"RoCE v2", "IB/RoCE v1" (the kernel's words, from sysfs), or None when the kernel does not say."""
    try:
        with open(f"/sys/class/infiniband/{ctx.name}/ports/{PORT}/gid_attrs/types/{index}") as f:
            return f.read().strip()
    except OSError:
        return None


class Device:
    """An opened device: context, protection domain, one CQ for everything, the port's path MTU."""

    def __init__(self, name: str, ip: str, gid_index=None, cq_depth: int = 4096):
        self.ctx = Context(name=name)
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, cq_depth)
        port = self.ctx.query_port(PORT)
        self.path_mtu = MTU_BYTES[int(port.active_mtu)]
        self.gid_index = find_gid_index(self.ctx, ip) if gid_index is None else gid_index
        self.gid = self.ctx.query_gid(PORT, self.gid_index).gid

    def mr(self, length: int) -> MR:
        return MR(self.pd, max(length, 64), ACCESS)

    def close(self):
        for o in (self.cq, self.pd, self.ctx):
            try:
                o.close()
            except Exception:
                pass


class RcQp:
    """One RC queue pair on dev.cq, with its local connection parameters."""

    def __init__(self, dev: Device, max_send: int, max_recv: int, max_sge: int = 2):
        self.dev = dev
        cap = QPCap(max_send_wr=max_send, max_recv_wr=max_recv, max_send_sge=max_sge, max_recv_sge=1)
        init = QPInitAttr(qp_type=e.IBV_QPT_RC, scq=dev.cq, rcq=dev.cq, cap=cap, sq_sig_all=1)
        self.qp = QP(dev.pd, init)
        self.psn = random.randrange(1 << 24)

    def local(self) -> dict:
        return {"qpn": self.qp.qp_num, "psn": self.psn, "gid": self.dev.gid}

    def connect(self, remote: dict, path_mtu: int, timeout: int = 16, retry: int = 7) -> None:
        """RESET -> INIT -> RTR -> RTS towards remote ({qpn, psn, gid}).

        timeout is the IB exponent (4.096 us * 2^timeout; 16 = 268 ms): a NetReduce sender's packets are acked
        only when every rank's packet has reached the appliance, so the timer must outlast rank skew.
        """
        attr = QPAttr(qp_state=e.IBV_QPS_INIT, cur_qp_state=e.IBV_QPS_RESET)
        attr.qp_access_flags = ACCESS
        attr.path_mtu = MTU_ENUM[path_mtu]
        attr.dest_qp_num = remote["qpn"]
        attr.rq_psn = remote["psn"]
        attr.sq_psn = self.psn
        attr.max_dest_rd_atomic = 1
        attr.max_rd_atomic = 1
        attr.min_rnr_timer = 12
        attr.timeout = timeout
        attr.retry_cnt = retry
        attr.rnr_retry = 7
        gr = GlobalRoute(dgid=GID(remote["gid"]), sgid_index=self.dev.gid_index, hop_limit=64)
        attr.ah_attr = AHAttr(gr=gr, is_global=1, port_num=PORT)
        self.qp.to_rts(attr)

    def post_recv(self, wr_id: int, scratch: MR) -> None:
        self.qp.post_recv(RecvWR(wr_id=wr_id, num_sge=1, sg=[SGE(scratch.buf, 4, scratch.lkey)]))

    def write_imm(self, wr_id: int, sges: list, raddr: int, rkey: int, imm: int) -> None:
        wr = SendWR(wr_id=wr_id, opcode=e.IBV_WR_RDMA_WRITE_WITH_IMM, num_sge=len(sges), sg=sges,
                    imm_data=imm, send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(rkey, raddr)
        self.qp.post_send(wr)

    def close(self):
        try:
            self.qp.close()
        except Exception:
            pass


class Completions:
    """Polls dev.cq: yields (wr_id, opcode, imm) of good completions, raises on error or after a stall.

    Spins briefly, then sleeps in 0.5 ms steps: with one vCPU (soft-RoCE in a VM) a busy loop would take the
    CPU from the kernel's rxe tasks that produce the completions.
    """

    def __init__(self, dev: Device, stall_seconds: float):
        self.cq = dev.cq
        self.stall = stall_seconds

    def poll(self, max_entries: int = 16) -> list:
        deadline = time.monotonic() + self.stall
        spins = 0
        while True:
            n, wcs = self.cq.poll(max_entries)
            if n > 0:
                out = []
                for wc in wcs[:n]:
                    if wc.status != e.IBV_WC_SUCCESS:
                        raise VerbsError(f"completion error: wr_id {wc.wr_id} opcode {wc.opcode} status "
                                         f"{wc.status} ({_status_name(wc.status)}) vendor_err {wc.vendor_err}")
                    out.append((wc.wr_id, wc.opcode, wc.imm_data))
                return out
            spins += 1
            if spins > 200:
                if time.monotonic() > deadline:
                    raise VerbsError(f"no completion for {self.stall:.0f} s")
                time.sleep(0.0005)


def _status_name(status: int) -> str:
    for name in dir(e):
        if name.startswith("IBV_WC_") and name.endswith("_ERR") and getattr(e, name) == status:
            return name
    return "?"


def sge(mr: MR, offset: int, length: int) -> SGE:
    return SGE(mr.buf + offset, length, mr.lkey)


IS_RECV_IMM = e.IBV_WC_RECV_RDMA_WITH_IMM
IS_SEND = e.IBV_WC_RDMA_WRITE

#!/usr/bin/python3
"""A deliberately small reference NetReduce aggregator in Python, for checking the interop plumbing and the verbs
client against Linux soft-RoCE before (or beside) the netreduce daemon. NOT the product: no CTT, no spoofing
checks, IPv4 only, one ring, no performance. It follows paper 000 §3.1-3.2 just enough:

- a tagged first packet (RDMA WRITE FIRST/ONLY with the INA header "NRED" and our ring id) fills the CLT entry
  (src, dst, dst QP) -> (rank, MsgID, PSN0); later packets look it up: a packet of a later message (its first
  packet was lost) drops, one of an earlier message (go-back-N from mid-message) is addressed from the PSN distance;
- packets are buffered per (MsgID, position) and rank; when every rank's packet is there, the payloads are summed
  in rank order (int32 or fp32, little-endian; the INA header of the first packet is kept, not summed), and each
  rank's own packet goes out with the sum and a recomputed ICRC;
- a packet for a completed aggregator gets the stored result again on its own connection (retransmission);
  a packet frees the aggregator one window away, (MsgID - N, position);
- everything else passes through unchanged; --drop P drops that fraction of ring data packets on arrival.

usage: refagg.py IFACE --world W [--ring-id 1] [--window N] [--msg-len L] [--dtype int32|fp32] [--drop P]
"""
import argparse
import random
import signal
import socket
import struct
import sys
import zlib
from array import array

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
INET_TAG = b"NRED"
# RC RDMA WRITE opcodes: FIRST, MIDDLE, LAST, LAST_WITH_IMMEDIATE, ONLY, ONLY_WITH_IMMEDIATE
FIRST, MIDDLE, LAST, LAST_IMM, ONLY, ONLY_IMM = 6, 7, 8, 9, 10, 11
EXT_LEN = {FIRST: 16, MIDDLE: 0, LAST: 0, LAST_IMM: 4, ONLY: 16, ONLY_IMM: 20}


def icrc(frame: bytes, l3: int, end: int) -> bytes:
    """RoCEv2 (IPv4) invariant CRC over frame[l3:end] with the variant fields masked to ones."""
    ihl = (frame[l3] & 0x0F) * 4
    ip = bytearray(frame[l3:l3 + ihl])
    ip[1] = 0xFF          # DSCP/ECN
    ip[8] = 0xFF          # TTL
    ip[10:12] = b"\xff\xff"  # header checksum
    udp = bytearray(frame[l3 + ihl:l3 + ihl + 8])
    udp[6:8] = b"\xff\xff"
    bth = bytearray(frame[l3 + ihl + 8:l3 + ihl + 20])
    bth[4] = 0xFF         # FECN, BECN, reserved
    crc = zlib.crc32(b"\xff" * 8)
    for part in (ip, udp, bth, frame[l3 + ihl + 20:end]):
        crc = zlib.crc32(part, crc)
    return struct.pack("<I", crc)


class RefAggregator:
    def __init__(self, args):
        self.world = args.world
        self.ring_id = args.ring_id
        self.window = args.window
        self.msg_len = args.msg_len
        self.code = "i" if args.dtype == "int32" else "f"
        self.drop = args.drop
        self.rng = random.Random(args.seed)
        self.clt = {}       # (src, dst, qpn) -> [rank, msg_id, psn0]
        self.pending = {}   # (msg_id, pos) -> {rank: frame}
        self.results = {}   # (msg_id, pos) -> (sum bytes, {rank: frame})
        self.c = dict.fromkeys(("in", "forwarded", "ring", "results_sent", "resent", "dropped_injected",
                                "dropped_first_lost", "dropped_stale", "bad_icrc"), 0)

    def on_frame(self, frame: bytes, send) -> None:
        self.c["in"] += 1
        if len(frame) < 14 + 20 + 8 + 12 + 4 or frame[12:14] != b"\x08\x00":
            return self.forward(frame, send)
        l3 = 14
        ihl = (frame[l3] & 0x0F) * 4
        l4 = l3 + ihl
        if frame[l3 + 9] != 17 or struct.unpack_from("!H", frame, l4 + 2)[0] != 4791:
            return self.forward(frame, send)
        ip_total = struct.unpack_from("!H", frame, l3 + 2)[0]
        end = l3 + ip_total  # the Ethernet frame may carry padding after the IP packet
        bth = l4 + 8
        opcode = frame[bth]
        if opcode not in EXT_LEN:
            return self.forward(frame, send)
        pad = (frame[bth + 1] >> 4) & 3
        qpn = struct.unpack_from("!I", frame, bth + 4)[0] & 0xFFFFFF
        psn = struct.unpack_from("!I", frame, bth + 8)[0] & 0xFFFFFF
        payload = bth + 12 + EXT_LEN[opcode]
        payload_end = end - 4 - pad
        key = (frame[l3 + 12:l3 + 16], frame[l3 + 16:l3 + 20], qpn)
        if opcode in (FIRST, ONLY, ONLY_IMM):
            ina = frame[payload:payload + 8]
            if ina[:4] != INET_TAG or ina[4] != self.ring_id:
                return self.forward(frame, send)
            if icrc(frame, l3, end - 4) != frame[end - 4:end]:
                self.c["bad_icrc"] += 1
                return
            self.clt[key] = [ina[7], ina[5], psn]
            pos = age = 0
        else:
            entry = self.clt.get(key)
            if entry is None:
                return self.forward(frame, send)
            # Go-back-N may resume in the middle of a message older than the one the CLT entry describes: every
            # message has MsgLen packets, so the signed PSN distance says which message and position it is.
            delta = ((psn - entry[2] + (1 << 23)) & 0xFFFFFF) - (1 << 23)
            age = delta // self.msg_len
            pos = delta - age * self.msg_len
            if age >= 1:
                self.c["dropped_first_lost"] += 1
                return
            if age <= -2 * self.window:
                self.c["dropped_stale"] += 1
                return
        self.c["ring"] += 1
        if self.drop > 0 and self.rng.random() < self.drop:
            self.c["dropped_injected"] += 1
            return
        rank, msg_id, _ = self.clt[key]
        msg_id = (msg_id + age) & 0xFF
        slot = (msg_id, pos)
        # This packet frees the aggregator one window away (paper §3.1: (MsgID + N) % 2N, which in a 2N-slot
        # array is the slot of message MsgID - N; this table is keyed by the 8-bit MsgID, so it says so directly).
        ahead = ((msg_id - self.window) & 0xFF, pos)
        self.results.pop(ahead, None)
        self.pending.pop(ahead, None)
        done = self.results.get(slot)
        if done is not None:
            self.c["resent"] += 1
            send(self.rebuild(frame, l3, end, payload, payload_end, pos, done[0]))
            return
        waiting = self.pending.setdefault(slot, {})
        waiting[rank] = (frame, l3, end, payload, payload_end)
        if len(waiting) < self.world:
            return
        total = None
        skip = 8 if pos == 0 else 0
        for r in sorted(waiting):  # rank order: the same bits whatever the arrival order
            f, _, _, p, pe = waiting[r]
            values = array(self.code)
            values.frombytes(f[p + skip:pe])
            total = values if total is None else array(self.code, [a + b for a, b in zip(total, values)]) \
                if self.code == "f" else array("i", [((a + b + 2**31) % 2**32) - 2**31 for a, b in zip(total, values)])
        summed = total.tobytes()
        del self.pending[slot]
        self.results[slot] = (summed, None)
        for r in sorted(waiting):
            f, fl3, fend, p, pe = waiting[r]
            send(self.rebuild(f, fl3, fend, p, pe, pos, summed))
            self.c["results_sent"] += 1

    @staticmethod
    def rebuild(frame, l3, end, payload, payload_end, pos, summed):
        skip = 8 if pos == 0 else 0
        out = bytearray(frame)
        out[payload + skip:payload_end] = summed
        out[end - 4:end] = icrc(out, l3, end - 4)
        return bytes(out)

    def forward(self, frame, send):
        self.c["forwarded"] += 1
        send(frame)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("iface")
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--ring-id", type=int, default=1)
    ap.add_argument("--window", type=int, default=4)
    ap.add_argument("--msg-len", type=int, default=4)
    ap.add_argument("--dtype", choices=("int32", "fp32"), default="int32")
    ap.add_argument("--drop", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    agg = RefAggregator(args)
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind((args.iface, 0))
    sock.settimeout(0.5)
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    signal.signal(signal.SIGINT, lambda *_: stop.__setitem__(0, True))
    print(f"refagg: {args.iface} world={args.world} ring={args.ring_id} N={args.window} "
          f"MsgLen={args.msg_len} {args.dtype} drop={args.drop}", flush=True)
    while not stop[0]:
        try:
            frame, addr = sock.recvfrom(65535)
        except (socket.timeout, InterruptedError):
            continue
        if addr[2] == PACKET_OUTGOING:
            continue
        agg.on_frame(frame, sock.send)
    print("refagg: " + " ".join(f"{k}={v}" for k, v in agg.c.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

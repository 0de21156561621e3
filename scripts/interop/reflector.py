#!/usr/bin/python3
"""A stand-in appliance for plumbing checks: re-emits every frame that arrives on an interface back out of it,
unchanged, optionally dropping a fraction of the RoCEv2 frames (UDP 4791) to make the RC endpoints retransmit.

It proves the switch's redirect and the path back through the bridge (learning off on the appliance port,
static FDB for the endpoints) without the netreduce daemon. It does not aggregate anything.

usage: reflector.py IFACE [--drop P] [--seconds S] [--seed N]
Prints counters (frames in, out, dropped) on exit (SIGTERM/SIGINT or after S seconds).
"""
import argparse
import random
import signal
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
ROCE_PORT = 4791


def is_roce(frame: bytes) -> bool:
    """IPv4/IPv6 UDP to port 4791, with at most one VLAN tag."""
    off = 12
    ethertype = struct.unpack_from("!H", frame, off)[0]
    off += 2
    if ethertype == 0x8100 and len(frame) >= off + 4:
        ethertype = struct.unpack_from("!H", frame, off + 2)[0]
        off += 4
    if ethertype == 0x0800 and len(frame) >= off + 20:
        ihl = (frame[off] & 0x0F) * 4
        return frame[off + 9] == 17 and len(frame) >= off + ihl + 4 and \
            struct.unpack_from("!H", frame, off + ihl + 2)[0] == ROCE_PORT
    if ethertype == 0x86DD and len(frame) >= off + 44:
        return frame[off + 6] == 17 and struct.unpack_from("!H", frame, off + 42)[0] == ROCE_PORT
    return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("iface")
    ap.add_argument("--drop", type=float, default=0.0, help="probability of dropping a RoCEv2 frame")
    ap.add_argument("--seconds", type=float, default=0.0, help="stop after this long (0: until signalled)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    rng = random.Random(args.seed)
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind((args.iface, 0))
    sock.settimeout(0.5)
    counts = {"in": 0, "out": 0, "dropped": 0, "roce": 0}
    stop = [False]

    def on_signal(_signum, _frame):
        stop[0] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    deadline = time.monotonic() + args.seconds if args.seconds > 0 else None
    print(f"reflector: {args.iface} drop={args.drop}", flush=True)
    while not stop[0] and (deadline is None or time.monotonic() < deadline):
        try:
            frame, addr = sock.recvfrom(65535)
        except socket.timeout:
            continue
        except InterruptedError:
            continue
        if addr[2] == PACKET_OUTGOING:
            continue  # our own re-emission, seen again by the tap
        counts["in"] += 1
        if is_roce(frame):
            counts["roce"] += 1
            if args.drop > 0 and rng.random() < args.drop:
                counts["dropped"] += 1
                continue
        sock.send(frame)
        counts["out"] += 1
    print("reflector: " + " ".join(f"{k}={v}" for k, v in counts.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

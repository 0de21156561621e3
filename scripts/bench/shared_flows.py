"""The other traffic beside a training job (scripts/bench-shared.sh): one long TCP flow and a ping-like probe, each run
in a worker namespace of the test bed, and the summary of a mode's flows. The short request/response flows and their
server are scripts/lib/short_flows.c (one epoll loop: a thread per flow here put its own delay on every flow).

    shared_flows.py sink --port P --out FILE             receives one long flow; writes (CLOCK_MONOTONIC s, bytes)
                                                         every 100 ms
    shared_flows.py long --server IP:P --seconds S [--until FILE]
                                                         sends as fast as TCP lets it for S seconds (or until FILE)
    shared_flows.py probe --to IP --out FILE [--interval-ms 10] [--seconds S] [--until FILE]
                                                         ICMP echo (raw socket; the far end's kernel answers) every
                                                         interval; the reply's time from the kernel's receive stamp
                                                         (SO_TIMESTAMPNS), so the network's share of a delay shows
                                                         apart from this process's scheduling; rows of (CLOCK_MONOTONIC
                                                         s at send, RTT ms)
    shared_flows.py summary --short FILE [--sink FILE] [--probe FILE] --from T0 --to T1 [--link-bps B]
                                                         one JSON line over the flows that started between T0 and T1
                                                         (CLOCK_MONOTONIC s: the job's calls): per size n, p50/p99
                                                         (ms), failures; the long flow's mean rate over [T0, T1] and
                                                         its share of the link; the probe's RTT p50/p99 and losses

A short flow's completion time runs from connect() to its last response byte, as a short RPC's user sees it.
"""
import argparse
import json
import os
import socket
import struct
import sys
import time


def sink(args) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("0.0.0.0", args.port))
    listener.listen(4)
    conn, _ = listener.accept()
    buffer = bytearray(1 << 20)
    counted = 0
    tick = time.monotonic()
    with open(args.out, "w", buffering=1) as out:
        out.write("monotonic_s,bytes\n")
        while True:
            n = conn.recv_into(buffer)
            if n == 0:
                break
            counted += n
            now = time.monotonic()
            if now - tick >= 0.1:
                out.write(f"{now:.3f},{counted}\n")
                counted = 0
                tick = now
        out.write(f"{time.monotonic():.3f},{counted}\n")


def long_flow(args) -> None:
    host, port = args.server.rsplit(":", 1)
    payload = bytes(1 << 20)
    end = time.perf_counter() + args.seconds
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        while time.perf_counter() < end and not (args.until and os.path.exists(args.until)):
            try:
                conn.sendall(payload)
            except OSError:
                break


def icmp_checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def probe(args) -> None:
    SO_TIMESTAMPNS = 35
    sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.settimeout(0.001)
    ident = os.getpid() & 0xFFFF
    sent = {}
    rows = []
    end = time.monotonic() + args.seconds
    next_at = time.monotonic()
    seq = 0
    while time.monotonic() < end and not (args.until and os.path.exists(args.until)):
        now = time.monotonic()
        if now >= next_at:
            seq = (seq + 1) & 0xFFFF
            body = struct.pack("!HH", ident, seq) + bytes(56)
            header = struct.pack("!BBH", 8, 0, 0)
            packet = struct.pack("!BBH", 8, 0, icmp_checksum(header + body)) + body
            sent[seq] = (now, time.time_ns())
            sock.sendto(packet, (args.target, 0))
            next_at += args.interval_ms / 1e3
        try:
            data, ancillary, _, _ = sock.recvmsg(2048, 64)
        except socket.timeout:
            continue
        ihl = (data[0] & 0x0F) * 4
        kind, _, _, rid, rseq = struct.unpack("!BBHHH", data[ihl:ihl + 8])
        if kind != 0 or rid != ident or rseq not in sent:
            continue
        stamp = None
        for level, ctype, cdata in ancillary:
            if level == socket.SOL_SOCKET and ctype == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack("qq", cdata[:16])
                stamp = sec * 10**9 + nsec
        mono, wall = sent.pop(rseq)
        rtt = ((stamp if stamp is not None else time.time_ns()) - wall) / 1e6
        rows.append((mono, f"{rtt:.3f}"))
    rows.extend((mono, "") for mono, _ in sent.values())  # never answered: lost (or later than the run's end)
    with open(args.out, "w") as out:
        out.write("monotonic_s,rtt_ms\n")
        for mono, rtt in sorted(rows):
            out.write(f"{mono:.4f},{rtt}\n")


def percentile(values, q):
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, int(round(q / 100 * (len(ordered) - 1)))))
    return ordered[index]


def summary(args) -> None:
    rows = []
    with open(args.short) as f:
        for line in f:
            if line.startswith("#") or line.startswith("start_s"):
                continue
            start, size, fct, ok = line.strip().split(",")
            start = float(start)
            if args.window_from <= start <= args.window_to:
                rows.append((start, int(size), float(fct), ok == "1"))
    result = {"flows": len(rows), "failed": sum(1 for r in rows if not r[3]), "sizes": {}}
    for size in sorted({r[1] for r in rows}):
        fcts = [r[2] for r in rows if r[1] == size and r[3]]
        result["sizes"][str(size)] = {"n": len(fcts), "p50_ms": percentile(fcts, 50), "p99_ms": percentile(fcts, 99)}
    if args.sink:
        received = 0
        with open(args.sink) as f:
            next(f)
            for line in f:
                t, n = line.strip().split(",")
                if args.window_from < float(t) <= args.window_to:
                    received += int(n)
        span = (args.window_to - args.window_from)
        rate = received * 8 / span if span > 0 else 0
        result["long_bps"] = rate
        result["long_share"] = rate / args.link_bps if args.link_bps else None
    if args.probe:
        rtts, lost = [], 0
        with open(args.probe) as f:
            next(f)
            for line in f:
                t, rtt = line.strip().split(",")
                if args.window_from <= float(t) <= args.window_to:
                    if rtt == "":
                        lost += 1
                    else:
                        rtts.append(float(rtt))
        result["probe"] = {"n": len(rtts), "lost": lost, "p50_ms": percentile(rtts, 50),
                           "p99_ms": percentile(rtts, 99)}
    print(json.dumps(result))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("sink")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--out", required=True)
    p = sub.add_parser("long")
    p.add_argument("--server", required=True)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--until")
    p = sub.add_parser("probe")
    p.add_argument("--to", dest="target", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--interval-ms", type=float, default=10)
    p.add_argument("--seconds", type=float, default=3600)
    p.add_argument("--until")
    p = sub.add_parser("summary")
    p.add_argument("--short", required=True)
    p.add_argument("--sink")
    p.add_argument("--probe")
    p.add_argument("--from", dest="window_from", type=float, default=0)
    p.add_argument("--to", dest="window_to", type=float, default=0)
    p.add_argument("--link-bps", type=float, default=1e9)
    args = ap.parse_args(argv)
    if args.cmd == "sink":
        sink(args)
    elif args.cmd == "probe":
        probe(args)
    elif args.cmd == "long":
        long_flow(args)
    else:
        summary(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

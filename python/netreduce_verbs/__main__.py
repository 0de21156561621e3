"""Command line: one process per rank.

  python3 -m netreduce_verbs --rank R --peers IP0,IP1,... [--algo netreduce|ring|both] [--dtype int32|fp32]
      [--elements N] [--msg-len L] [--window N] [--ring-id ID] [--payload BYTES] [--device rxe0]
      [--gid-index auto] [--port 18515] [--seed S] [--expect sum|predecessor] [--iterations K]

Prints one JSON line per run: {"algo", "rank", "ok", "seconds", "bytes", "gbps", ...}; exit status 0 when
every run's result equals the expected tensor bit for bit, 1 otherwise.
--expect predecessor checks a NetReduce run without an appliance in the path (the successor then receives its
predecessor's tensor unchanged): it proves the client and the RC path on their own.
"""
import argparse
import json
import sys
import time

from . import ina, tensors


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="netreduce_verbs", description="NetReduce / ring all-reduce over RDMA verbs")
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--peers", required=True, help="comma-separated IP of every rank, in rank order")
    ap.add_argument("--algo", choices=("netreduce", "ring", "both"), default="netreduce")
    ap.add_argument("--dtype", choices=sorted(tensors.DTYPES), default="int32")
    ap.add_argument("--elements", type=int, default=65536)
    ap.add_argument("--msg-len", type=int, default=4, help="packets per NetReduce message (MsgLen)")
    ap.add_argument("--window", type=int, default=4, help="NetReduce messages in flight (N)")
    ap.add_argument("--ring-id", type=int, default=1)
    ap.add_argument("--payload", type=int, default=0, help="bytes per packet; default: the port's path MTU")
    ap.add_argument("--device", default="rxe0")
    ap.add_argument("--gid-index", default="auto")
    ap.add_argument("--port", type=int, default=18515, help="TCP port of the connection exchange")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--expect", choices=("sum", "predecessor"), default="sum")
    ap.add_argument("--iterations", type=int, default=1)
    ap.add_argument("--qp-timeout", type=int, default=16, help="RC ack timeout exponent (4.096 us * 2^T)")
    ap.add_argument("--stall", type=float, default=60.0, help="give up after this long without a completion")
    ap.add_argument("--inet-tag", default="NRED", help="the ring's InetTag, 4 ASCII characters")
    ap.add_argument("--result-tag", default="NRES",
                    help="the tag results carry (the --inet-tag when the ring leaves results unmarked)")
    ap.add_argument("--appliance", default=None,
                    help="control API base URL (e.g. http://10.0.0.9:9740): check the ring's parameters "
                         "against these settings before sending, and refuse to start on a mismatch")
    args = ap.parse_args(argv)
    try:
        inet_tag, result_tag = ina.tag_value(args.inet_tag), ina.tag_value(args.result_tag)
    except ValueError as error:
        ap.error(str(error))

    # pyverbs is imported here so that --help works on hosts without it.
    from .collectives import netreduce_allreduce, ring_allreduce
    from .ring import TcpRing
    from .verbs import Device

    peers = args.peers.split(",")
    world = len(peers)
    if world < 2:
        ap.error("need at least 2 peers")
    t_setup = time.monotonic()
    dev = Device(args.device, peers[args.rank], None if args.gid_index == "auto" else int(args.gid_index))
    payload = args.payload or dev.path_mtu
    if args.appliance and args.algo != "ring":
        from . import appliance
        appliance.check_ring_parameters(
            appliance.fetch_ring_parameters(args.appliance, args.ring_id), ring_id=args.ring_id, world=world,
            rank=args.rank, window=args.window, msg_len=args.msg_len, payload=payload, dtype=args.dtype,
            inet_tag=args.inet_tag, result_tag=args.result_tag, ip=peers[args.rank])
    mine = tensors.to_bytes(tensors.make(args.dtype, args.elements, args.rank, args.seed))
    want_sum = tensors.expected_sum(args.dtype, args.elements, world, args.seed)
    want_pred = tensors.make(args.dtype, args.elements, (args.rank - 1) % world, args.seed)
    tcp = TcpRing(args.rank, peers, args.port)
    setup = time.monotonic() - t_setup
    algos = ("netreduce", "ring") if args.algo == "both" else (args.algo,)
    ok_all = True
    try:
        for it in range(args.iterations):
            for algo in algos:
                if algo == "netreduce":
                    run = netreduce_allreduce(dev, tcp, mine, payload, args.msg_len, args.window, args.ring_id,
                                              args.stall, args.qp_timeout, inet_tag, result_tag)
                    want = want_pred if args.expect == "predecessor" else want_sum
                else:
                    run = ring_allreduce(dev, tcp, mine, args.dtype, args.stall, args.qp_timeout)
                    want = want_sum
                got = tensors.from_bytes(args.dtype, run.result)
                bad = tensors.first_mismatch(got, want)
                ok = bad is None and not run.header_errors
                ok_all &= ok
                report = {
                    "algo": algo, "rank": args.rank, "world": world, "iteration": it, "ok": ok,
                    "dtype": args.dtype, "elements": args.elements, "bytes": len(mine),
                    "seconds": round(run.seconds, 4),
                    "gbps": round(len(mine) * 8 / run.seconds / 1e9, 4) if run.seconds > 0 else None,
                    "messages": run.messages, "setup_seconds": round(setup, 2),
                    "device": args.device, "gid_index": dev.gid_index, "path_mtu": dev.path_mtu,
                }
                if algo == "netreduce":
                    report.update({"msg_len": args.msg_len, "window": args.window, "payload": payload,
                                   "expect": args.expect})
                if bad is not None:
                    report["first_mismatch"] = {"index": bad, "got": got[bad] if bad < len(got) else None,
                                                "want": want[bad] if bad < len(want) else None}
                if run.header_errors:
                    report["header_errors"] = [str(h) for h in run.header_errors]
                print(json.dumps(report), flush=True)
    finally:
        tcp.close()
        dev.close()
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())

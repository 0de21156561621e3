#!/usr/bin/python3
"""Per-frame RoCEv2 ICRC verdicts from scapy, a RoCE implementation netreduce did not write.

Usage: /usr/bin/python3 scripts/check/scapy_icrc.py FILE.pcap

Prints one line per frame:

    <frame#> <verdict> wire=<8 hex digits> scapy=<8 hex digits>

verdict is ok (the ICRC in the frame equals scapy.contrib.roce's compute_icrc), bad, not-roce (no
UDP/4791 BTH), truncated (the record holds less than the frame's length) or unsupported (RoCEv2 over IPv6: scapy 2.5 computes ICRCs for IPv4 only). The hex digits are
the four ICRC bytes in wire order. Exit status 1 if any frame is bad, 2 on usage or read errors.
Frames are numbered from 1, as tshark and `netreduce pcap verify` number them.
"""
import logging
import sys

logging.getLogger("scapy.runtime").setLevel(logging.ERROR)

from scapy.contrib.roce import BTH  # noqa: E402
from scapy.error import Scapy_Exception  # noqa: E402
from scapy.layers.inet import IP, UDP  # noqa: E402
from scapy.utils import PcapReader  # noqa: E402

ROCE_PORT = 4791


def verdict(frame):
    if frame.wirelen is not None and len(bytes(frame)) < frame.wirelen:
        return "truncated", "-", "-"
    if BTH not in frame or UDP not in frame or frame[UDP].dport != ROCE_PORT:
        return "not-roce", "-", "-"
    bth = frame[BTH]
    wire = (bth.icrc or 0).to_bytes(4, "big").hex()
    if not isinstance(bth.underlayer, UDP) or not isinstance(bth.underlayer.underlayer, IP):
        return "unsupported", wire, "-"
    computed = bth.compute_icrc(None).hex()
    return ("ok" if computed == wire else "bad"), wire, computed


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    bad = 0
    try:
        with PcapReader(argv[1]) as frames:
            for number, frame in enumerate(frames, start=1):
                result, wire, computed = verdict(frame)
                bad += result == "bad"
                print(f"{number} {result} wire={wire} scapy={computed}")
    except (OSError, EOFError, ValueError, Scapy_Exception) as ex:  # scapy's own words for a damaged file
        print(f"{argv[1]}: {ex}", file=sys.stderr)
        return 2
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

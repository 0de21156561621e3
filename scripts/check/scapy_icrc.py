#!/usr/bin/python3
"""Check the ICRC of every RoCEv2 (IPv4) frame of a pcap with scapy's independent implementation.

Usage: /usr/bin/python3 scripts/check/scapy_icrc.py FILE.pcap
Prints "checked N mismatches M" and exits 1 if any frame's ICRC disagrees with scapy's compute_icrc.
"""
import sys

from scapy.all import Ether, IP, UDP, rdpcap, raw
from scapy.contrib.roce import BTH


def main(path):
    checked = 0
    bad = []
    for index, packet in enumerate(rdpcap(path)):
        frame = Ether(raw(packet))
        if IP not in frame or UDP not in frame or BTH not in frame:
            continue
        udp = frame[UDP]
        end = len(raw(frame)) - len(raw(udp)) + udp.len
        carried = raw(frame)[end - 4:end]
        computed = frame[BTH].compute_icrc(None)
        checked += 1
        if carried != computed:
            bad.append(index)
    print("checked %d mismatches %d %s" % (checked, len(bad), bad[:10]))
    return 1 if bad or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

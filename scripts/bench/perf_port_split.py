#!/usr/bin/env python3
"""Split one thread's perf samples (call graphs) by what the port path spent them on.

usage: perf record -a -g -o FILE -- sleep 1      # while scripts/bench-appliance.sh runs the appliance
       perf script -i FILE --tid TID -F tid,ip,sym | scripts/bench/perf_port_split.py
TID: the daemon's dataplane thread (`perf report -i FILE --sort pid` names it netreduce-datap...).

Classes, first match wins: softirq run in the thread's context (on veth, the receiving side's work for the frames
the thread sent: the peer's AF_PACKET delivery, its IP stack dropping the frame, the skb freed); sendto split into
the veth transmit and the AF_PACKET transmit-ring work before it (skb allocation, copy out of the ring); poll;
sched_yield; other kernel; user (JIT-compiled code and the JVM).
"""
import collections
import sys


def stacks(lines):
    current = []
    for line in lines:
        line = line.rstrip()
        if not line.strip():
            if current:
                yield current
            current = []
        elif line.startswith((" ", "\t")):
            parts = line.split(None, 1)
            current.append(parts[1] if len(parts) > 1 else "?")
    if current:
        yield current


def classify(stack):
    names = " ".join(stack)
    if "net_rx_action" in names or "process_backlog" in names:
        return "softirq in its context: the peer's receive (AF_PACKET delivery, IP drop, skb free)"
    if "packet_sendmsg" in names or "tpacket_snd" in names:
        if "veth_xmit" in names or "dev_hard_start_xmit" in names:
            return "sendto: veth transmit"
        return "sendto: tpacket_snd (skb allocation, copy out of the TX ring)"
    if "sys_poll" in names:
        return "poll"
    if "sched_yield" in names:
        return "sched_yield"
    if "getsockopt" in names:
        return "getsockopt (PACKET_STATISTICS)"
    if any(frame.startswith(("entry_SYSCALL", "asm_", "irq")) for frame in stack):
        return "other kernel"
    return "user (JIT code, JVM)"


counts = collections.Counter(classify(s) for s in stacks(sys.stdin))
total = sum(counts.values())
print(f"samples {total}")
for name, count in counts.most_common():
    print(f"{100 * count / total:5.1f} %  {name}")

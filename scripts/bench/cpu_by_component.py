#!/usr/bin/env python3
"""Where a bed run's CPU goes, by component, per training step: a sampler of /proc and its report.

On the 2-core bed the trainers, the sidecars (the software RDMA NICs), the appliance and the kernel share the cores,
so a step's time follows the machine's CPU per step more than any one component's speed. This says whose CPU it is:

    cpu_by_component.py record OUT.jsonl [--period 0.25]     # until SIGTERM/SIGINT: one line per sample
    cpu_by_component.py report OUT.jsonl --start T0 --end T1 --steps N [--json]
    cpu_by_component.py report OUT.jsonl --results RUN.json --skip K [--json]

A sample holds every process's user + system clock ticks (/proc/PID/stat), the threads of each JVM of netreduce's
(/proc/PID/task), and the machine's /proc/stat line. The report takes the two samples nearest the window's ends and
charges each process's (or thread's) ticks between them to a component:

* ``trainer``: Python processes running a trainer or a bench's ranks (``ddp_train``, ``dlrm_train``,
  ``session_calls``, ``gloo_allreduce``, ``sparse_loopback``); other Python is ``python other``;
* ``sidecar``: JVMs running ``worker serve`` or ``worker agent``, split into ``endpoint`` (the main thread, which drives the ring's
  endpoint), ``JIT`` (C1 and C2 compiler threads), ``control`` (the control socket's reader), ``other`` (GC, VM);
* ``daemon``: the appliance's JVM (``netreduce ... daemon``): ``lanes`` (its dataplane threads), ``JIT``, ``other``;
* ``worker``: other ``worker`` commands (``allreduce``, ``loadgen``), ``ctl``: the CLI;
* ``kernel``: kernel threads (ksoftirqd, kworkers; PF_KTHREAD), ``other``: everything else. A process that exits
  inside the window is charged up to its last sample there (an exiting one has an empty command line too).

Without IRQ time accounting (this VM's kernel) softirq work is charged to whichever task it interrupted, so a
trainer's ticks include the receive work of the gloo TCP it waits on; the machine's softirq column is printed beside.
``--results`` reads the window from a train.sh result (rank 0's ``step_end_unix``): from the end of step K to the
end of the last step, so the ``--skip`` first steps (the warm-up) are left out. Ticks are 10 ms (USER_HZ 100): a
window of a few seconds gives a component's share within a few percent.
"""
import argparse
import json
import os
import signal
import sys
import time

TRAINERS = ("ddp_train", "dlrm_train", "session_calls", "gloo_allreduce", "sparse_loopback", "bed_worker")


PF_KTHREAD = 0x00200000  # a kernel thread (include/linux/sched.h), in /proc/PID/stat's flags


def classify(pid: str, flags: int = 0):
    """The component of a process, from its command line (None when it is gone, or exiting: a process that has
    released its memory, a zombie among them, has an empty command line like a kernel thread's)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return None
    line = b" ".join(argv).decode(errors="replace")
    if not line:
        return "kernel" if flags & PF_KTHREAD else None
    exe = os.path.basename(argv[0].decode(errors="replace"))
    if exe == "java":
        if (" serve" in line or " agent" in line) and "netreduce-worker" in line:
            return "sidecar"
        if "netreduce-worker" in line:
            return "worker"
        if " daemon" in line:
            return "daemon"
        if " ctl" in line:
            return "ctl"
        return "other"
    if exe.startswith("python"):
        return "trainer" if any(t in line for t in TRAINERS) else "python other"
    return "other"


def thread_part(component: str, name: str) -> str:
    """The part of a JVM a thread is, from its name."""
    if name.startswith("C1 Compiler") or name.startswith("C2 Compiler"):
        return "JIT"
    if component == "sidecar":
        if name == "java" or name.startswith("agent-request"):  # a sidecar's main thread; an agent's sessions
            return "endpoint"
        if name.startswith("sidecar-control"):
            return "control"
        return "other"
    if component == "daemon" and name.startswith("netreduce-datap"):
        return "lanes"
    return "other"


def ticks_of(stat: str) -> int:
    fields = stat[stat.rfind(")") + 2:].split()
    return int(fields[11]) + int(fields[12])  # utime, stime


def flags_of(stat: str) -> int:
    return int(stat[stat.rfind(")") + 2:].split()[6])


def sample() -> dict:
    processes = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        component = classify(pid, flags_of(stat))
        if component is None:
            continue
        entry = {"c": component, "t": ticks_of(stat)}
        if component in ("sidecar", "daemon"):
            parts = {}
            try:
                for tid in os.listdir(f"/proc/{pid}/task"):
                    try:
                        with open(f"/proc/{pid}/task/{tid}/stat") as f:
                            tstat = f.read()
                    except OSError:
                        continue
                    part = thread_part(component, tstat[tstat.find("(") + 1:tstat.rfind(")")])
                    parts[tid] = [part, ticks_of(tstat)]
            except OSError:
                pass
            entry["threads"] = parts
        processes[pid] = entry
    with open("/proc/stat") as f:
        machine = [int(x) for x in f.readline().split()[1:]]
    return {"time": time.time(), "stat": machine, "p": processes}


def record(args) -> int:
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    with open(args.out, "w", encoding="utf-8") as out:
        while not stop:
            out.write(json.dumps(sample(), separators=(",", ":")) + "\n")
            out.flush()
            time.sleep(args.period)
        out.write(json.dumps(sample(), separators=(",", ":")) + "\n")
    return 0


def nearest(samples, when):
    return min(samples, key=lambda s: abs(s["time"] - when))


def charge(first: dict, last: dict, hz: int, between=()) -> dict:
    """CPU ms per component (and per JVM part) between two samples; processes born in between count from zero. A
    process of ``first`` that is gone from ``last`` (or has become another) is charged up to the last of the samples
    ``between`` them (in time order) where it was still itself: a trainer that exits just after its last step."""
    spent = {}

    def add(key, ticks):
        spent[key] = spent.get(key, 0.0) + ticks * 1000.0 / hz

    def charge_one(entry, before):
        add(entry["c"], entry["t"] - (before["t"] if before else 0))
        for tid, (part, ticks) in entry.get("threads", {}).items():
            old = before.get("threads", {}).get(tid) if before else None
            add(entry["c"] + " " + part, ticks - (old[1] if old else 0))

    for pid, entry in last["p"].items():
        before = first["p"].get(pid)
        charge_one(entry, before if before is not None and before["c"] == entry["c"] else None)  # else: pid reused
    for pid, entry in first["p"].items():
        if last["p"].get(pid, {}).get("c") == entry["c"]:
            continue
        for middle in reversed(between):
            seen = middle["p"].get(pid)
            if seen is not None and seen["c"] == entry["c"]:
                charge_one(seen, entry)
                break
    return spent


def report(args) -> int:
    with open(args.samples, encoding="utf-8") as f:
        samples = [json.loads(line) for line in f if line.strip()]
    if len(samples) < 2:
        print("cpu_by_component: fewer than two samples", file=sys.stderr)
        return 1
    if args.results:
        with open(args.results, encoding="utf-8") as f:
            ends = json.load(f).get("step_end_unix") or []
        if len(ends) <= args.skip:
            print(f"cpu_by_component: {args.results} has {len(ends)} step times, not more than --skip {args.skip}",
                  file=sys.stderr)
            return 1
        start, end, steps = ends[args.skip - 1] if args.skip else ends[0], ends[-1], len(ends) - max(args.skip, 1)
    else:
        start, end, steps = args.start, args.end, args.steps
    first, last = nearest(samples, start), nearest(samples, end)
    between = [s for s in samples if first["time"] < s["time"] < last["time"]]
    seconds = last["time"] - first["time"]
    if seconds <= 0 or steps <= 0:
        print("cpu_by_component: an empty window", file=sys.stderr)
        return 1
    hz = os.sysconf("SC_CLK_TCK")
    spent = charge(first, last, hz, between)
    machine = [b - a for a, b in zip(first["stat"], last["stat"])]
    busy = (machine[0] + machine[1] + machine[2] + machine[5] + machine[6]) * 1000.0 / hz
    softirq = machine[6] * 1000.0 / hz
    cores = os.cpu_count() or 1
    summary = {"window_s": seconds, "steps": steps, "ms_per_step_wall": seconds * 1000.0 / steps,
               "busy_ms_per_step": busy / steps, "busy_share": busy / (seconds * 1000.0 * cores),
               "softirq_ms_per_step": softirq / steps,
               "components": {k: v / steps for k, v in sorted(spent.items(), key=lambda kv: -kv[1]) if v > 0}}
    if args.json:
        print(json.dumps(summary))
        return 0
    print(f"CPU per step over {steps} steps ({seconds:.1f} s, {summary['ms_per_step_wall']:.1f} ms a step): machine "
          f"busy {summary['busy_ms_per_step']:.1f} ms ({100 * summary['busy_share']:.0f} % of {cores} cores; softirq "
          f"{summary['softirq_ms_per_step']:.1f}, charged to whoever ran)")
    top = [k for k in summary["components"] if " " not in k or k == "python other"]
    for key in top:
        parts = [f"{k.split(' ', 1)[1]} {v:.1f}" for k, v in summary["components"].items()
                 if k.startswith(key + " ") and key != "python other"]
        print(f"  {key:13s} {summary['components'][key]:6.1f} ms" + (f"  ({', '.join(parts)})" if parts else ""))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="sample /proc until SIGTERM or SIGINT")
    rec.add_argument("out")
    rec.add_argument("--period", type=float, default=0.25, help="seconds between samples (default 0.25)")
    rep = sub.add_parser("report", help="CPU per step by component between two times")
    rep.add_argument("samples")
    rep.add_argument("--start", type=float)
    rep.add_argument("--end", type=float)
    rep.add_argument("--steps", type=int)
    rep.add_argument("--results", help="a train.sh result JSON with step_end_unix (rank 0's)")
    rep.add_argument("--skip", type=int, default=0, help="with --results: steps left out at the start")
    rep.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "record":
        return record(args)
    if not args.results and None in (args.start, args.end, args.steps):
        parser.error("report needs --results, or --start, --end and --steps")
    return report(args)


if __name__ == "__main__":
    sys.exit(main())

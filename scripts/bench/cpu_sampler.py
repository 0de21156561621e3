#!/usr/bin/env python3
"""Sample the CPU time of a set of processes on CLOCK_MONOTONIC, for scripts/bench-allreduce.sh --cpu-load.

usage: cpu_sampler.py OUT INTERVAL_MS PID...

Every INTERVAL_MS until SIGTERM, one line "MONOTONIC_NS CPU_NS" to OUT: the time and the processes' summed CPU time
(the first field of each PID's /proc/PID/schedstat: nanoseconds on a CPU of its main thread; the bench's stand-in
trainers are single-threaded shell loops). The bench integrates it over each timed call's window
(the calls' starts, also on CLOCK_MONOTONIC, come from the workers' JSON) to say how much CPU the trainers got while
the all-reduce ran.
"""
import signal
import sys
import time


def main() -> int:
    out, interval_ms, pids = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    running = True

    def stop(*_):
        nonlocal running
        running = False

    signal.signal(signal.SIGTERM, stop)
    last = {pid: 0 for pid in pids}
    with open(out, "w", encoding="ascii") as samples:
        while running:
            for pid in pids:
                try:
                    with open(f"/proc/{pid}/schedstat", encoding="ascii") as stat:
                        last[pid] = int(stat.read().split()[0])
                except (OSError, ValueError, IndexError):
                    pass  # gone: its last sample stands
            samples.write(f"{time.monotonic_ns()} {sum(last.values())}\n")
            time.sleep(interval_ms / 1000)
    return 0


if __name__ == "__main__":
    sys.exit(main())

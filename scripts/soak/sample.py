"""One sample of the soak (scripts/soak.sh): the daemon's memory, fds, threads and table sizes, written as one line
of soak.csv and one line per NMT category of nmt.csv.

Why one process per sample, and in this order:
- The API is asked over its unix socket directly (http.client), not through `netreduce ctl`, which starts a JVM per
  call: three JVM starts every 10 s were a large part of the 2-core machine's load in the first soak.
- The ring set is read before and after the memory figures. An extra job's aggregator memory is allocated and freed
  while the soak runs; a sample whose two readings differ straddled such a change and is marked inconsistent (the
  first soak's highest off-heap sample was one: memory read with the job's aggregators, ring count read without).
- The JVM's class and compilation counts (jcmd PerfCounter.print) go to jit.csv: code cache and metaspace grow while
  the JIT compiles and profiles methods, which is bounded by the methods of the classes loaded; a class count that
  keeps rising would make it unbounded.
- With --gc the heap is collected first (jcmd GC.run: a full collection with G1) and the heap's use after it is the
  live heap: the committed heap is fixed by -Xms = -Xmx and says nothing about retention.
"""
import argparse
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import time


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str):
        super().__init__("localhost", timeout=10)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(self.unix_path)


def api(path_sock: str, path: str):
    conn = UnixHTTPConnection(path_sock)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"{path}: HTTP {response.status}")
        return json.loads(body)
    finally:
        conn.close()


def ring_set(sock: str):
    rings = api(sock, "/v1/rings")
    ids = sorted(int(r["ring"]["id"]) for r in rings)
    return "+".join(map(str, ids)), sum(int(r.get("aggregatorBytes", 0)) for r in rings)


def jcmd(jcmd_path: str, pid: int, *command: str) -> str:
    return subprocess.run([jcmd_path, str(pid), *command], capture_output=True, text=True, timeout=60).stdout


def proc_status(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


CATEGORY = re.compile(r"^-\s+(.+?) \(reserved=(\d+)KB, committed=(\d+)KB\)")
TOTAL = re.compile(r"^Total: reserved=(\d+)KB, committed=(\d+)KB")
HEAP_USED = re.compile(r"committed (\d+)K, used (\d+)K")

COLUMNS = ["time", "rss_kb", "rss_anon_kb", "rss_file_kb", "heap_committed_kb", "heap_live_kb",
           "offheap_committed_kb", "ring_memory_kb", "offheap_less_rings_kb", "fds", "threads", "clt_entries", "ctt_entries", "jobs", "ring_set", "consistent"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--sock", required=True, help="the API's unix socket")
    ap.add_argument("--jcmd", required=True)
    ap.add_argument("--csv", required=True)
    ap.add_argument("--nmt-csv", required=True)
    ap.add_argument("--jit-csv", default="", help="default: jit.csv beside --csv")
    ap.add_argument("--gc", action="store_true", help="full GC first and record the live heap")
    ap.add_argument("--header", action="store_true", help="only write the CSV headers")
    args = ap.parse_args()
    jit_csv = args.jit_csv or os.path.join(os.path.dirname(os.path.abspath(args.csv)), "jit.csv")
    if args.header:
        with open(jit_csv, "w") as f:
            f.write("time,loaded_classes,unloaded_classes,compiles\n")
        with open(args.csv, "w") as f:
            f.write(",".join(COLUMNS) + "\n")
        with open(args.nmt_csv, "w") as f:
            f.write("time,category,committed_kb\n")
        return 0

    t = int(time.time())
    before, ring_bytes = ring_set(args.sock)
    heap_live = ""
    if args.gc:
        jcmd(args.jcmd, args.pid, "GC.run")
        match = HEAP_USED.search(jcmd(args.jcmd, args.pid, "GC.heap_info"))
        heap_live = match.group(2) if match else ""
    rss = proc_status(args.pid, "VmRSS")
    # RSS in its two parts: anonymous memory (the heap, malloc's arenas, the JIT's code cache, thread stacks: where a
    # leak shows) and file-backed pages (the jars, the AOT cache, libjvm and the other libraries, the AF_PACKET
    # rings' pages), which grow as the process first touches more of those mappings, up to their sizes.
    rss_anon = proc_status(args.pid, "RssAnon")
    rss_file = proc_status(args.pid, "RssFile")
    threads = proc_status(args.pid, "Threads")
    fds = len(os.listdir(f"/proc/{args.pid}/fd"))
    categories = {}
    total = 0
    for line in jcmd(args.jcmd, args.pid, "VM.native_memory", "summary").splitlines():
        line = line.strip()
        m = TOTAL.match(line)
        if m:
            total = int(m.group(2))
        m = CATEGORY.match(line)
        if m:
            categories[m.group(1)] = int(m.group(3))
    perf = {}
    for line in jcmd(args.jcmd, args.pid, "PerfCounter.print").splitlines():
        key, _, value = line.partition("=")
        perf[key.strip()] = value.strip()

    def counter(*names):
        return sum(int(perf.get(n, "0") or 0) for n in names)
    after, _ = ring_set(args.sock)
    clt = len(api(args.sock, "/v1/tables/clt"))
    ctt = len(api(args.sock, "/v1/tables/ctt"))
    jobs = len(api(args.sock, "/v1/jobs"))
    # Off-heap: NMT's committed total less the Java heap and less NMT's own bookkeeping (in detail mode it grows
    # with every new allocation site it sees: the measurement's cost, not the daemon's).
    heap = categories.get("Java Heap", 0)
    offheap = total - heap - categories.get("Native Memory Tracking", 0)
    ring_kb = ring_bytes // 1024
    # The rings' aggregator memory was malloc'd, and counted in NMT's "Other", until it was mapped from the kernel
    # (AnonymousMemory): then NMT does not see it and there is nothing to take off. Told apart by "Other" itself.
    rings_in_nmt = categories.get("Other", 0) >= ring_kb > 0
    row = [t, rss, rss_anon, rss_file, heap, heap_live, offheap, ring_kb,
           offheap - (ring_kb if rings_in_nmt else 0), fds, threads, clt, ctt, jobs, after, int(before == after)]
    with open(args.csv, "a") as f:
        f.write(",".join(map(str, row)) + "\n")
    with open(jit_csv, "a") as f:
        f.write(f"{t},{counter('java.cls.loadedClasses', 'java.cls.sharedLoadedClasses')},"
                f"{counter('java.cls.unloadedClasses', 'java.cls.sharedUnloadedClasses')},"
                f"{counter('sun.ci.totalCompiles')}\n")
    with open(args.nmt_csv, "a") as f:
        for name, kb in categories.items():
            f.write(f"{t},{name},{kb}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

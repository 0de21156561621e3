#!/usr/bin/env python3
"""What a JVM's JIT compiled, from its -XX:+LogCompilation logs (one or more JVMs; figures are per JVM): each
compiler's compiles and their time by package and by method, the methods compiled more than once, the compiled code
made not entrant and the uncommon traps behind it, and the compile time per second of the JVM's life.

A task's time is from its start to its done stamp: wall time of the compiler thread, which on busy cores is several
times its CPU (the thread's CPU is what bench-session.sh's sidecar_thread_cpu_ms reports): read the shares, not the
milliseconds. Used for docs/performance.md, "What the sidecar's JIT compiles":

    scripts/bench-session.sh --no-build --calls 110 --warmup 0 --jit 0 --modes "doorbell gloo" \
        --sidecar-java-opts "-XX:+UnlockDiagnosticVMOptions -XX:+LogCompilation -XX:LogFile=/tmp/jit/sc-%p.log"
    python3 scripts/bench/jit_log.py /tmp/jit/sc-*.log [--depth 4] [--top 30] [--comp C2|C1] [--split SECONDS]
"""
import re, sys, collections, html
ATTR = re.compile(r"(\w+)='([^']*)'")
def attrs(line): return {k: html.unescape(v) for k, v in ATTR.findall(line)}
def pkg(method, depth):
    cls = method.split(' ')[0]
    parts = cls.split('.')
    return '.'.join(parts[:depth]) if len(parts) > depth else '.'.join(parts[:-1])
def analyse(path):
    tasks = []  # (compiler, method, level, osr, start, end, nmsize, inlined, success)
    nme = collections.Counter(); traps = collections.Counter()
    cur = None
    for line in open(path, errors='replace'):
        if line.startswith('<task ') :
            a = attrs(line); cur = a
        elif line.startswith('<task_done') and cur is not None:
            d = attrs(line)
            lvl = int(cur.get('level', '4'))
            comp = 'C2' if lvl == 4 else 'C1'
            tasks.append((comp, cur['method'], lvl, 'osr_bci' in cur, float(cur['stamp']), float(d['stamp']),
                          int(d.get('nmsize', 0)), int(d.get('inlined_bytes', 0)), d.get('success') == '1', int(cur['compile_id'])))
            cur = None
        elif line.startswith('<make_not_entrant'):
            a = attrs(line); nme[(a.get('compiler'), a.get('reason'))] += 1
        elif line.startswith('<uncommon_trap thread'):
            a = attrs(line); traps[(a.get('reason'), a.get('action'))] += 1
    return tasks, nme, traps
if __name__ == '__main__':
    import argparse
    p = argparse.ArgumentParser(); p.add_argument('logs', nargs='+'); p.add_argument('--depth', type=int, default=4)
    p.add_argument('--top', type=int, default=30); p.add_argument('--split', type=float, default=None)
    p.add_argument('--comp', default='C2')
    a = p.parse_args()
    allt = []; NME = collections.Counter(); TR = collections.Counter()
    for f in a.logs:
        t, n, tr = analyse(f); allt += t; NME.update(n); TR.update(tr)
    n = len(a.logs)
    for comp in ('C2', 'C1'):
        ts = [t for t in allt if t[0] == comp]
        tot = sum(t[5]-t[4] for t in ts)
        print(f"== {comp}: {len(ts)/n:.0f} compiles/JVM, {tot/n*1e3:.0f} ms wall/JVM, OSR {sum(t[3] for t in ts)/n:.0f}, failed {sum(not t[8] for t in ts)/n:.0f}")
        if a.split is not None:
            before = sum(t[5]-t[4] for t in ts if t[4] < a.split)
            print(f"   started before {a.split}s: {before/n*1e3:.0f} ms, after: {(tot-before)/n*1e3:.0f} ms")
        bypkg = collections.Counter(); cnt = collections.Counter()
        for t in ts: bypkg[pkg(t[1], a.depth)] += t[5]-t[4]; cnt[pkg(t[1], a.depth)] += 1
        for k, v in bypkg.most_common(a.top if comp == a.comp else 12):
            print(f"   {v/n*1e3:7.1f} ms {cnt[k]/n:6.1f}  {k}")
    ts = [t for t in allt if t[0] == a.comp]
    bym = collections.Counter(); cm = collections.Counter(); osr = collections.Counter(); inl = {}
    for t in ts:
        bym[t[1]] += t[5]-t[4]; cm[t[1]] += 1; osr[t[1]] += t[3]; inl[t[1]] = max(inl.get(t[1], 0), t[7])
    print(f"== top {a.comp} methods (ms/JVM, compiles/JVM, OSR, max inlined bytes)")
    for k, v in bym.most_common(a.top):
        print(f"   {v/n*1e3:7.1f} {cm[k]/n:4.1f} {osr[k]/n:4.1f} {inl[k]:6d}  {k}")
    re4 = {k: c for k, c in cm.items() if c/n > 1.0}
    print(f"== {a.comp} methods compiled more than once per JVM: {len(re4)}; their time {sum(bym[k] for k in re4)/n*1e3:.0f} ms/JVM")
    print("== made not entrant (per JVM):", {k: round(v/n, 1) for k, v in NME.most_common(12)})
    print("== uncommon traps (per JVM):", {k: round(v/n, 1) for k, v in TR.most_common(12)})
    # time line
    print("== C2/C1 ms per second of JVM life")
    sec = collections.defaultdict(lambda: [0, 0])
    for t in allt: sec[int(t[4])][0 if t[0] == 'C2' else 1] += t[5]-t[4]
    for s in sorted(sec): print(f"   {s:3d}s  C2 {sec[s][0]/n*1e3:6.0f}  C1 {sec[s][1]/n*1e3:6.0f}")

"""The soak's verdict (scripts/soak.sh): from soak.csv and nmt.csv, whether memory, fds, threads and the CLT stayed
flat after the warm-up, and the plot. Exit status 1 when a round failed or something grew.

Flat means a least-squares slope under a stated bound, not the first sample against the last: single samples swing
by megabytes (the JIT's arenas, malloc's free lists), so a first-vs-last comparison fails or passes by chance, while
the slope over a hundred samples says how fast memory grows and its interval says how well the run could tell."""
import argparse
import csv
import json
import math
import os
import sys
from collections import Counter, defaultdict

MIB = 1024.0


def slope(points):
    """Least-squares slope (units per hour, x in seconds) and its 95 % half-interval; None with under 3 points."""
    n = len(points)
    if n < 3:
        return None
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return None
    b = sum((x - mx) * (y - my) for x, y in points) / sxx
    residual = sum((y - my - b * (x - mx)) ** 2 for x, y in points)
    se = math.sqrt(residual / (n - 2) / sxx)
    t = 1.96 if n > 30 else 2.1
    return b * 3600, t * se * 3600


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", required=True)
    ap.add_argument("--nmt-csv", required=True)
    ap.add_argument("--png", required=True)
    ap.add_argument("--failures", type=int, required=True)
    ap.add_argument("--warm-end", type=int, required=True, help="epoch second the warm-up ended")
    ap.add_argument("--workers", type=int, required=True)
    ap.add_argument("--counters", default="")
    ap.add_argument("--jit-csv", default="", help="default: jit.csv beside --csv")
    ap.add_argument("--bound-offheap", type=float, default=4.0, help="MiB per hour")
    ap.add_argument("--bound-rss", type=float, default=4.0, help="MiB per hour")
    ap.add_argument("--bound-heap", type=float, default=2.0, help="MiB per hour")
    args = ap.parse_args()

    rows = list(csv.DictReader(open(args.csv)))
    for r in rows:
        for k, v in r.items():
            if k != "ring_set":
                r[k] = int(v) if v not in ("", None) else None
    t0 = rows[0]["time"]
    # The last sample is taken after 65 s idle (the CLT's expiry, the idle live heap, fds): not a working sample, so
    # left out of the slopes.
    after = [r for r in rows[:-1] if r["time"] >= args.warm_end and r["consistent"] == 1]
    warm = [r for r in rows if r["time"] < args.warm_end and r["consistent"] == 1]
    problems = []
    print(f"  {len(rows)} samples, {len(after)} after the warm-up ({(args.warm_end - t0) / 60:.1f} min) with a steady"
          f" ring set; {sum(1 for r in rows if r['consistent'] == 0)} left out (ring set changed while sampled)")
    if len(after) < 10:
        print("soak: FAILED (too few samples after the warm-up to judge)")
        return 1
    # The configuration's own ring set: most samples have it (the reloaded and the extra job come and go).
    base_set = Counter(r["ring_set"] for r in after).most_common(1)[0][0]

    # NMT per category at each sample time.
    by_cat = defaultdict(dict)
    for r in csv.DictReader(open(args.nmt_csv)):
        by_cat[r["category"]][int(r["time"])] = int(r["committed_kb"])

    def cat_kb(t, *cats):
        return sum(by_cat.get(c, {}).get(t, 0) for c in cats)

    # The JIT and class metadata: compiled code (Code), the compilers' own memory (Compiler, Arena Chunk) and the
    # metadata of loaded classes, which holds the methods' profiles too (Metaspace, Class). These grow while the
    # JIT is still compiling and profiling, bounded by the methods of the classes loaded: judged by the class count
    # (no class loaded after the warm-up) rather than by their size; everything else by its slope.
    jit_cats = ("Code", "Compiler", "Arena Chunk", "Metaspace", "Class")
    jit_path = args.jit_csv or os.path.join(os.path.dirname(os.path.abspath(args.csv)), "jit.csv")
    jit = []
    if os.path.exists(jit_path):
        jit = [{k: int(v) for k, v in r.items()} for r in csv.DictReader(open(jit_path))]
    jit_after = [r for r in jit if r["time"] >= args.warm_end]

    def fit(points):
        s = slope(points)
        if s is None:
            return None
        return s[0] / MIB, s[1] / MIB, sum(y for _, y in points) / len(points) / MIB

    def check(label, points, bound):
        f = fit(points)
        if f is None:
            print(f"  {label:44s} too few points")
            problems.append(label)
            return
        b, half, level = f
        verdict = "flat" if b <= bound else "GREW"
        print(f"  {label:44s} mean {level:7.1f} MiB, slope {b:+6.2f} MiB/h (95 % +-{half:.2f}), bound {bound:g}"
              f" MiB/h: {verdict}  [{len(points)} samples]")
        if verdict != "flat":
            problems.append(label)

    def show(label, points):
        f = fit(points)
        if f:
            print(f"  {label:44s} mean {f[2]:7.1f} MiB, slope {f[0]:+6.2f} MiB/h (95 % +-{f[1]:.2f})")

    base = [r for r in after if r["ring_set"] == base_set]
    # Judged: anonymous RSS (heap, malloc's arenas, code cache, stacks), where a leak shows. File-backed pages (the
    # jars, the AOT cache, libjvm, the AF_PACKET rings) grow while the process first touches more of those mappings,
    # up to their sizes; shown beside it. Runs recorded before the split (no rss_anon_kb) judge the whole RSS.
    anon = all(r.get("rss_anon_kb") is not None for r in base)
    rss_name = "anon RSS" if anon else "RSS"

    def resident(r):
        return r["rss_anon_kb"] if anon else r["rss_kb"]
    show("off-heap less rings' aggregators (all)", [(r["time"], r["offheap_less_rings_kb"]) for r in after])
    show("  of which JIT and class metadata", [(r["time"], cat_kb(r["time"], *jit_cats)) for r in after])
    show(f"{rss_name} less heap (all; ring set {base_set})",
         [(r["time"], resident(r) - r["heap_committed_kb"]) for r in base])
    if anon:
        files = [(r["time"], r["rss_file_kb"]) for r in base]
        f = fit(files)
        if f:
            print(f"  {'file-backed RSS (jars, AOT cache, libraries, rings)':44s} mean {f[2]:7.1f} MiB, slope "
                  f"{f[0]:+6.2f} MiB/h (95 % +-{f[1]:.2f}), {min(y for _, y in files) / MIB:.1f}-"
                  f"{max(y for _, y in files) / MIB:.1f} MiB: not judged (bounded by the files mapped)")
    if jit_after:
        check("off-heap less rings, JIT, class metadata",
              [(r["time"], r["offheap_less_rings_kb"] - cat_kb(r["time"], *jit_cats)) for r in after],
              args.bound_offheap)
        check(f"{rss_name} less heap, JIT, class metadata ({base_set})",
              [(r["time"], resident(r) - r["heap_committed_kb"] - cat_kb(r["time"], *jit_cats)) for r in base],
              args.bound_rss)
        # Live classes (loaded less unloaded): a reload or an added job spins method-handle classes (LambdaForms,
        # FFM downcall stubs) that a later full GC unloads, so the cumulative count rises by steps while the live one
        # does not. Judged: the live count at the end against the highest before the warm-up ended (the first sample
        # after it when none was taken before), 1 % slack.
        def live_classes(r):
            return r["loaded_classes"] - r["unloaded_classes"]
        jit_warm = [r for r in jit if r["time"] < args.warm_end]
        ref_row = max(jit_warm, key=live_classes) if jit_warm else jit_after[0]
        first, last = jit_after[0], jit_after[-1]
        ref, end_live = live_classes(ref_row), live_classes(last)
        verdict = "flat" if end_live <= ref * 1.01 else "GREW"
        print(f"  {'live classes (loaded less unloaded)':44s} {ref} at {(ref_row['time'] - t0) / 60:.1f} min, highest "
              f"later {max(live_classes(r) for r in jit_after)}, {end_live} at the end ({last['loaded_classes']} "
              f"loaded, {last['unloaded_classes']} unloaded in all; JIT compilations after the warm-up: "
              f"{last['compiles'] - first['compiles']}): {verdict}")
        if verdict != "flat":
            problems.append("live classes")
    else:
        print("  (no jit.csv after the warm-up: the JIT's and class metadata's share is not separated)")
        check("off-heap less rings' aggregators", [(r["time"], r["offheap_less_rings_kb"]) for r in after],
              args.bound_offheap)
        check(f"{rss_name} less heap (ring set {base_set})",
              [(r["time"], resident(r) - r["heap_committed_kb"]) for r in base], args.bound_rss)
    # The live heap after a full GC includes whatever a round has in flight at that moment (a session's requests, an
    # extra job being added): single values jump by 1-2 MiB while rounds run back to back. The last sample is taken
    # after 65 s idle, with nothing in flight: retention shows there. It is judged against the lowest value of the
    # warm-up (taken while rounds ran, so it is no lower than the idle one would be), allowed the bound's rate
    # over the time between. The least-squares slope over the busy samples is shown beside it.
    live = [(r["time"], r["heap_live_kb"]) for r in after if r["heap_live_kb"]]
    show("live heap after full GC (busy)", live[:-1])
    warm_live = [(r["time"], r["heap_live_kb"]) for r in warm if r["heap_live_kb"]]
    end = rows[-1]
    if warm_live and end["heap_live_kb"]:
        floor_t, floor = min(warm_live, key=lambda p: p[1])
        hours = (end["time"] - floor_t) / 3600
        rise = (end["heap_live_kb"] - floor) / MIB
        allowed = args.bound_heap * hours
        verdict = "flat" if rise <= allowed else "GREW"
        print(f"  {'live heap idle at the end':44s} {end['heap_live_kb'] / MIB:.1f} MiB against the warm-up's lowest"
              f" {floor / MIB:.1f} ({rise:+.2f} MiB in {hours * 60:.0f} min; bound {args.bound_heap:g} MiB/h allows"
              f" {allowed:.2f}): {verdict}")
        if verdict != "flat":
            problems.append("live heap")
    else:
        print("  live heap: no full-GC sample in the warm-up or at the end")
        problems.append("live heap")

    # The second half's slope beside the first: a warm-up that ends slows down, a leak does not.
    half_t = (after[0]["time"] + after[-1]["time"]) / 2
    for label, f in (("off-heap less rings", lambda r: r["offheap_less_rings_kb"]),
                     ("  of which JIT and class metadata", lambda r: cat_kb(r["time"], *jit_cats))):
        one = fit([(r["time"], f(r)) for r in after if r["time"] < half_t])
        two = fit([(r["time"], f(r)) for r in after if r["time"] >= half_t])
        if one and two:
            print(f"  {label}: slope {one[0]:+.2f} MiB/h in the first half after warm-up, {two[0]:+.2f} in the second")

    # NMT categories: which part moves (slope per category over the same samples; Other less the rings').
    ring_kb = {r["time"]: r["ring_memory_kb"] for r in after}
    moves = []
    for cat, series in by_cat.items():
        if cat in ("Java Heap", "Native Memory Tracking"):
            continue
        # "Other" held the rings while they were malloc'd (as much as they or more); mapped, it does not
        f = fit([(t, kb - (ring_kb[t] if cat == "Other" and kb >= ring_kb[t] else 0)) for t, kb in series.items()
                 if t in ring_kb])
        if f:
            moves.append((f[0], f[1], cat + (" less rings" if cat == "Other" else ""), f[2]))
    moves.sort(reverse=True)
    print("  NMT categories by slope (MiB/h, 95 %; mean MiB): " +
          "; ".join(f"{c} {b:+.2f} +-{h:.2f} ({m:.1f})" for b, h, c, m in moves[:8]))

    # fds and threads move with what is connected when a sample is taken (a session's sidecar, the sampler's own
    # API connection, the JIT's compiler threads come and go): flat means no new high after the warm-up, whose
    # rounds already did everything the later ones do, and back to the warm-up's level when idle at the end.
    for key, slack in (("fds", 1), ("threads", 1)):
        warm_top = max(r[key] for r in warm) if warm else after[0][key]
        top = max(r[key] for r in after)
        idle = rows[-1][key]
        verdict = "flat" if top <= warm_top + slack and idle <= warm_top else "GREW"
        print(f"  {key:34s} highest in the warm-up {warm_top}, highest later {top} (slack {slack}), idle at the end"
              f" {idle}: {verdict}")
        if verdict != "flat":
            problems.append(key)

    clt_top = max(r["clt_entries"] for r in rows)
    rings_top = max(len(r["ring_set"].split("+")) for r in rows)
    clt_bound = 2 * args.workers * rings_top
    stale = foreign = None
    if args.counters:
        try:
            counters = json.load(open(args.counters))
            for key, value in counters.items():
                v = value.get("value") if isinstance(value, dict) else value
                if "clt_stale_expired" in key:
                    stale = (stale or 0) + int(v)
                if "clt_foreign_expired" in key:
                    foreign = (foreign or 0) + int(v)
        except (OSError, ValueError):
            pass
    verdict = "bounded" if clt_top <= clt_bound else "GREW"
    print(f"  clt_entries                        highest {clt_top} (bound {clt_bound}: 2 per rank per ring, "
          f"{rings_top} rings at most), at the end {rows[-1]['clt_entries']} after 65 s idle; "
          f"expired: {stale} replaced, {foreign} foreign: {verdict}")
    if verdict != "bounded":
        problems.append("clt_entries")
    print(f"  ctt_entries highest {max(r['ctt_entries'] for r in rows)}; jobs {min(r['jobs'] for r in rows)}.."
          f"{max(r['jobs'] for r in rows)}, at the end {rows[-1]['jobs']}")

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        panels = [("RSS less heap (MiB)", lambda r: (r["rss_kb"] - r["heap_committed_kb"]) / MIB),
                  ("anon RSS less heap (MiB)", lambda r: (r["rss_anon_kb"] - r["heap_committed_kb"]) / MIB
                   if r.get("rss_anon_kb") is not None else None),
                  ("file-backed RSS (MiB)", lambda r: r["rss_file_kb"] / MIB
                   if r.get("rss_file_kb") is not None else None),
                  ("off-heap less rings (MiB)", lambda r: r["offheap_less_rings_kb"] / MIB),
                  ("rings' aggregators (MiB)", lambda r: r["ring_memory_kb"] / MIB),
                  ("live heap after GC (MiB)", lambda r: r["heap_live_kb"] / MIB if r["heap_live_kb"] else None),
                  ("fds", lambda r: r["fds"]), ("threads", lambda r: r["threads"]),
                  ("CLT entries", lambda r: r["clt_entries"])]
        fig, axes = plt.subplots(len(panels), 1, figsize=(8, 1.8 * len(panels)), sharex=True)
        for ax, (label, f) in zip(axes, panels):
            pts = [((r["time"] - t0) / 60, f(r)) for r in rows if r["consistent"] == 1 and f(r) is not None]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], ".-", ms=2, lw=0.6)
            ax.set_ylabel(label, fontsize=7)
            ax.axvline((args.warm_end - t0) / 60, ls=":", color="grey")
        axes[-1].set_xlabel("minutes (dotted: end of warm-up)")
        fig.tight_layout()
        fig.savefig(args.png, dpi=90)
        print(f"  plot: {args.png}")
    except ImportError:
        print("  (no matplotlib: no plot)")
    if args.failures or problems:
        print(f"soak: FAILED ({args.failures} failed rounds; grew: {', '.join(problems) or 'nothing'})")
        return 1
    print("soak: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

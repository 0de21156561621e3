#!/usr/bin/python3
"""Box plots of the per-call times in scripts/bench-allreduce.sh CSV files: one box per (links, W, CPU load, mode),
over the calls after the warm-up (the row's warmup column, else the first call), so medians and spread of NetReduce,
gloo and the ring sit side by side. Rows that record a nice value show it.

usage: /usr/bin/python3 scripts/bench/plot_calls.py OUT.png FILE.csv [FILE.csv ...]
Needs python3-matplotlib (apt).
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLOURS = {"netreduce": "tab:blue", "gloo": "tab:orange", "ring": "tab:green", "ring-direct": "tab:olive"}


def main():
    out, files = sys.argv[1], sys.argv[2:]
    rows = [r for f in files for r in csv.DictReader(open(f)) if r.get("call_ms") and r["ok"] == "true"]
    labels, data, colours = [], [], []
    for r in rows:
        calls = [float(c) for c in r["call_ms"].split(";")][int(r.get("warmup") or 1):]
        links = "unshaped" if r["rate"] == "none" else r["rate"]
        load = ", CPU load" if r.get("cpu_load") == "1" else ""
        nice = f", nice {r['nice']}" if r.get("nice") else ""
        labels.append(f"{links} W={r['world']}{load}\n{r['mode']}{nice}")
        data.append(calls)
        colours.append(COLOURS.get(r["mode"], "grey"))
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(data)), 5))
    boxes = ax.boxplot(data, patch_artist=True, showfliers=True)
    for patch, colour in zip(boxes["boxes"], colours):
        patch.set_facecolor(colour)
        patch.set_alpha(0.6)
    ax.set_xticks(range(1, len(labels) + 1), labels, fontsize=7)
    ax.set_ylabel("time per all-reduce call (ms), calls after the warm-up")
    ax.set_title("64 MiB fp32 all-reduce on the namespace test bed, one run, 2 shared cores", fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()

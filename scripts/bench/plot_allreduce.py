#!/usr/bin/python3
"""Plot time per all-reduce vs tensor size from scripts/bench-allreduce.sh CSV files.

usage: /usr/bin/python3 scripts/bench/plot_allreduce.py OUT.png FILE.csv [FILE.csv ...]

One panel per link rate; one colour per W; solid = NetReduce, dashed = ring all-reduce through the appliance
(passed through), dash-dot = ring all-reduce with the redirect off (bridge only). On shaped panels the
dotted lines are the link-bound theory: NetReduce |U| / rate (independent of W), ring 2(W-1)/W |U| / rate.
Needs python3-matplotlib (apt).
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

UNITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}


def bits_per_second(rate):
    """tc rate ("200mbit", "5gbit") in bit/s, or None for "none" (unshaped)."""
    for unit, factor in UNITS.items():
        if rate.endswith(unit):
            return float(rate[: -len(unit)]) * factor
    return None


def main():
    out, files = sys.argv[1], sys.argv[2:]
    rows = [r for f in files for r in csv.DictReader(open(f))]
    rates = []
    for r in rows:
        if r["rate"] not in rates:
            rates.append(r["rate"])
    worlds = sorted({int(r["world"]) for r in rows})
    colours = dict(zip(worlds, ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]))
    columns = min(2, len(rates))
    grid_rows = (len(rates) + columns - 1) // columns
    fig, axes = plt.subplots(grid_rows, columns, figsize=(7 * columns, 5 * grid_rows), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[len(rates):]:
        ax.set_visible(False)
    for ax, rate in zip(flat, rates):
        for w in worlds:
            for mode, style in (("netreduce", "-"), ("ring", "--"), ("ring-direct", "-.")):
                pts = sorted((int(r["size_bytes"]), float(r["best_ms"])) for r in rows
                             if r["rate"] == rate and int(r["world"]) == w and r["mode"] == mode
                             and r["ok"] == "true")
                if pts:
                    ax.plot([p[0] / 2**20 for p in pts], [p[1] for p in pts], style, marker="o", markersize=3,
                            color=colours[w], label=f"W={w} {mode}")
        bps = bits_per_second(rate)
        if bps:
            sizes = sorted({int(r["size_bytes"]) for r in rows if r["rate"] == rate})
            ax.plot([s / 2**20 for s in sizes], [s * 8 / bps * 1e3 for s in sizes], ":", color="black",
                    label="theory NetReduce |U|/rate")
            wmax = max(worlds)
            ax.plot([s / 2**20 for s in sizes], [2 * (wmax - 1) / wmax * s * 8 / bps * 1e3 for s in sizes], ":",
                    color="grey", label=f"theory ring W={wmax} 2(W-1)/W|U|/rate")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"link rate: {'unshaped' if rate == 'none' else rate}")
        ax.set_xlabel("tensor size (MiB, fp32)")
        ax.grid(True, which="both", alpha=0.3)
        ax.set_ylabel("time per all-reduce (ms, best of 3)")
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle("NetReduce vs ring all-reduce, namespace test bed, 2 shared cores", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()

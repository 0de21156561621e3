"""Plot scripts/bench-shared.sh's CSV: per W, the short flows' p99 completion time per size and the probe's p99 for
each mode beside a job, the job's median call, and the long flow's share of the link.

    /usr/bin/python3 scripts/bench/plot_shared.py CSV PNG
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(argv) -> int:
    rows = list(csv.DictReader(open(argv[1])))
    worlds = sorted({r["world"] for r in rows}, key=int)
    beside = ["none", "gloo", "netreduce", "netreduce-ecn"]
    fig, axes = plt.subplots(len(worlds), 3, figsize=(15, 4 * len(worlds)), squeeze=False)
    for row, world in enumerate(worlds):
        by = {r["mode"]: r for r in rows if r["world"] == world}
        modes = [m for m in beside if m in by] + sorted((m for m in by if m.startswith("netreduce-ecn-min")),
                                                          key=lambda m: int(m[len("netreduce-ecn-min"):]))
        if not modes:
            # only the two-job modes ran: no other traffic beside a job, nothing for the first and third panels
            for col in (0, 2):
                axes[row][col].text(0.5, 0.5, "no mode with other traffic in this run", ha="center", va="center")
                axes[row][col].set_axis_off()
        else:
            plot_beside(axes[row], world, by, modes)
        ax = axes[row][1]
        jobs = [m for m in by if m != "none"]
        ax.bar(jobs, [float(by[m]["job_median_ms"] or 0) for m in jobs], color="tab:gray")
        ax.set_ylabel("job's median call, ms (64 MiB)")
        ax.set_title(f"W = {world}: the job's call")
        ax.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    fig.savefig(argv[2], dpi=80)
    return 0


def plot_beside(axes, world, by, modes) -> None:
    """The short flows' and the probe's p99 per mode, and the long flow's share."""
    ax = axes[0]
    keys = [("fct10k_p99_ms", "10 KB"), ("fct100k_p99_ms", "100 KB"), ("fct1m_p99_ms", "1 MB"),
            ("probe_p99_ms", "ICMP probe")]
    width = 0.8 / len(modes)
    for i, mode in enumerate(modes):
        values = [float(by[mode][k] or 0) for k, _ in keys]
        ax.bar([x + i * width for x in range(len(keys))], values, width, label=mode)
    ax.set_xticks([x + width * (len(modes) - 1) / 2 for x in range(len(keys))])
    ax.set_xticklabels([label for _, label in keys])
    ax.set_ylabel("p99 ms")
    ax.set_title(f"W = {world}: other traffic's p99 (flows at nice {by[modes[0]]['flow_nice']})")
    ax.legend()
    ax = axes[2]
    ax.bar(modes, [float(by[m]["long_share"] or 0) for m in modes], color="tab:green")
    ax.axhline(0.4, color="black", linestyle="--", linewidth=0.8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("long TCP flow's share of 1 Gbit/s")
    ax.set_title(f"W = {world}: one long flow beside the job")


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""Compare the sparse-training runs of `scripts/train.sh --model dlrm` (what scripts/train/dlrm_train.py wrote).

    /usr/bin/python3 scripts/train/dlrm_compare.py NETREDUCE.json GLOO_SPARSE.json GLOO_DENSE.json REFERENCE.json \
        [--sweep NETREDUCE2.json ...] [--warmup N] [--plot FILE] [--rate RATE]

Prints, per mode, the step time (the slowest rank's, median and p90 after the warm-up), the bytes each worker's eth0
sent per step (median), the loss and the held-out AUC and accuracy; for netreduce also the time of the sparse reduce,
the hot set, the fraction of the gradient bytes the appliance summed and where the reduce's time went; for every
netreduce run (the main one and --sweep: other hot budgets) how the hot set's size trades bytes against step time.

Checks (exit status 1 if any fails):
  * the netreduce run's loss equals the rank-order reference's at every step, bit for bit, and so do its final test
    predictions (dense parameters: the appliance sums in rank order; tables: netreduce.sparse's rank-order reference);
  * its loss curve agrees with each gloo run's within the fp32 reassociation tolerance, derived as compare.py
    derives it (4 x max(envelope of the reference orders, eps)); step 0 equal everywhere;
  * final test accuracies equal, or within the reference orders' own spread; every run's ranks end with identical
    parameters; no netreduce call fell back.
The issue's goals (netreduce at most 0.5 x gloo-dense's step time and 0.8 x gloo-sparse's) are reported, not checked.
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from compare import (DLRM_WARMUP, EPS, MARGIN, envelope, percentile, rdma_posted_per_step, rel,  # noqa: E402
                     warmup_steps)


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def slowest(run, key="step_ms"):
    return [max(rank[t] for rank in run[key]) for t in range(run["steps"])]


def per_worker(run, key):
    per_rank = run.get(key)
    if not per_rank:
        return None
    return [sum(rank[t] for rank in per_rank) / len(per_rank) for t in range(run["steps"])]


def summary(run, warmup):
    timed = slice(warmup_steps(run, warmup), run["steps"])
    ms = slowest(run)[timed]
    tx = per_worker(run, "tx_bytes")[timed]
    out = {"median": statistics.median(ms), "p90": percentile(ms, 0.9), "tx": statistics.median(tx),
           "loss_tail": statistics.fmean(run["loss"][-10:]), "final": run["final"],
           "setup": max(r["setup_s"] for r in run["ranks"]), "train": max(r["train_s"] for r in run["ranks"])}
    if run.get("sparse_ms"):
        out["sparse_ms"] = statistics.median(slowest(run, "sparse_ms")[timed])
    posted, _ = rdma_posted_per_step(run, timed)
    if posted is not None:
        out["posted"] = posted
    sparse = (run["ranks"][0] or {}).get("sparse")
    if sparse:
        steps = run["ranks"][0]["sparse_per_step"][timed]
        out["hot_rows"] = sum(sparse["hot_rows"].values())
        out["block_bytes"] = sparse["block_bytes"]
        out["fraction"] = statistics.fmean(r["appliance_fraction"] for r in
                                           (e["sparse"] for e in run["ranks"]))
        out["fraction_timed"] = (sum(s["hot_grad_bytes"] for s in steps) / sum(s["grad_bytes"] for s in steps)
                                 if steps else 0.0)
        out["cold_bytes"] = statistics.median(s["cold_bytes"] for s in steps)
        out["cold_padded"] = statistics.median(s["cold_padded_bytes"] for s in steps)
        out["grad_bytes"] = statistics.median(s["grad_bytes"] for s in steps)
        out["selections"] = sparse["selections"]
        out["seconds"] = {k: v / run["steps"] * 1e3 for k, v in sparse["seconds"].items()}
    return out


def table(head, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    for row in (head, *rows):
        print("  ".join(str(x).rjust(w) if i else str(x).ljust(w) for i, (x, w) in enumerate(zip(row, widths))))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("netreduce")
    ap.add_argument("gloo_sparse")
    ap.add_argument("gloo_dense")
    ap.add_argument("reference")
    ap.add_argument("--sweep", nargs="*", default=[], help="more netreduce runs (other hot budgets)")
    ap.add_argument("--pairs", nargs="*", default=[],
                    help="more runs of netreduce and gloo-sparse taken in turn, NETREDUCE.json:GLOO_SPARSE.json each")
    ap.add_argument("--warmup", type=int, default=DLRM_WARMUP)
    ap.add_argument("--plot")
    ap.add_argument("--rate", default="")
    ap.add_argument("--csv", help="write one line per run (mode or hot budget) to this CSV")
    args = ap.parse_args(argv)

    nr, gs, gd, ref = load(args.netreduce), load(args.gloo_sparse), load(args.gloo_dense), load(args.reference)
    sweep = [nr] + [load(p) for p in args.sweep]
    pairs = [tuple(load(p) for p in pair.split(":", 1)) for pair in args.pairs]
    steps, world = nr["steps"], nr["world"]
    runs = {"netreduce": nr, "gloo-sparse": gs, "gloo-dense": gd}
    for name, run in (list(runs.items()) + [("reference", ref)] + [(s["label"], s) for s in sweep[1:]] +
                      [(f"pair {i + 2}", r) for i, pair in enumerate(pairs) for r in pair]):
        if run["steps"] != steps or run["world"] != world:
            print(f"dlrm_compare: {name} differs in steps or workers", file=sys.stderr)
            return 1
    s = {name: summary(run, args.warmup) for name, run in runs.items()}
    print(f"model: {nr['model']}; {nr['dense_parameters']} dense parameters ({4 * nr['dense_parameters']} B of "
          f"gradient per step), {nr['table_parameters']} table parameters ({4 * nr['table_parameters'] / 1e6:.1f} MB "
          f"dense); {world} workers x {nr['batch_per_rank']} samples, {steps} steps, SGD lr {nr['lr']}, seed "
          f"{nr['seed']}; step times: the slowest rank's, steps {args.warmup}..{steps - 1}; tx: bytes each "
          f"worker's eth0 sent per step (median over steps, mean over workers)")
    rows = []
    for name, x in s.items():
        f = x["final"]
        rows.append((name, f"{x['median']:.1f}", f"{x['p90']:.1f}",
                     f"{x['sparse_ms']:.1f}" if "sparse_ms" in x else "-", f"{x['tx'] / 1e3:.0f}",
                     f"{x['loss_tail']:.4f}", f"{f['loss']:.4f}", f"{f['auc']:.4f}",
                     f"{f['accuracy']:.4f}", f"{x['setup']:.1f}", f"{x['train']:.1f}"))
    table(("mode", "step ms median", "p90", "sparse reduce ms", "tx kB/worker/step", "train loss (last 10)",
           "test loss", "test AUC", "test accuracy", "set-up s", "training s"), rows)
    x = s["netreduce"]
    print(f"netreduce: hot set {x['hot_rows']} rows ({x['block_bytes']} B block per step), fraction of the gradient "
          f"bytes summed by the appliance: {x['fraction']:.3f} over all steps, {x['fraction_timed']:.3f} after the "
          f"warm-up; per step (medians): {x['grad_bytes'] / 1e3:.0f} kB of coalesced rows, cold rows put in the "
          f"exchange {x['cold_bytes'] / 1e3:.0f} kB (padded to the longest rank's: {x['cold_padded'] / 1e3:.0f} "
          f"kB), RDMA posted {x.get('posted', 0) / 1e3:.0f} kB")
    print("  reduce's time per step (rank 0, ms, mean over all steps): " +
          ", ".join(f"{k} {v:.2f}" for k, v in x["seconds"].items()))
    for sel in x["selections"]:
        print(f"  selection at step {sel['step']}: {sel['hot_rows']} hot rows, covering {sel['coverage']:.3f} of "
              f"{sel['counted_updates']} counted updates ({sel['counted_rank_steps']} rank-steps), "
              f"{'replaced' if sel['changed'] else 'kept'} (new {sel['coverage_new']:.3f}, old "
              f"{sel['coverage_old']:.3f})")
    r_dense = x["median"] / s["gloo-dense"]["median"]
    r_sparse = x["median"] / s["gloo-sparse"]["median"]
    print(f"median step time netreduce / gloo-dense = {r_dense:.2f} (goal <= 0.5: "
          f"{'met' if r_dense <= 0.5 else 'not met'}), netreduce / gloo-sparse = {r_sparse:.2f} (goal <= 0.8: "
          f"{'met' if r_sparse <= 0.8 else 'not met'})")

    if args.pairs:
        # The same pair of modes again, in turn: the load drifts between runs, so the median of the pairs' ratios
        # says more than one pair.
        pair_rows, ratios, whole = [], [], []
        for i, (a, b) in enumerate([(nr, gs)] + pairs):
            sa, sb = summary(a, args.warmup), summary(b, args.warmup)
            ratios.append(sa["median"] / sb["median"])
            whole.append(sa["train"] / sb["train"])
            pair_rows.append((str(i + 1), f"{sa['median']:.1f}", f"{sa['p90']:.1f}", f"{sb['median']:.1f}",
                              f"{sb['p90']:.1f}", f"{ratios[-1]:.2f}", f"{sa['train']:.1f}", f"{sb['train']:.1f}",
                              f"{whole[-1]:.2f}"))
        print()
        print("netreduce and gloo-sparse again, in turn (step ms after the warm-up; training s: all steps, warm-up "
              "included):")
        table(("pair", "netreduce median", "p90", "gloo-sparse median", "p90", "ratio", "netreduce training s",
               "gloo-sparse training s", "ratio"), pair_rows)
        mid = statistics.median(ratios)
        print(f"median over {len(ratios)} pairs: netreduce / gloo-sparse = {mid:.2f} (range {min(ratios):.2f}-"
              f"{max(ratios):.2f}; goal <= 0.8: {'met' if mid <= 0.8 else 'not met'}); whole training, warm-up "
              f"included: {statistics.median(whole):.2f} ({min(whole):.2f}-{max(whole):.2f})")

    sweep_rows = []
    ranked = []
    for run in sweep:
        y = summary(run, args.warmup)
        ranked.append((run, y))
        exact = run["loss"] == ref["runs"][0]["loss"]
        sweep_rows.append((run["label"] or "netreduce", y["hot_rows"], y["block_bytes"], f"{y['fraction_timed']:.3f}",
                           f"{y['tx'] / 1e3:.0f}", f"{y['median']:.1f}", f"{y['p90']:.1f}", f"{y['sparse_ms']:.1f}",
                           "yes" if exact else "NO"))
    if len(sweep) > 1:
        print()
        print("hot set size against bytes and step time (netreduce runs; gloo-sparse: "
              f"{s['gloo-sparse']['tx'] / 1e3:.0f} kB, {s['gloo-sparse']['median']:.1f} ms):")
        table(("run", "hot rows", "block B", "appliance share", "tx kB/worker/step", "step ms median", "p90",
               "sparse reduce ms", "bit-exact"), sweep_rows)

    if args.csv:
        write_csv(args.csv, runs, s, ranked, ref, args.warmup)
        print(f"csv: {args.csv}")

    # -- checks ------------------------------------------------------------------------------------------------
    failures = []
    env = envelope(ref)
    tol = [MARGIN * max(e, EPS) for e in env]
    rank_order = ref["runs"][0]
    print()
    print("reference (one process, the same training, gradients summed in fixed fp32 orders):")
    for run in ref["runs"]:
        d = max(rel(a, b) for a, b in zip(run["loss"], rank_order["loss"]))
        print(f"  {run['name']:14s} {run['order']:12s} final loss {run['loss'][-1]:.9f}  AUC {run['final']['auc']:.4f}"
              f"  accuracy {run['final']['accuracy']:.4f}  max |diff| to rank order {d / EPS:.1f} eps")
    print(f"tolerance: |L_nr - L_gloo| / L_gloo <= {MARGIN:g} x max(envelope, eps): {tol[0] / EPS:.0f} eps at step 0 "
          f".. {tol[-1] / EPS:.1f} eps at the last step")
    for run in sweep + [a for a, _ in pairs]:
        name = run["label"] or "netreduce"
        if run["loss"] != rank_order["loss"]:
            first = next(t for t in range(steps) if run["loss"][t] != rank_order["loss"][t])
            failures.append(f"netreduce ({name}) differs from the rank-order reference from step {first} on")
        if run["final"]["predictions_sha1"] != rank_order["final"]["predictions_sha1"]:
            failures.append(f"netreduce ({name}): final test predictions differ from the rank-order reference's")
    if not failures:
        print(f"netreduce equals the rank-order reference bit for bit: every step's loss and the final predictions "
              f"({len(sweep) + len(pairs)} run(s))")
    ref_correct = [r["final"]["correct"] for r in ref["runs"]]
    allowed = max(ref_correct) - min(ref_correct)
    for name in ("gloo-sparse", "gloo-dense"):
        other = runs[name]
        diff = [rel(a, b) for a, b in zip(nr["loss"], other["loss"])]
        over = [t for t in range(steps) if diff[t] > tol[t]]
        print(f"netreduce vs {name}: largest |diff| {max(diff) / EPS:.1f} eps (step {diff.index(max(diff))}); "
              f"{'within' if not over else 'BEYOND'} the tolerance; same as the rank-order reference: "
              f"{other['loss'] == rank_order['loss']}")
        if over:
            failures.append(f"netreduce vs {name}: loss differs beyond the tolerance at {len(over)} step(s), first "
                            f"{over[0]}: {diff[over[0]] / EPS:.1f} eps > {tol[over[0]] / EPS:.1f} eps")
        if other["loss"][0] != nr["loss"][0]:
            failures.append(f"{name}: step 0 loss differs from netreduce's (not the same start)")
        if abs(other["final"]["correct"] - nr["final"]["correct"]) > allowed:
            failures.append(f"final accuracy: netreduce {nr['final']['correct']}, {name} {other['final']['correct']} "
                            f"of {nr['final']['total']} (reference orders' spread {allowed})")
    for name, run in (list(runs.items()) + [(r["label"], r) for r in sweep[1:]] +
                      [(f"pair {i + 2} {r['mode']}", r) for i, pair in enumerate(pairs) for r in pair]):
        if not run["params_identical"]:
            failures.append(f"{name}: the ranks ended with different parameters")
        for rank, extra in enumerate(run["ranks"]):
            stats = extra.get("stats") or {}
            if stats.get("fallback_calls") or stats.get("broken"):
                failures.append(f"{name} rank {rank}: {stats.get('fallback_calls')} fallback calls")
    retx = sum((e.get("stats") or {}).get("transport", {}).get("retransmittedPackets", 0) for e in nr["ranks"])
    print(f"netreduce sessions: calls per rank {[(e.get('stats') or {}).get('calls') for e in nr['ranks']]}, "
          f"retransmitted packets {retx}; parameters identical across ranks: "
          + ", ".join(f"{n} {r['params_identical']}" for n, r in runs.items()))
    if args.plot:
        try:
            plot(args.plot, runs, ranked, s, args.warmup, args.rate)
            print(f"plot: {args.plot}")
        except ImportError as error:
            print(f"no plot ({error})")
    for failure in failures:
        print("FAIL: " + failure)
    print("RESULT: " + ("netreduce hot/cold equals the rank-order reference bit for bit and agrees with gloo "
                        "(sparse and dense) within the fp32 reassociation tolerance" if not failures else "FAILED"))
    return 0 if not failures else 1


def write_csv(path, runs, s, ranked, ref, warmup):
    import csv

    with open(path, "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(["run", "steps", "warmup", "step_ms_median", "step_ms_p90", "sparse_reduce_ms_median",
                      "tx_bytes_per_worker_step", "hot_rows", "block_bytes", "appliance_share", "final_train_loss",
                      "test_loss", "test_auc", "test_accuracy", "bit_exact_rank_order"])
        rank_order = ref["runs"][0]["loss"]
        rows = [(name, run, s[name]) for name, run in runs.items() if name != "netreduce"]
        rows += [(run["label"] or "netreduce", run, y) for run, y in ranked]
        for name, run, y in rows:
            out.writerow([f"netreduce ({name})" if run["mode"] == "netreduce" else name, run["steps"], warmup,
                          f"{y['median']:.2f}", f"{y['p90']:.2f}",
                          f"{y['sparse_ms']:.2f}" if "sparse_ms" in y else "", f"{y['tx']:.0f}",
                          y.get("hot_rows", ""), y.get("block_bytes", ""),
                          f"{y['fraction_timed']:.4f}" if "fraction_timed" in y else "", f"{y['loss_tail']:.6f}",
                          f"{y['final']['loss']:.6f}", f"{y['final']['auc']:.4f}", f"{y['final']['accuracy']:.4f}",
                          run["loss"] == rank_order])


def plot(path, runs, ranked, s, warmup, rate):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"netreduce": "tab:blue", "gloo-sparse": "tab:orange", "gloo-dense": "tab:red"}
    fig, axes = plt.subplots(2, 2, figsize=(12, 8.5))
    ax = axes[0][0]
    for name, run in runs.items():
        width = 3.5 if name != "netreduce" else 1.2
        ax.plot(run["loss"], color=colors[name], lw=width, alpha=0.5 if name != "netreduce" else 1.0, label=name)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (mean over ranks)")
    ax.set_title("training loss per step")
    ax.legend()
    ax.grid(alpha=0.3)

    ax = axes[0][1]
    for name, run in runs.items():
        ax.plot(slowest(run), color=colors[name], lw=1.0,
                label=f"{name}: median {s[name]['median']:.1f} ms, p90 {s[name]['p90']:.1f}")
    ax.axvspan(-0.5, warmup - 0.5, color="gray", alpha=0.15, label="warm-up (left out)")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("ms (slowest rank)")
    ax.set_title("time per step")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)

    ax = axes[1][0]
    names = list(runs)
    ax.bar(names, [s[n]["tx"] / 1e3 for n in names], color=[colors[n] for n in names])
    for i, n in enumerate(names):
        ax.text(i, s[n]["tx"] / 1e3, f"{s[n]['tx'] / 1e3:.0f} kB", ha="center", va="bottom", fontsize=9)
    ax.set_yscale("log")
    ax.set_ylabel("kB each worker sent per step (median)")
    ax.set_title("bytes per worker per step")
    ax.grid(alpha=0.3, axis="y")

    ax = axes[1][1]
    points = sorted(((y["block_bytes"], y["median"], y["tx"]) for _, y in ranked))
    ax.plot([p[0] / 1e3 for p in points], [p[1] for p in points], "o-", color="tab:blue", label="step ms (median)")
    ax.axhline(s["gloo-sparse"]["median"], color="tab:orange", ls="--", label="gloo-sparse step ms")
    ax.set_xlabel("hot block per step, kB")
    ax.set_ylabel("ms")
    ax2 = ax.twinx()
    ax2.plot([p[0] / 1e3 for p in points], [p[2] / 1e3 for p in points], "s:", color="tab:green",
             label="tx kB/worker/step")
    ax2.axhline(s["gloo-sparse"]["tx"] / 1e3, color="tab:green", ls="--", lw=0.8, label="gloo-sparse tx")
    ax2.set_ylabel("kB per worker per step")
    ax.set_title("hot set size: bytes against step time")
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], fontsize=8)
    ax.grid(alpha=0.3)
    fig.suptitle(f"{runs['netreduce']['model']}\n{runs['netreduce']['world']} workers"
                 f"{', ' + rate + ' links' if rate else ''}: netreduce hot/cold vs gloo sparse vs gloo dense",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())

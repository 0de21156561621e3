"""Compare a netreduce DDP run with a gloo DDP run of the same training (scripts/train.sh runs it).

    /usr/bin/python3 scripts/train/compare.py NETREDUCE.json GLOO.json REFERENCE.json [--warmup N] [--plot FILE]

Inputs are what scripts/train/ddp_train.py writes: rank 0's JSON of each DDP run, and the reference JSON (the same
training simulated in one process, the gradients summed in several fixed fp32 orders).

The tolerance. Both runs start from the same parameters and see the same batches, so they differ only in how the
per-rank gradients are summed: the appliance adds them in rank order, ((g0 + g1) + g2) + g3, gloo's ring adds each
segment of the bucket starting at a different rank. fp32 addition is not associative, so the averaged gradients
differ in the last bit here and there, and training carries those differences on and amplifies them step by step.
How much depends on the model and data, so it is measured rather than guessed: the reference run trains with every
rotation of the rank order, the reversed order and a pairwise tree, and envelope(t) is the largest relative loss
difference between any two of those orders at any step up to t. The check is

    |L_netreduce(t) - L_gloo(t)| / L_gloo(t)  <=  4 * max(envelope(t), eps_fp32)        for every step t

(eps_fp32 = 2^-23; the factor 4 is the margin for gloo's order being yet another order, a mixture of rotations,
and, when W is not a power of two, for DDP's default dividing each rank's gradient by W before the sum where the hook
divides the sum). With 2 workers there is nothing to reassociate (a + b == b + a in IEEE arithmetic, and halving is
exact), the envelope is 0, and the curves must agree bit for bit. Step 0's loss comes before any all-reduce: it must be equal.
The final test accuracies must be equal, unless the reference orders themselves end with different accuracies, in
which case the difference may be at most their spread (printed when it happens).

Also checked: each run's ranks end with identical parameters; the netreduce run had no fallback calls. Reported, not
checked: whether the netreduce curve equals the rank-order reference bit for bit (it should: same sums, same order).

Exit status: 0 when every check passes, 1 otherwise.
"""
import argparse
import json
import statistics
import sys

EPS = 2.0 ** -23  # float32 machine epsilon
MARGIN = 4.0


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def percentile(values, q):
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def rel(a, b):
    return abs(a - b) / abs(b) if b else abs(a - b)


def envelope(reference):
    runs = reference["runs"]
    steps = len(runs[0]["loss"])
    spread, running = [], 0.0
    for t in range(steps):
        values = [r["loss"][t] for r in runs]
        base = runs[0]["loss"][t]
        running = max(running, (max(values) - min(values)) / abs(base) if base else 0.0)
        spread.append(running)
    return spread


def step_time(run):
    """Per step, the slowest rank's time (the ranks wait for each other in the all-reduce)."""
    return [max(rank[t] for rank in run["step_ms"]) for t in range(run["steps"])]


def bytes_per_worker(run, key):
    per_rank = run.get(key)
    if not per_rank:
        return None
    return [sum(rank[t] for rank in per_rank) / len(per_rank) for t in range(run["steps"])]


DLRM_WARMUP = 20  # steps a DLRM run's comparison leaves out by default (its runs are one epoch)


def warmup_steps(run, warmup=None):
    """Steps a comparison leaves out of the step times: ``warmup`` when given, else one epoch (a DLRM run,
    ``scripts/train/dlrm_train.py``'s, which has ``table_parameters``: ``DLRM_WARMUP``); never every step. The one
    rule for compare.py, dlrm_compare.py and train.sh's CPU report."""
    if warmup is None:
        warmup = DLRM_WARMUP if "table_parameters" in run else run["steps_per_epoch"]
    return min(warmup, run["steps"] - 1)


def rdma_posted_per_step(run, timed):
    """RDMA payload each worker posted per step, and how it was taken: the median over the timed steps where the
    sidecars were asked after every step (``--stats-every-step``), else the mean over every step of the counts read
    before the first step and after the last; (None, None) in a run with neither (gloo)."""
    posted = bytes_per_worker(run, "rdma_bytes_posted")
    if posted:
        return statistics.median(posted[timed]), "median over the timed steps"
    totals = [r.get("rdma_bytes_posted_total") for r in run.get("ranks", []) if r]
    if totals and None not in totals:
        return statistics.fmean(totals) / run["steps"], "read before the first and after the last step; mean over every step"
    return None, None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("netreduce")
    ap.add_argument("gloo")
    ap.add_argument("reference")
    ap.add_argument("--warmup", type=int, default=None,
                    help="steps left out of the step-time statistics (default: the first epoch)")
    ap.add_argument("--plot", help="PNG to write")
    ap.add_argument("--appliance-lost", action="store_true",
                    help="the appliance was killed during the netreduce run: every rank must have fallen back and "
                         "come back (fallback calls and a recovery on each), instead of no fallback at all")
    ap.add_argument("--rate", default="", help="link rate, for the plot's title")
    args = ap.parse_args(argv)

    nr, gl, ref = load(args.netreduce), load(args.gloo), load(args.reference)
    steps, world = nr["steps"], nr["world"]
    if gl["steps"] != steps or ref["steps"] != steps or gl["world"] != world or ref["world"] != world:
        print("compare: the runs differ in steps or workers", file=sys.stderr)
        return 1
    env = envelope(ref)
    reassociates = world > 2 or any(e > 0 for e in env)
    tol = [MARGIN * max(e, EPS) if reassociates else 0.0 for e in env]
    diff = [rel(a, b) for a, b in zip(nr["loss"], gl["loss"])]
    rank_order = ref["runs"][0]
    exact_vs_rank_order = nr["loss"] == rank_order["loss"]
    ms_nr, ms_gl = step_time(nr), step_time(gl)
    tx_nr, tx_gl = bytes_per_worker(nr, "tx_bytes"), bytes_per_worker(gl, "tx_bytes")

    print(f"loss per step (mean over {world} ranks), step time (slowest rank), bytes each worker's eth0 sent "
          f"(mean over ranks); eps = 2^-23")
    head = ("step", "epoch", "loss netreduce", "loss gloo", "|diff|/eps", "tol/eps", "ms nr", "ms gloo",
            "tx nr", "tx gloo")
    rows = []
    per_epoch = nr["steps_per_epoch"]
    for t in range(steps):
        rows.append((t, t // per_epoch, f"{nr['loss'][t]:.9f}", f"{gl['loss'][t]:.9f}",
                     f"{diff[t] / EPS:.1f}" if diff[t] else "0",
                     f"{tol[t] / EPS:.1f}", f"{ms_nr[t]:.1f}", f"{ms_gl[t]:.1f}", f"{tx_nr[t]:.0f}",
                     f"{tx_gl[t]:.0f}"))
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    for row in (head, *rows):
        print("  ".join(str(x).rjust(w) for x, w in zip(row, widths)))

    timed = slice(warmup_steps(nr, args.warmup), steps)
    grad = nr["grad_bytes"]

    def summary(run, ms, tx):
        t = ms[timed]
        return {"median": statistics.median(t), "p90": percentile(t, 0.9), "mean": statistics.fmean(t),
                "tx": statistics.median(tx[timed]), "tx_total": sum(tx) / steps,
                "acc": run["final"]["accuracy"], "correct": run["final"]["correct"], "total": run["final"]["total"],
                "setup": max(r["setup_s"] for r in run["ranks"]), "train": max(r["train_s"] for r in run["ranks"])}

    s_nr, s_gl = summary(nr, ms_nr, tx_nr), summary(gl, ms_gl, tx_gl)
    print()
    print(f"model: {nr['model']}, {nr['parameters']} fp32 parameters = {grad} gradient bytes per step; "
          f"{world} workers x {nr['batch_per_rank']} samples, {steps} steps ({per_epoch} per epoch), "
          f"SGD lr {nr['lr']} momentum {nr['momentum']}, seed {nr['seed']}")
    head = ("mode", "step ms median", "p90", "mean", "tx bytes/worker/step", "x gradient", "test accuracy",
            "set-up s", "training s")
    rows = []
    for name, s in (("netreduce", s_nr), ("gloo", s_gl)):
        rows.append((name, f"{s['median']:.1f}", f"{s['p90']:.1f}", f"{s['mean']:.1f}", f"{s['tx']:.0f}",
                     f"{s['tx'] / grad:.3f}", f"{s['acc']:.4f} ({s['correct']}/{s['total']})", f"{s['setup']:.1f}",
                     f"{s['train']:.1f}"))
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    for row in (head, *rows):
        print("  ".join(str(x).rjust(w) if i else str(x).ljust(w) for i, (x, w) in enumerate(zip(row, widths))))
    print(f"step times leave out the first {timed.start} step(s) as warm-up (the sidecar's JIT, DDP's bucket rebuild; "
          f"median over every step: netreduce {statistics.median(ms_nr):.1f} ms, gloo {statistics.median(ms_gl):.1f} ms). "
          f"tx bytes: /sys/class/net/eth0/statistics/tx_bytes deltas around each step, frames with headers, median "
          f"over steps; a ring all-reduce sends 2(W-1)/W = {2 * (world - 1) / world:.2f} x the gradient plus "
          f"headers, NetReduce 1 x plus headers")
    posted, how = rdma_posted_per_step(nr, timed)
    if posted is not None:
        print(f"netreduce RDMA payload posted per worker per step (sidecar's bytesPosted, {how}): "
              f"{posted:.0f} = {posted / grad:.3f} x gradient")
    speed = s_gl["median"] / s_nr["median"] if s_nr["median"] else float("nan")
    print(f"median step time: netreduce {s_nr['median']:.1f} ms, gloo {s_gl['median']:.1f} ms "
          f"(gloo / netreduce = {speed:.2f})")

    # -- checks ----------------------------------------------------------------------------------------------
    failures = []
    print()
    print("reference (one process, the same training, gradients summed in fixed fp32 orders):")
    for run in ref["runs"]:
        d = max(rel(a, b) for a, b in zip(run["loss"], rank_order["loss"]))
        print(f"  {run['name']:14s} {run['order']:12s} final loss {run['loss'][-1]:.9f}  accuracy "
              f"{run['final']['accuracy']:.4f}  max |diff| to rank order {d / EPS:.1f} eps")
    print(f"envelope (largest relative spread between orders so far): step {steps // 4}: {env[steps // 4] / EPS:.1f} "
          f"eps, step {steps // 2}: {env[steps // 2] / EPS:.1f} eps, last step: {env[-1] / EPS:.1f} eps")
    if reassociates:
        print(f"tolerance: |L_nr - L_gloo| / L_gloo <= {MARGIN:g} x max(envelope(t), eps) "
              f"= {tol[0] / EPS:.0f} eps at step 0 .. {tol[-1] / EPS:.1f} eps ({tol[-1]:.2e}) at the last step")
    else:
        print("tolerance: 0 (2 workers: a + b == b + a, nothing to reassociate; the curves must be identical)")

    worst = max(range(steps), key=lambda t: diff[t] / tol[t] if tol[t] else (float("inf") if diff[t] else 0.0))
    print(f"netreduce vs gloo: largest |diff| {max(diff) / EPS:.1f} eps (step {diff.index(max(diff))}); "
          f"closest to the tolerance at step {worst}: {diff[worst] / EPS:.1f} eps of {tol[worst] / EPS:.1f} eps")
    over = [t for t in range(steps) if diff[t] > tol[t]]
    if over:
        failures.append(f"loss curves differ beyond the fp32 reassociation tolerance at {len(over)} step(s), first "
                        f"step {over[0]}: {diff[over[0]] / EPS:.1f} eps > {tol[over[0]] / EPS:.1f} eps")
    if nr["loss"][0] != gl["loss"][0]:
        failures.append(f"step 0 losses differ ({nr['loss'][0]!r} vs {gl['loss'][0]!r}), before any all-reduce: "
                        f"the runs did not start from the same parameters and batches")
    ref_correct = [r["final"]["correct"] for r in ref["runs"]]
    allowed = max(ref_correct) - min(ref_correct)
    if abs(s_nr["correct"] - s_gl["correct"]) > allowed:
        failures.append(f"final accuracies differ: netreduce {s_nr['correct']}/{s_nr['total']}, gloo "
                        f"{s_gl['correct']}/{s_gl['total']}" + (f" (reference orders spread {allowed})" if allowed else ""))
    elif allowed:
        print(f"note: the reference orders end with accuracies {sorted(set(ref_correct))}: the training is chaotic "
              f"enough here that reassociation alone flips test predictions; allowed difference {allowed}")
    for name, run in (("netreduce", nr), ("gloo", gl)):
        if not run["params_identical"]:
            failures.append(f"{name}: the ranks ended with different parameters")
    for rank, extra in enumerate(nr["ranks"]):
        stats = extra.get("stats") or {}
        if args.appliance_lost:
            if not stats.get("fallback_calls") or not stats.get("recoveries") or stats.get("broken"):
                hint = ""
                if stats.get("fallback_calls") and not stats.get("recoveries"):
                    # the usual cause: the steps left after the kill took less time than the daemon was down plus
                    # the sessions' recover_after, e.g. --kill-appliance 30:3 with the default 110 steps
                    hint = ("; did the training end before the daemon came back? --kill-appliance STEP:DOWN needs "
                            "more than DOWN + 2 s of steps after STEP (more --epochs)")
                failures.append(f"netreduce rank {rank}: expected to fall back and come back to the appliance: "
                                f"{stats.get('fallback_calls')} fallback calls, {stats.get('recoveries')} "
                                f"recoveries, ended {'on the fallback' if stats.get('broken') else 'on the appliance'}"
                                f"{hint}")
        elif stats.get("fallback_calls") or stats.get("broken"):
            failures.append(f"netreduce rank {rank}: {stats.get('fallback_calls')} fallback calls ({stats.get('broken')})")
    retx = sum((e.get("stats") or {}).get("transport", {}).get("retransmittedPackets", 0) for e in nr["ranks"])
    timeouts = sum((e.get("stats") or {}).get("transport", {}).get("timeouts", 0) for e in nr["ranks"])
    calls = [(e.get("stats") or {}).get("calls", 0) for e in nr["ranks"]]
    fallbacks = [(e.get("stats") or {}).get("fallback_calls", 0) for e in nr["ranks"]]
    print(f"netreduce sessions: calls per rank {calls}, fallback calls {fallbacks} "
          f"({'some and a recovery required' if args.appliance_lost else '0 required'}), retransmitted packets {retx}, "
          f"timeouts {timeouts}; ranks' parameters identical: netreduce {nr['params_identical']}, "
          f"gloo {gl['params_identical']}")
    if exact_vs_rank_order:
        print("netreduce equals the rank-order reference bit for bit at every step (the appliance sums in rank order)")
    else:
        first = next(t for t in range(steps) if nr["loss"][t] != rank_order["loss"][t])
        print(f"note: netreduce differs from the rank-order reference from step {first} on (max "
              f"{max(rel(a, b) for a, b in zip(nr['loss'], rank_order['loss'])) / EPS:.1f} eps); expected bit for "
              f"bit equal")
    print(f"final test accuracy: netreduce {s_nr['acc']:.4f} ({s_nr['correct']}/{s_nr['total']}), gloo "
          f"{s_gl['acc']:.4f} ({s_gl['correct']}/{s_gl['total']}); same predictions: "
          f"{nr['final']['predictions_sha1'] == gl['final']['predictions_sha1']}")

    if args.plot:
        plot(args.plot, nr, gl, env, tol, diff, ms_nr, ms_gl, s_nr, s_gl, args.rate, timed.start)
        print(f"plot: {args.plot}")
    for failure in failures:
        print("FAIL: " + failure)
    print("RESULT: " + ("the netreduce and gloo runs agree within the fp32 reassociation tolerance, same accuracy"
                        if not failures else "FAILED"))
    return 0 if not failures else 1


def plot(path, nr, gl, env, tol, diff, ms_nr, ms_gl, s_nr, s_gl, rate, warmup):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = list(range(nr["steps"]))
    fig, axes = plt.subplots(2, 2, figsize=(12, 8.5))
    ax = axes[0][0]
    ax.plot(steps, gl["loss"], color="tab:orange", lw=3.5, alpha=0.5, label="gloo (DDP default all-reduce)")
    ax.plot(steps, nr["loss"], color="tab:blue", lw=1.2, label="netreduce (appliance)")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (mean over ranks)")
    ax.set_title("training loss per step")
    ax.legend()
    ax.grid(alpha=0.3)

    ax = axes[0][1]
    floor = EPS / 16
    ax.plot([t for t in steps if diff[t]], [d for d in diff if d], "o", ms=3.5, color="tab:purple",
            label="|L netreduce - L gloo| / L gloo")
    ax.plot([t for t in steps if not diff[t]], [floor] * sum(1 for d in diff if not d), "x", ms=4,
            color="tab:green", label="bit-for-bit equal (drawn at eps/16)")
    ax.plot(steps, [max(e, floor) for e in env], color="tab:gray", lw=1,
            label="reassociation envelope (reference orders)")
    if any(tol):
        ax.plot(steps, tol, color="tab:red", lw=1.5, ls="--", label="tolerance 4 x max(envelope, eps)")
    ax.axhline(EPS, color="black", lw=0.6, ls=":")
    ax.text(0, EPS * 1.15, "fp32 eps", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylim(floor / 2, max(max(tol), max(diff), max(env), EPS) * 60)  # room above the data for the legend
    ax.set_xlabel("step")
    ax.set_ylabel("relative difference of the loss")
    ax.set_title("netreduce vs gloo: loss difference and fp32 tolerance")
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(alpha=0.3)

    ax = axes[1][0]
    for run, color, name, width in ((gl, "tab:orange", "gloo", 3.5), (nr, "tab:blue", "netreduce", 1.2)):
        xs = [e["step"] for e in run["epochs"]]
        ys = [100 * e["accuracy"] for e in run["epochs"]]
        ax.plot(xs, ys, "o-", color=color, lw=width, ms=7 if name == "gloo" else 4,
                alpha=0.5 if name == "gloo" else 1.0, label=f"{name}: final {ys[-1]:.2f} %")
    ax.set_xlabel("step (end of each epoch)")
    ax.set_ylabel(f"test accuracy, % of {nr['test_samples']}")
    ax.set_title("held-out test accuracy")
    ax.legend(loc="lower right")
    ax.grid(alpha=0.3)

    ax = axes[1][1]
    ax.plot(steps, ms_gl, color="tab:orange", lw=1.2, label=f"gloo: median {s_gl['median']:.1f} ms")
    ax.plot(steps, ms_nr, color="tab:blue", lw=1.2, label=f"netreduce: median {s_nr['median']:.1f} ms")
    if warmup:
        ax.axvspan(-0.5, warmup - 0.5, color="gray", alpha=0.15, label="warm-up (left out of the median)")
    top = max(percentile(ms_gl, 0.98), percentile(ms_nr, 0.98)) * 1.3
    ax.set_ylim(0, top)
    ax.set_xlabel("step")
    ax.set_ylabel("ms (slowest rank)")
    ax.set_title(f"time per step; tx/worker/step: netreduce {s_nr['tx'] / 1024:.0f} KiB, "
                 f"gloo {s_gl['tx'] / 1024:.0f} KiB", fontsize=10)
    ax.legend(fontsize=8, loc="upper right")
    ax.grid(alpha=0.3)

    fig.suptitle(f"DDP on sklearn digits (8x8), {nr['model']}: {nr['world']} workers"
                 f"{', ' + rate + ' links' if rate else ''}, {nr['steps']} steps, through the netreduce appliance "
                 f"vs gloo", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())

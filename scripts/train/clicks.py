"""Synthetic click data for a DLRM-style model, seeded (no public click log is reachable here).

    /usr/bin/python3 scripts/train/clicks.py [--samples N] [--tables T] [--rows R] [--pooling L] [--zipf S] [--seed X]

prints what a global batch of the data looks like to the hot/cold split: per table, the distinct rows a rank's
batch touches, how many of those the most frequent rows hold, and the expected bytes of each way of summing them.

A sample has 13 dense features (standard normal) and, per table, a bag of `pooling` categorical values. The values
of table t follow a Zipf law over its rows: the value of popularity rank k (1-based) is drawn with probability
k^-s / H(R, s), and popularity ranks are mapped to rows by a seeded permutation of the table (so the hot rows are
scattered over the table, as hashed ids are). The label is a click drawn from a hidden "teacher": every row of every
table has a hidden weight (normal, 0.6), the dense features a hidden direction, and
P(click) = sigmoid(bias + dense . v + sum over tables of the mean hidden weight of the sample's bag), with the bias set
so that about a quarter of the samples are clicks. Everything is drawn from torch generators seeded with `seed`, so
every rank and every mode of a run sees the same data.
"""
import argparse
import math
import sys

DENSE_FEATURES = 13


class ClickData:
    """The whole data set of a run, in memory: `dense` [N, 13] fp32, `sparse` [T, N, L] int64 rows, `labels` [N]
    fp32 (0 or 1). The first `n_test` samples are the test set, the rest the training set."""

    def __init__(self, samples, *, tables=4, rows=100_000, pooling=8, zipf=1.1, seed=7, n_test=4096):
        import torch

        self.tables, self.rows, self.pooling, self.zipf, self.seed = tables, rows, pooling, zipf, seed
        total = samples + n_test
        g = torch.Generator().manual_seed(seed)
        weights = torch.arange(1, rows + 1, dtype=torch.float64).pow(-zipf)
        cdf = torch.cumsum(weights / weights.sum(), 0)
        cdf[-1] = 1.0
        self.dense = torch.randn(total, DENSE_FEATURES, generator=g)
        self.permutations = [torch.randperm(rows, generator=g) for _ in range(tables)]
        hidden = [torch.randn(rows, generator=g) * 0.6 for _ in range(tables)]
        direction = torch.randn(DENSE_FEATURES, generator=g) * 0.3
        sparse = []
        logit = self.dense @ direction
        for t in range(tables):
            u = torch.rand(total * pooling, generator=g, dtype=torch.float64)
            popularity = torch.searchsorted(cdf, u).clamp_(max=rows - 1)
            bag = self.permutations[t][popularity].view(total, pooling)
            sparse.append(bag)
            logit = logit + hidden[t][bag].mean(1)
        self.sparse = torch.stack(sparse)
        bias = -1.1 - 0.0 * logit.mean()
        probability = torch.sigmoid(logit + bias)
        self.labels = (torch.rand(total, generator=g) < probability).float()
        self.n_test = n_test
        self.n_train = samples

    def train_batch(self, indices):
        """(dense [B, 13], sparse [T, B, L], labels [B]) of training samples `indices` (0-based in the training set)."""
        at = indices + self.n_test
        return self.dense[at], self.sparse[:, at], self.labels[at]

    def test_set(self):
        return self.dense[:self.n_test], self.sparse[:, :self.n_test], self.labels[:self.n_test]


def describe(data, world, batch, hot_rows=(256, 1024, 4096), dim=16):
    """Print, for one global batch (W ranks x batch samples), what a rank's coalesced gradient holds."""
    import torch

    per_rank = []
    for r in range(world):
        _, sparse, _ = data.train_batch(torch.arange(r * batch, (r + 1) * batch))
        per_rank.append([torch.unique(sparse[t]) for t in range(data.tables)])
    counts = torch.zeros(data.tables, data.rows)
    for r in range(world):
        for t in range(data.tables):
            counts[t, per_rank[r][t]] += 1
    touched = sum(per_rank[r][t].numel() for r in range(world) for t in range(data.tables)) / world
    print(f"{world} ranks x {batch} samples, {data.tables} tables of {data.rows} rows, bags of {data.pooling}, "
          f"Zipf {data.zipf}: {touched:.0f} distinct rows per rank per step "
          f"({touched * dim * 4 / 1e3:.0f} kB of fp32 values at dim {dim}; the dense tables: "
          f"{data.tables * data.rows * dim * 4 / 1e6:.1f} MB)")
    for k in hot_rows:
        hot = 0.0
        for t in range(data.tables):
            top = data.permutations[t][:k]
            hot += sum(int(torch.isin(per_rank[r][t], top).sum()) for r in range(world)) / world
        print(f"  hot set = the {k} most popular rows of each table: {hot:.0f} of a rank's rows "
              f"({hot / touched:.2f}); bytes sent per worker per step: hot/cold ~ "
              f"{(data.tables * k + (world - 1) * (touched - hot)) * (dim + 1) * 4 / 1e3:.0f} kB, "
              f"all-gather ~ {(world - 1) * touched * (dim + 1) * 4 / 1e3:.0f} kB")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=8192)
    ap.add_argument("--tables", type=int, default=4)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--pooling", type=int, default=8)
    ap.add_argument("--zipf", type=float, default=1.1)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--dim", type=int, default=16)
    args = ap.parse_args(argv)
    data = ClickData(args.samples, tables=args.tables, rows=args.rows, pooling=args.pooling, zipf=args.zipf,
                     seed=args.seed)
    print(f"click rate {data.labels.mean().item():.3f}")
    describe(data, args.world, args.batch, dim=args.dim)
    return 0


if __name__ == "__main__":
    sys.exit(main())

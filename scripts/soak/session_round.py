"""One rank of a soak round (scripts/soak.sh): open a netreduce.Session on the ring, make a few all-reduce calls of
tensors of several sizes, check every result bit for bit against the rank-order sum the appliance computes (each
rank derives every rank's input from the seeds), and close the session. Exit status 1 on any wrong result."""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--api", required=True)
    ap.add_argument("--netreduce", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--calls", type=int, default=4)
    args = ap.parse_args()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "eth0")
    import torch
    import torch.distributed as dist
    import netreduce

    dist.init_process_group("gloo", init_method=f"tcp://10.77.0.1:{args.port}", rank=args.rank,
                            world_size=args.world)
    session = netreduce.Session(device="eth0", appliance=args.api, ring_id=1, element_type="fp32", timeout=30,
                                sidecar_command=[args.netreduce])
    wrong = 0
    try:
        for call in range(args.calls):
            elements = (1 + call) * 100_003

            def tensor(rank):
                return torch.randn(elements, generator=torch.Generator().manual_seed(
                    1_000_000 * args.seed + 1000 * call + rank))

            mine = tensor(args.rank)
            session.allreduce_(mine)
            want = tensor(0)
            for rank in range(1, args.world):
                want += tensor(rank)
            if not torch.equal(mine, want):
                wrong += 1
                print(f"session_round: rank {args.rank} call {call}: {int((mine != want).sum())} of {elements} "
                      f"elements differ from the rank-order sum", file=sys.stderr)
    finally:
        session.close()
        dist.destroy_process_group()
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())

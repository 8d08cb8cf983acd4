"""The cost of source lines in the counting pass (issue 29, item 6): count_ops on a ~500-op model on the CPU with
the source walk on and off (roofline.diagnose.source.Sources replaced by a no-op), alternated in one process.

    python benchmarks/source_lines_cost.py [--rounds 25]

Times are process CPU seconds (time.process_time: a shared machine's other load counts less than in wall time);
the minimum and the 20th percentile of each side are compared."""

from __future__ import annotations

import argparse


def model(blocks: int):
    import torch

    class Block(torch.nn.Module):
        def __init__(self, d: int) -> None:
            super().__init__()
            self.a, self.b, self.n = torch.nn.Linear(d, d), torch.nn.Linear(d, d), torch.nn.LayerNorm(d)

        def forward(self, x):
            h = torch.relu(self.a(x))
            h = self.b(h) * 0.5 + x
            return self.n(h)

    torch.manual_seed(0)
    return torch.nn.Sequential(*[Block(16) for _ in range(blocks)]), torch.randn(4, 16)


def main() -> None:
    import time

    from roofline.diagnose import source
    from roofline.diagnose.count import count_ops

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=25)
    args = parser.parse_args()
    real = source.Sources.of, source.Sources.produced
    off = (lambda self, node, forward: ""), (lambda self, *args: None)
    heads = ("off min", "on min", "ratio", "off p20", "on p20", "ratio")
    print(f"{'mode':<10} {'ops':>5} " + " ".join(f"{h:>9}" for h in heads))
    for mode, blocks in (("inference", 64), ("training", 14)):
        net, x = model(blocks)
        times: dict[str, list[float]] = {"off": [], "on": []}
        ops = len(count_ops(net, (x,), mode=mode))
        for _ in range(args.rounds):
            for name, (of, produced) in (("off", off), ("on", real)):
                source.Sources.of, source.Sources.produced = of, produced
                began = time.process_time()
                count_ops(net, (x,), mode=mode)
                times[name].append(time.process_time() - began)
        source.Sources.of, source.Sources.produced = real
        low = {k: min(v) for k, v in times.items()}
        p20 = {k: sorted(v)[len(v) // 5] for k, v in times.items()}
        print(
            f"{mode:<10} {ops:>5} {1e3 * low['off']:>7.1f}ms {1e3 * low['on']:>7.1f}ms {low['on'] / low['off']:>7.3f} "
            f"{1e3 * p20['off']:>7.1f}ms {1e3 * p20['on']:>7.1f}ms {p20['on'] / p20['off']:>7.3f}"
        )


if __name__ == "__main__":
    main()

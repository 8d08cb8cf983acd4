"""The training-loop hook's overhead (issue 29, item 1): a small training loop timed with and without
roofline.training.StepProfiler(every=N), the two alternated in one process, on the CPU (and CUDA when present).

    python benchmarks/callback_overhead.py [--steps 400] [--every 100] [--rounds 3] [--threads 1] [--out X.json]

Each round runs the loop ``steps`` steps plain, then ``steps`` steps with the hook (order swapped every round);
the overhead is (with - without) / without of the summed times. The roofs are resolved once before the timing
(a CPU calibration is not part of a training step). Prints a table and writes a JSON."""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path


def make_loop(device: str):
    import torch

    torch.manual_seed(0)
    width = 512
    layers = []
    for _ in range(4):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(width, 10)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(64, width, device=device)
    y = torch.randint(0, 10, (64,), device=device)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    return model, step


def run(step, steps: int, profiler, sync) -> float:
    sync()
    began = time.perf_counter()
    for _ in range(steps):
        if profiler is None:
            step()
        else:
            with profiler.step():
                step()
    sync()
    return time.perf_counter() - began


def measure(device: str, steps: int, every: int, rounds: int) -> dict:
    import torch

    from roofline.roofs import device_roofs
    from roofline.training import StepProfiler

    model, step = make_loop(device)
    sync = (lambda: torch.cuda.synchronize()) if device.startswith("cuda") else (lambda: None)
    placed_on, _ = device_roofs(device)
    for _ in range(20):  # warm-up
        step()
    plain: list[float] = []
    hooked: list[float] = []
    windows = 0
    diagnose_s = 0.0
    for r in range(rounds):
        for kind in ("plain", "hooked") if r % 2 == 0 else ("hooked", "plain"):
            if kind == "plain":
                plain.append(run(step, steps, None, sync))
            else:
                profiler = StepProfiler(every=every, model=model, placed_on=placed_on)
                hooked.append(run(step, steps, profiler, sync))
                profiler.close()
                windows += len(profiler.entries)
                diagnose_s += profiler.profile_s
                last = profiler.last
    overhead = (sum(hooked) - sum(plain)) / sum(plain)
    return {
        "device": device,
        "device_name": torch.cuda.get_device_name() if device.startswith("cuda") else platform.processor() or "cpu",
        "steps": steps,
        "every": every,
        "rounds": rounds,
        "plain_s": plain,
        "hooked_s": hooked,
        "step_ms": 1e3 * sum(plain) / (steps * rounds),
        "overhead": overhead,
        "windows": windows,
        "diagnose_s_per_window": diagnose_s / windows if windows else None,
        "last_entry": last,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--device", action="append", help="cpu, cuda (default: cpu, and cuda when present)")
    parser.add_argument("--threads", type=int, default=0, help="torch's intra-op threads on the CPU (0: as is)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/callback_overhead.json"))
    args = parser.parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    devices = args.device or (["cpu"] + (["cuda"] if torch.cuda.is_available() else []))
    results = [measure(d, args.steps, args.every, args.rounds) for d in devices]
    print(f"{'device':<8} {'step':>9} {'plain':>9} {'hooked':>9} {'overhead':>9} {'windows':>8} {'diagnose':>10}")
    for r in results:
        per_window = r["diagnose_s_per_window"]
        print(
            f"{r['device']:<8} {r['step_ms']:>7.2f}ms {sum(r['plain_s']):>8.2f}s {sum(r['hooked_s']):>8.2f}s "
            f"{100 * r['overhead']:>8.2f}% {r['windows']:>8} "
            + (f"{1e3 * per_window:>8.0f}ms" if per_window is not None else f"{'-':>10}")
        )
    document = {
        "benchmark": "callback_overhead",
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "command": "python benchmarks/callback_overhead.py " + " ".join(sys.argv[1:]),
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

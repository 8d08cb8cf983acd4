"""The training-loop hook's overhead (issue 29, item 1): a small training loop timed with and without
roofline.training.StepProfiler(every=N), the two alternated in one process, on the CPU (and CUDA when present).

    python benchmarks/callback_overhead.py [--every 100] [--rounds 6] [--threads 1] [--width 512] [--batch 64] \
        [--out X.json]

The loop: an MLP of 4 Linear(width, width) + GELU and a Linear(width, 10) head, AdamW, fp32, ``batch`` rows; the
width and batch set the step's length (the hook's cost per window is fixed: its share falls as the step grows).

The loop runs in chunks of ``every`` steps, one plain and one with the hook, alternated (the order swapped every
pair), so that a shared machine's changing load falls on both alike; one hook runs across the hooked chunks, one
window in each; one untimed pair first takes the first window's one-time costs (reported apart, as
``first_chunk_extra_*``). The overhead is hooked / plain - 1 of the summed times: wall time, and this process's CPU time
(less sensitive to other processes on a CPU-only machine), and the median of the pairs' own CPU-time overheads
("median pair", robust to one disturbed chunk); and "by window": each hooked chunk's window cost in CPU time
against that chunk's own untouched steps (the window's four steps, the hook's work at their ends included, less
four times the median of the other steps), its median over the chunks divided by ``every`` median steps -- neither
the loop's drift from chunk to chunk (its step time changes as it trains) nor the load enters it, but a cost
that outlasts the window (on the steps after it) is not counted there. The roofs are resolved once before the
timing (a CPU calibration is not part of a training step). Prints a table and writes a JSON.

NB: this loop fits one fixed batch, and on a CPU its gradients soon turn subnormal: its step slows from about 8 ms
to 45-60 ms of CPU time within a few hundred steps (with ``torch.set_flush_denormal(True)`` it stays at 8 ms), so
"the step" here is that slowed one, and it drifts (falls) from chunk to chunk."""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path


def make_loop(device: str, width: int = 512, batch: int = 64):
    import torch

    torch.manual_seed(0)
    layers = []
    for _ in range(4):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(width, 10)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(batch, width, device=device)
    y = torch.randint(0, 10, (batch,), device=device)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    return model, step


def run(step, steps: int, profiler, sync, per_step: list | None = None) -> tuple[float, float]:
    """(wall seconds, this process's CPU seconds) of ``steps`` steps, with the hook where ``profiler`` is given;
    ``per_step`` gets each hooked step's (CPU seconds, whether a window was open in it), the hook's work at its
    end included."""
    sync()
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        if profiler is None:
            step()
        else:
            began = time.process_time()
            with profiler.step():
                in_window = profiler.active
                step()
            if per_step is not None:
                per_step.append((time.process_time() - began, in_window))
    sync()
    return time.perf_counter() - wall, time.process_time() - cpu


def window_cpu_s(per_step: list) -> float | None:
    """One hooked chunk's window cost in CPU seconds: its window's steps (the hook's work at their ends included)
    less as many of the chunk's other steps (their median): the chunk's own steps are the baseline, so neither the
    loop's drift from chunk to chunk nor the order of a pair enters it."""
    inside = [t for t, open_ in per_step if open_]
    outside = sorted(t for t, open_ in per_step if not open_)
    if not inside or not outside:
        return None
    return sum(inside) - len(inside) * statistics.median(outside)


def measure(device: str, every: int, rounds: int, width: int = 512, batch: int = 64) -> dict:
    """``rounds`` pairs of chunks of ``every`` steps, one plain and one hooked (the order swapped every pair): one
    hook across the hooked chunks, its window in the middle of each (first = every // 2)."""
    import torch

    from roofline.roofs import device_roofs
    from roofline.training import StepProfiler

    model, step = make_loop(device, width, batch)
    sync = (lambda: torch.cuda.synchronize()) if device.startswith("cuda") else (lambda: None)
    placed_on, _ = device_roofs(device)
    for _ in range(20):  # warm-up
        step()
    profiler = StepProfiler(every=every, first=every // 2, model=model, placed_on=placed_on)
    # the first window pays one-time costs (torch.profiler's start, roofline's modules imported, the cost
    # plugins loaded): one untimed pair first, its difference reported apart
    first_plain = run(step, every, None, sync)
    first_hooked = run(step, every, profiler, sync)
    plain: list[tuple[float, float]] = []
    hooked: list[tuple[float, float]] = []
    window_costs: list[float | None] = []  # per hooked chunk: its window's CPU seconds over its own steps
    step_cpu: list[float] = []  # per hooked chunk: the median CPU seconds of its untouched steps
    for r in range(rounds):
        for kind in ("plain", "hooked") if r % 2 == 0 else ("hooked", "plain"):
            if kind == "plain":
                plain.append(run(step, every, None, sync))
            else:
                per_step: list = []
                hooked.append(run(step, every, profiler, sync, per_step))
                window_costs.append(window_cpu_s(per_step))
                step_cpu.append(statistics.median(t for t, open_ in per_step if not open_))
    profiler.close()
    windows = len(profiler.entries) - 1  # the timed chunks' windows (the first pair's is apart)

    def overhead(i: int) -> float:
        return sum(h[i] for h in hooked) / sum(p[i] for p in plain) - 1

    def pairs(i: int) -> list[float]:  # each pair's own overhead: hooked / plain - 1 of its two chunks
        return [h[i] / p[i] - 1 for p, h in zip(plain, hooked, strict=True)]

    # the hook's wall time per window, and the step it takes for that to be 2% of EVERY steps
    per_window = (sum(h[0] for h in hooked) - sum(p[0] for p in plain)) / max(windows, 1)

    return {
        "device": device,
        "device_name": torch.cuda.get_device_name() if device.startswith("cuda") else platform.processor() or "cpu",
        "every": every,
        "rounds": rounds,
        "width": width,
        "batch": batch,
        "plain_wall_s": [p[0] for p in plain],
        "hooked_wall_s": [h[0] for h in hooked],
        "plain_cpu_s": [p[1] for p in plain],
        "hooked_cpu_s": [h[1] for h in hooked],
        "step_ms": 1e3 * sum(p[0] for p in plain) / (every * rounds),
        "overhead_wall": overhead(0),
        "overhead_cpu": overhead(1),
        "pair_overhead_wall": pairs(0),
        "pair_overhead_cpu": pairs(1),
        "median_pair_overhead_wall": statistics.median(pairs(0)),
        "median_pair_overhead_cpu": statistics.median(pairs(1)),
        "counts": dict(
            getattr(profiler, "counts", {})
        ),  # windows that counted, reused a count, found their ops changed
        "window_cpu_s": window_costs,
        "median_window_cpu_s": statistics.median(c for c in window_costs if c is not None),
        "median_step_cpu_s": statistics.median(step_cpu),
        # the window's CPU cost over EVERY untouched steps: the overhead with the loop's drift and the load taken out
        "overhead_cpu_from_window": statistics.median(c for c in window_costs if c is not None)
        / (every * statistics.median(step_cpu)),
        "windows": windows,
        "first_chunk_extra_wall_s": first_hooked[0] - first_plain[0],
        "first_chunk_extra_cpu_s": first_hooked[1] - first_plain[1],
        "diagnose_s_per_window": profiler.profile_s / (windows + 1),
        "cost_per_window_s": per_window,
        "step_ms_for_2pct": 1e3 * per_window / (0.02 * every),
        "last_entry": profiler.last,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=6, help="pairs of chunks (one plain, one hooked) of EVERY steps")
    parser.add_argument("--device", action="append", help="cpu, cuda (default: cpu, and cuda when present)")
    parser.add_argument("--threads", type=int, default=0, help="torch's intra-op threads on the CPU (0: as is)")
    parser.add_argument("--width", type=int, default=512, help="the MLP's width (sets the step's length)")
    parser.add_argument("--batch", type=int, default=64, help="rows per step")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/callback_overhead.json"))
    args = parser.parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    devices = args.device or (["cpu"] + (["cuda"] if torch.cuda.is_available() else []))
    results = [measure(d, args.every, args.rounds, args.width, args.batch) for d in devices]
    heads = (
        "step",
        "plain",
        "hooked",
        "overhead",
        "plain CPU",
        "hooked CPU",
        "overhead",
        "median pair",
        "by window",
        "window CPU",
        "windows",
        "diagnose",
        "per window",
        "2% from",
        "1st extra",
    )
    print(f"{'device':<8} " + " ".join(f"{h:>10}" for h in heads))
    for r in results:
        per_window = r["diagnose_s_per_window"]
        cells = [
            f"{r['step_ms']:.2f}ms",
            f"{sum(r['plain_wall_s']):.2f}s",
            f"{sum(r['hooked_wall_s']):.2f}s",
            f"{100 * r['overhead_wall']:.2f}%",
            f"{sum(r['plain_cpu_s']):.2f}s",
            f"{sum(r['hooked_cpu_s']):.2f}s",
            f"{100 * r['overhead_cpu']:.2f}%",
            f"{100 * r['median_pair_overhead_cpu']:.2f}%",
            f"{100 * r['overhead_cpu_from_window']:.2f}%",
            f"{1e3 * r['median_window_cpu_s']:.0f}ms",
            str(r["windows"]),
            f"{1e3 * per_window:.0f}ms" if per_window is not None else "-",
            f"{1e3 * r['cost_per_window_s']:.0f}ms",
            f"{r['step_ms_for_2pct']:.0f}ms",
            f"{r['first_chunk_extra_cpu_s']:.2f}s",
        ]
        print(f"{r['device']:<8} " + " ".join(f"{c:>10}" for c in cells))
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

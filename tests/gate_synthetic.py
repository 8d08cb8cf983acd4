"""Synthetic bench and diagnose reports for the gate tests: exact counts, timing samples made to order.

``spread(median, n, sigma)`` gives n samples whose log-times are the normal quantiles (i + 0.5) / n scaled by
sigma, interleaved: noise with a known shape and no random generator, so golden files never move.
"""

from __future__ import annotations

import math
import random
from statistics import NormalDist
from typing import Any

from roofline.report.schema import Report

H100 = {
    "kind": "cuda",
    "name": "NVIDIA H100 80GB HBM3",
    "sheet": "h100-sxm",
    "driver": "550.54.15",
    "cuda": "12.4",
    "torch": "2.4.0",
    "compute_capability": "9.0",
    "sm_count": 132,
}

DEVICE = {
    "name": "h100-sxm",
    "display_name": "NVIDIA H100 SXM5 80GB",
    "roof_source": "spec",
    "dram_bandwidth_bytes_per_s": 3.35e12,
    "launch_floor_s": 4e-6,
    "compute_flops_per_s": {"bf16 tensor": 9.894e14},
}


def spread(median: float, n: int, sigma: float, shift: float = 0.0) -> list[float]:
    """n samples around ``median * (1 + shift)``, log-normal with ``sigma``, deterministic."""
    normal = NormalDist()
    z = [normal.inv_cdf((i + 0.5) / n) for i in range(n)]
    order = [z[(i * 7) % n] if math.gcd(7, n) == 1 else z[i] for i in range(n)]
    return [median * (1 + shift) * math.exp(sigma * v) for v in order]


def noisy(rng: random.Random, median: float, n: int, sigma: float, outliers: float = 0.0) -> list[float]:
    """Random log-normal samples with occasional slow outliers (another process, a clock dip)."""
    samples = []
    for _ in range(n):
        value = median * rng.lognormvariate(0.0, sigma)
        if outliers and rng.random() < outliers:
            value *= rng.uniform(1.5, 4.0)
        samples.append(value)
    return samples


def bench_row(
    label: str,
    samples: list[float],
    *,
    kind: str = "gemm",
    dtype: str = "bf16",
    op: str | None = None,
    flops: int = 2 * 4096**3,
    nbytes: int = 3 * 4096 * 4096 * 2,
    kernels: int = 1,
    roof_time_s: float = 1.4e-4,
    clock: float | None = 1980.0,
) -> dict[str, Any]:
    median = sorted(samples)[len(samples) // 2] if samples else 0.0
    return {
        "kind": kind,
        "label": label,
        "dtype": dtype,
        "op": op or f"{kind} torch.matmul {dtype}",
        "flops": flops,
        "bytes": nbytes,
        "kernels": kernels,
        "median_s": median,
        "samples_s": samples,
        "n": len(samples),
        "roof_time_s": roof_time_s,
        "efficiency": roof_time_s / median if median else 0.0,
        "bound": "compute",
        "clocks_mhz": [clock] * len(samples) if clock else [],
    }


def bench_report(
    rows: list[dict[str, Any]], *, suite: str | None = "gate-demo", machine: dict[str, Any] | None = None
) -> Report:
    data: dict[str, Any] = {
        "schema_": "roofline.report",
        "version": 1,
        "created_utc": "2026-01-02T03:04:05+00:00",
        "command": f"roofline bench {suite} -o r.json" if suite else "roofline bench gemm -m 1 -n 1 -k 1",
        "source": "bench",
        "host": {"python": "3.12.3", "platform": "Linux"},
        "devices": [DEVICE],
        "rows": rows,
        "bench": {"device_kind": "cuda", "gpu": H100["name"], "sheet": "h100-sxm", "torch": "2.4.0"},
        "machine": machine if machine is not None else H100,
        "skipped": [],
        "interrupted": False,
        "total": len(rows),
    }
    return Report.model_validate(data)


def diagnose_row(
    op: str,
    module: str,
    shapes: list[list[int]],
    samples: list[float],
    *,
    flops: int = 1_000_000,
    nbytes: int = 8_000_000,
    kernels: int = 1,
    roof_time_s: float = 2.5e-6,
    phase: str = "forward",
) -> dict[str, Any]:
    time_s = sum(samples) / len(samples) if samples else 0.0
    return {
        "op": op,
        "module": module,
        "phase": phase,
        "input_shapes": shapes,
        "flops": flops,
        "bytes": nbytes,
        "kernels": kernels,
        "timed": True,
        "time_s": time_s,
        "samples_s": samples,
        "roof_time_s": roof_time_s,
        "efficiency": roof_time_s / time_s if time_s else 0.0,
        "bound": "memory",
    }


def diagnose_report(
    rows: list[dict[str, Any]],
    *,
    model: str = "/src/mlp.py",
    dtype: str | None = "bf16",
    mode: str = "inference",
    machine: dict[str, Any] | None = None,
) -> Report:
    data: dict[str, Any] = {
        "schema_": "roofline.report",
        "version": 1,
        "created_utc": "2026-01-02T03:04:05+00:00",
        "command": "roofline diagnose mlp.py",
        "source": "diagnose",
        "host": {"python": "3.12.3", "platform": "Linux"},
        "devices": [DEVICE],
        "rows": [{"index": i, **row} for i, row in enumerate(rows)],
        "diagnose": {
            "model": model,
            "entry": None,
            "dtype": dtype,
            "mode": mode,
            "device": "cuda",
            "device_kind": "cuda",
        },
        "machine": machine if machine is not None else H100,
    }
    return Report.model_validate(data)

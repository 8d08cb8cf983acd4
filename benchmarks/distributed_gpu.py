r"""GPU checks of distributed diagnosis (issue 18), on a machine of 2 or more GPUs:

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
        python benchmarks/distributed_gpu.py --nproc 2 --out benchmarks/results/distributed-h200x2

1. `roofline calibrate --collectives --nproc N --refresh`: all-reduce and all-gather bus bandwidth over message
   sizes (8 KiB .. 1 GiB), and the communication roof fitted under them;
2. in the same run, a plain torch.distributed all_reduce timing at the same sizes (this file as its own torchrun
   worker: each call between its own CUDA events after a barrier, the median of 20, the slowest rank's), and the
   two bus bandwidths side by side (roofline's / plain);
3. `roofline diagnose --nproc N --mode training` of a GPT-2-small-like step under DDP (benchmarks/models/gpt2_ddp.py)
   and under FSDP (benchmarks/models/gpt2_fsdp.py): per-rank iteration, communication, exposed and overlapped time,
   the largest collectives on the roof, the communication findings.

NVLink multicast stays off: the three variables above are forced on for every process started here (a machine
shared with others can be put out of service by a program that uses it). Writes calibrate.json, plain.json,
ddp.json, fsdp.json (the merged reports), summary.json and summary.md into --out; prints the tables. A step that
fails is recorded with its error and the others still run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODELS = Path(__file__).resolve().parent / "models"
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
WARMUP, REPEATS = 5, 20


def env() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, **NO_MULTICAST, "PYTHONPATH": path, "COLUMNS": "160"}


def run(command: list[str], timeout: float) -> tuple[int, str, str, float]:
    start = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env(), timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        return 124, exc.stdout or "", f"timed out after {timeout:g} s", time.perf_counter() - start
    return done.returncode, done.stdout, done.stderr, time.perf_counter() - start


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


# ------------------------------------------------------------------------------------------------ the worker


def plain_worker(sizes: list[int], out: Path) -> None:
    """One rank of the plain all_reduce timing (started by torchrun from main())."""
    import torch
    import torch.distributed as dist

    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    n = dist.get_world_size()
    rows = []
    for size in sizes:
        buffer = torch.ones(max(size // 4, 1), device="cuda")
        for _ in range(WARMUP):
            dist.all_reduce(buffer)
        times = []
        for _ in range(REPEATS):
            torch.cuda.synchronize()
            dist.barrier()
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            dist.all_reduce(buffer)
            end.record()
            end.synchronize()
            times.append(begin.elapsed_time(end) * 1e-3)
        times.sort()
        mid = times[len(times) // 2]
        slowest = torch.tensor([mid], dtype=torch.float64, device="cuda")
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        t = float(slowest.item())
        nbytes = buffer.numel() * 4
        rows.append({"bytes": nbytes, "time_s": t, "busbw_bytes_per_s": nbytes / t * 2 * (n - 1) / n})
    if dist.get_rank() == 0:
        out.write_text(json.dumps({"world_size": n, "repeats": REPEATS, "rows": rows}, indent=2))
    dist.destroy_process_group()


# ------------------------------------------------------------------------------------------------ the checks


def calibrate(nproc: int, out: Path) -> dict[str, Any]:
    code, stdout, stderr, seconds = run(
        [sys.executable, "-m", "roofline", "calibrate", "--collectives", "--nproc", str(nproc), "--refresh", "--json"],
        900,
    )
    if code != 0:
        return {"ok": False, "error": last_line(stderr), "seconds": seconds}
    (out / "calibrate.json").write_text(stdout)
    return {"ok": True, "doc": json.loads(stdout), "seconds": seconds}


def plain(nproc: int, sizes: list[int], out: Path) -> dict[str, Any]:
    target = out / "plain.json"
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
        str(Path(__file__).resolve()), "--worker", "--sizes", ",".join(map(str, sizes)), "--out", str(target),
    ]  # fmt: skip
    code, _, stderr, seconds = run(command, 900)
    if code != 0 or not target.is_file():
        return {"ok": False, "error": last_line(stderr), "seconds": seconds}
    return {"ok": True, "doc": json.loads(target.read_text()), "seconds": seconds}


def diagnose(name: str, nproc: int, out: Path) -> dict[str, Any]:
    target = out / f"{name}.json"
    command = [
        sys.executable, "-m", "roofline", "diagnose", str(MODELS / f"gpt2_{name}.py"), "--nproc", str(nproc),
        "--mode", "training", "-o", str(target), "--plot", str(out / f"{name}.png"),
    ]  # fmt: skip
    code, stdout, stderr, seconds = run(command, 900)
    (out / f"{name}.txt").write_text(stdout + "\n--- stderr ---\n" + stderr)
    if code != 0 or not target.is_file():
        return {"ok": False, "error": last_line(stderr), "seconds": seconds}
    doc = json.loads(target.read_text())
    section = doc.get("distributed", {})
    top = sorted(section.get("collectives", []), key=lambda c: -(c.get("time_s") or 0) * (c.get("calls") or 1))
    return {
        "ok": True,
        "seconds": seconds,
        "ranks": section.get("ranks", []),
        "skew": section.get("skew"),
        "roof": section.get("roof"),
        "collectives": len(section.get("collectives", [])),
        "top_collectives": top[:8],
        "findings": [{k: f.get(k) for k in ("rule", "rank", "evidence", "gain")} for f in section.get("findings", [])],
    }


def fmt_bw(value: float | None) -> str:
    return "-" if value is None else f"{value / 1e9:.2f} GB/s"


def fmt_t(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1e3:.3f} ms" if value >= 1e-3 else f"{value * 1e6:.1f} us"


def markdown(summary: dict[str, Any]) -> str:
    lines = [f"# Distributed checks ({summary['device']}, {summary['nproc']} ranks)", ""]
    cal, pl = summary["calibrate"], summary["plain"]
    lines += ["## All-reduce bus bandwidth: roofline calibrate --collectives vs a plain all_reduce", ""]
    if cal["ok"] and pl["ok"]:
        lines += ["| message | calibrate busbw | plain busbw | calibrate / plain |", "|---|---|---|---|"]
        plain_by = {r["bytes"]: r for r in pl["doc"]["rows"]}
        for p in (p for p in cal["doc"]["points"] if p["kind"] == "all_reduce"):
            other = plain_by.get(p["bytes"])
            ratio = p["busbw_bytes_per_s"] / other["busbw_bytes_per_s"] if other else None
            lines.append(
                f"| {p['bytes']} B | {fmt_bw(p['busbw_bytes_per_s'])} | "
                f"{fmt_bw(other['busbw_bytes_per_s'] if other else None)} | "
                f"{'-' if ratio is None else f'{ratio:.3f}'} |"
            )
        for roof in cal["doc"]["roofs"]:
            lines.append(
                f"\nroof {roof['kind']}: {fmt_bw(roof['bus_bytes_per_s'])}, latency {fmt_t(roof['latency_s'])}"
            )
    else:
        lines.append(f"calibrate: {cal.get('error', 'ok')}; plain: {pl.get('error', 'ok')}")
    for name in ("ddp", "fsdp"):
        d = summary[name]
        lines += ["", f"## GPT-2-like training step under {name.upper()}", ""]
        if not d["ok"]:
            lines.append(f"failed: {d['error']}")
            continue
        lines += [
            "| rank | iteration | profiled | communication | overlapped | exposed |",
            "|---|---|---|---|---|---|",
        ]
        for r in d["ranks"]:
            lines.append(
                f"| {r['rank']} | {fmt_t(r['iteration_s'])} | {fmt_t(r.get('profiled_iteration_s'))} | "
                f"{fmt_t(r['communication_s'])} | {fmt_t(r['overlapped_s'])} | {fmt_t(r['exposed_s'])} |"
            )
        lines += [
            "",
            "| rank | collective | phase | calls | bytes | time | busbw | of roof |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for c in d["top_collectives"]:
            eff = c.get("efficiency")
            lines.append(
                f"| {c['rank']} | {c['kind']} | {c.get('phase', '')} | {c['calls']:g} | {c['bytes']} | "
                f"{fmt_t(c['time_s'])} | {fmt_bw(c.get('busbw_bytes_per_s'))} | "
                f"{'-' if eff is None else f'{eff:.0%}'} |"
            )
        for f in d["findings"]:
            lines.append(f"- {f['rule']} (rank {f['rank']}): {f['evidence']}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/distributed"))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--sizes", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        plain_worker([int(s) for s in args.sizes.split(",") if s], args.out)
        return
    os.environ.update(NO_MULTICAST)
    import torch

    gpus = torch.cuda.device_count()
    if gpus < args.nproc or args.nproc < 2:
        sys.exit(f"needs {max(args.nproc, 2)} GPUs, this machine shows {gpus}")
    args.out.mkdir(parents=True, exist_ok=True)
    from roofline.measure.collectives import GPU_SIZES

    summary: dict[str, Any] = {"device": torch.cuda.get_device_name(0), "nproc": args.nproc, "env": NO_MULTICAST}
    print("1/4 calibrate --collectives", flush=True)
    summary["calibrate"] = calibrate(args.nproc, args.out)
    print("2/4 plain all_reduce", flush=True)
    summary["plain"] = plain(args.nproc, list(GPU_SIZES), args.out)
    print("3/4 diagnose DDP", flush=True)
    summary["ddp"] = diagnose("ddp", args.nproc, args.out)
    print("4/4 diagnose FSDP", flush=True)
    summary["fsdp"] = diagnose("fsdp", args.nproc, args.out)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    text = markdown(summary)
    (args.out / "summary.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()

"""Each GPU ceiling of `roofline calibrate` beside a reference measured on the same GPU, in one run.

    python benchmarks/ceilings_gpu.py --out DIR [--budget 40] [--no-cli]

1. Ours: roofline.measure.ceilings_gpu.calibrate_cuda, the code `roofline calibrate` runs, against the GPU's sheet.
2. References, written here independently of ours: Triton read-only (a persistent grid-stride reduction and a
   block reduction), copy and write kernels, each tuned over a sweep of block sizes, warps and grids, timed by
   triton.testing.do_bench (median; do_bench flushes the L2 itself), on buffers of the same size as ours; for every
   GEMM dtype, torch.mm (fp8: torch._scaled_mm, int8: torch._int_mm) of our best burst shape, timed by do_bench
   after a 1 s rest.
3. A table: ceiling, ours, reference, ours / reference, ours vs the sheet. Targets: ours >= 0.98 of the reference
   (DRAM, and the GEMM burst figures, which like do_bench are taken from rest); DRAM read >= 0.90 of the sheet. The
   sustained GEMM figures (the roofs) are shown beside the same reference with no target: they are taken after a
   thermal soak, under the power cap, on purpose.
4. With the CLI check (default): the wall time of `roofline calibrate --device cuda --refresh --json` in a fresh
   process (a temporary cache directory).
Writes DIR/ceilings.json (rows, targets, pass or fail, calibrate times) and DIR/calibration.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

REF_TARGET = 0.98
DRAM_READ_SHEET_TARGET = 0.90


# ------------------------------------------------------------------------------------- reference kernels


def reference_dram(torch: Any, nbytes: int) -> dict[str, dict[str, Any]]:
    """The best rate (B/s) and configuration of independent Triton read, copy and write kernels over a sweep."""
    import triton
    import triton.language as tl
    from triton.testing import do_bench

    @triton.jit
    def read_persistent(x, out, n, BLOCK: tl.constexpr, UNROLL: tl.constexpr):
        pid = tl.program_id(0)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        step = tl.num_programs(0).to(tl.int64) * BLOCK * UNROLL
        for base in range(pid.to(tl.int64) * BLOCK * UNROLL, n, step):
            for u in tl.static_range(UNROLL):
                offs = base + u * BLOCK + tl.arange(0, BLOCK)
                acc += tl.load(x + offs, mask=offs < n, other=0.0)
        tl.store(out + pid, tl.sum(acc, axis=0))

    @triton.jit
    def read_blocks(x, out, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out + pid, tl.sum(tl.load(x + offs, mask=offs < n, other=0.0), axis=0))

    @triton.jit
    def copy_blocks(x, y, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y + offs, tl.load(x + offs, mask=mask), mask=mask)

    @triton.jit
    def write_blocks(y, n, value, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y + offs, tl.zeros([BLOCK], dtype=tl.float32) + value, mask=offs < n)

    n = nbytes // 4
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    x = torch.rand(n, device="cuda") + 0.5
    y = torch.empty_like(x)
    out = torch.empty(n // 1024 + sms * 16, device="cuda")
    value = 1.2345

    def rate(fn: Any, moved: int) -> float:
        fn()
        torch.cuda.synchronize()
        return moved / (do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e-3)

    found: dict[str, dict[str, Any]] = {}

    def keep(name: str, label: str, fn: Any, moved: int) -> None:
        try:
            r = rate(fn, moved)
        except Exception as exc:  # a configuration that does not compile here
            print(f"  reference {name} {label}: failed ({type(exc).__name__})", flush=True)
            return
        if r > found.get(name, {}).get("rate", 0.0):
            found[name] = {"rate": r, "kernel": label}

    for block in (1024, 2048):
        for unroll in (2, 4):
            for per_sm in (4, 8):
                for warps in (8,):
                    grid = (sms * per_sm,)
                    keep(
                        "dram-read",
                        f"persistent block={block} unroll={unroll} grid={per_sm}xSM warps={warps}",
                        lambda g=grid, b=block, u=unroll, w=warps: read_persistent[g](
                            x, out, n, BLOCK=b, UNROLL=u, num_warps=w
                        ),
                        nbytes,
                    )
    for block in (2048, 4096, 8192, 16384):
        for warps in (4, 8, 16):
            grid = (triton.cdiv(n, block),)
            keep(
                "dram-read",
                f"blocks block={block} warps={warps}",
                lambda g=grid, b=block, w=warps: read_blocks[g](x, out, n, BLOCK=b, num_warps=w),
                nbytes,
            )
    for block in (1024, 2048, 4096, 8192, 16384):
        for warps in (4, 8, 16):
            grid = (triton.cdiv(n, block),)
            keep(
                "dram-copy",
                f"blocks block={block} warps={warps}",
                lambda g=grid, b=block, w=warps: copy_blocks[g](x, y, n, BLOCK=b, num_warps=w),
                2 * nbytes,
            )
            keep(
                "dram-write",
                f"blocks block={block} warps={warps}",
                lambda g=grid, b=block, w=warps: write_blocks[g](y, n, value, BLOCK=b, num_warps=w),
                nbytes,
            )
    return found  # the buffers are freed on return


def reference_gemm(torch: Any, dtype: str, shape: tuple[int, int, int]) -> float:
    """do_bench's rate (FLOP/s or OP/s) of the plain torch GEMM of ``dtype`` on ``shape``, after a 1 s rest."""
    from triton.testing import do_bench

    m, n, k = shape
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    try:
        if dtype == "fp8":
            a = (torch.randn(m, k, device="cuda") * 0.5).to(torch.float8_e4m3fn)
            b = (torch.randn(n, k, device="cuda") * 0.5).to(torch.float8_e4m3fn).t()
            one = torch.ones((), device="cuda")

            def fn() -> Any:
                return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        elif dtype == "int8":
            a = torch.randint(-128, 128, (m, k), device="cuda", dtype=torch.int8)
            b = torch.randint(-128, 128, (n, k), device="cuda", dtype=torch.int8).t()

            def fn() -> Any:
                return torch._int_mm(a, b)
        else:
            torch_dtype = {
                "bf16": torch.bfloat16,
                "fp16": torch.float16,
                "tf32": torch.float32,
                "fp32": torch.float32,
                "fp64": torch.float64,
            }[dtype]
            a = torch.randn(m, k, device="cuda", dtype=torch_dtype)
            b = torch.randn(k, n, device="cuda", dtype=torch_dtype)

            def fn() -> Any:
                return torch.mm(a, b)

        fn()
        torch.cuda.synchronize()
        time.sleep(1.0)
        ms = do_bench(fn, warmup=25, rep=100, return_mode="median")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    return 2.0 * m * n * k / (ms * 1e-3)


# ------------------------------------------------------------------------------------------------ the run


def cli_wall(out: Path) -> dict[str, Any]:
    """Wall time of `roofline calibrate --device cuda --refresh --json` in a fresh process, fresh cache."""
    with tempfile.TemporaryDirectory() as cache:
        env = {
            **os.environ,
            "ROOFLINE_CACHE_DIR": cache,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        start = time.perf_counter()
        result = subprocess.run(
            [sys.executable, "-m", "roofline", "calibrate", "--device", "cuda", "--refresh", "--json"],
            env=env,
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - start
    if result.returncode != 0:
        return {"wall_s": wall, "error": result.stderr.strip()[-1000:]}
    (out / "calibration-cli.json").write_text(result.stdout)
    doc = json.loads(result.stdout)
    return {"wall_s": wall, "measuring_s": doc.get("elapsed_s")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for ceilings.json and calibration.json")
    parser.add_argument("--budget", type=float, default=None, help="calibrate_cuda's budget_s (default: its own)")
    parser.add_argument("--no-cli", action="store_true", help="skip timing `roofline calibrate` in a fresh process")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    import torch

    from roofline.measure.ceilings_gpu import calibrate_cuda
    from roofline.roofs import device_from_sheet, gpu_names, gpu_sheet

    if not torch.cuda.is_available():
        print("Error: no CUDA device", file=sys.stderr)
        return 2
    names, _ = gpu_names(torch, torch.cuda.current_device())
    sheet = gpu_sheet(names, None, [], required=False)
    spec = device_from_sheet(sheet) if sheet is not None else None

    def progress(step: str, index: int, total: int) -> None:
        print(f"  [{min(index + 1, total)}/{total}] {step}", file=sys.stderr, flush=True)

    print(f"ours: calibrate_cuda on {torch.cuda.get_device_name()} (sheet {spec.name if spec else 'none'})", flush=True)
    start = time.perf_counter()
    kwargs = {"budget_s": args.budget} if args.budget else {}
    cal = calibrate_cuda(torch, spec=spec, progress=progress, **kwargs)
    ours_wall = time.perf_counter() - start
    (args.out / "calibration.json").write_text(cal.to_json())
    for note in cal.notes:
        print(f"  note: {note}", flush=True)
    for skipped in cal.skipped:
        print(f"  skipped {skipped.name}: {skipped.reason}", flush=True)

    print("reference: tuned Triton DRAM kernels (do_bench)", flush=True)
    dram_ceiling = cal.get("dram-read") or cal.get("dram-copy")
    nbytes = int(dram_ceiling.work) if dram_ceiling is not None and dram_ceiling.name == "dram-read" else 2**30
    refs = reference_dram(torch, nbytes)
    torch.cuda.empty_cache()

    rows: list[dict[str, Any]] = []

    def row(name: str, ours: Any, ref: float | None, ref_how: str, target: float | None) -> None:
        value = ours.value if ours is not None else None
        ratio = value / ref if value and ref else None
        rows.append(
            {
                "ceiling": name,
                "ours": value,
                "unit": ours.unit if ours is not None else "",
                "ours_kernel": f"{ours.kernel} {ours.shape}".strip() if ours is not None else "",
                "reference": ref,
                "reference_how": ref_how,
                "ratio": ratio,
                "target": target,
                "pass": None if target is None or ratio is None else ratio >= target,
                "vs_sheet": ours.ratio if ours is not None else None,
            }
        )

    for name in ("dram-read", "dram-copy", "dram-write"):
        ref = refs.get(name, {})
        row(name, cal.get(name), ref.get("rate"), f"triton {ref.get('kernel', '-')}, do_bench", REF_TARGET)

    print("reference: torch GEMMs of our best shapes (do_bench)", flush=True)
    for dtype in ("bf16", "fp16", "tf32", "fp32", "fp64", "fp8", "int8"):
        burst, sustained = cal.get(f"gemm-{dtype}-burst"), cal.get(f"gemm-{dtype}")
        if burst is None:
            continue
        shape = tuple(int(d) for d in burst.shape.split("x"))
        try:
            ref = reference_gemm(torch, dtype, shape)  # type: ignore[arg-type]
        except Exception as exc:
            print(f"  reference gemm-{dtype}: failed ({type(exc).__name__}: {exc})", flush=True)
            ref = None
        how = f"{burst.kernel} {burst.shape}, do_bench after 1 s rest"
        row(f"gemm-{dtype}-burst", burst, ref, how, REF_TARGET)
        row(f"gemm-{dtype} (sustained, the roof)", sustained, ref, how, None)

    read = cal.get("dram-read")
    sheet_ok = read is not None and read.ratio is not None and read.ratio >= DRAM_READ_SHEET_TARGET
    cli = None if args.no_cli else cli_wall(args.out)

    def rate(value: float | None, unit: str) -> str:
        if value is None:
            return "-"
        return f"{value / 1e12:.3f} TB/s" if unit == "B/s" else f"{value / 1e12:.1f} T{unit}"

    header = (
        f"{'ceiling':36} {'ours':>14} {'reference':>14} {'ours/ref':>9} {'vs sheet':>9}  target  "
        "kernel (ours | reference)"
    )
    print()
    print(header)
    print("-" * len(header))
    for r in rows:
        ratio = f"{r['ratio']:.3f}" if r["ratio"] is not None else "-"
        sheet_text = f"{r['vs_sheet']:.3f}" if r["vs_sheet"] is not None else "-"
        verdict = "-" if r["pass"] is None else ("ok" if r["pass"] else "MISS")
        unit = r["unit"] or "B/s"
        print(
            f"{r['ceiling']:36} {rate(r['ours'], unit):>14} {rate(r['reference'], unit):>14}"
            f" {ratio:>9} {sheet_text:>9}  {verdict:6}  {r['ours_kernel']} | {r['reference_how']}"
        )
    print()
    roof = cal.dram_roof
    print(f"DRAM roof: {roof.ceiling} ({roof.kernel})" if roof else "DRAM roof: none recorded")
    read_text = f"{read.ratio:.3f}" if read is not None and read.ratio is not None else "-"
    print(f"dram-read vs sheet: {read_text} (target >= {DRAM_READ_SHEET_TARGET}): {'ok' if sheet_ok else 'MISS'}")
    print(f"calibrate_cuda in this process: {ours_wall:.1f} s (measuring {cal.elapsed_s:.1f} s)")
    if cli is not None:
        if "error" in cli:
            print(f"roofline calibrate (fresh process): failed after {cli['wall_s']:.1f} s: {cli['error']}")
        else:
            print(
                f"roofline calibrate (fresh process): {cli['wall_s']:.1f} s wall ({cli['measuring_s']:.1f} s measuring)"
            )
    summary = {
        "device": torch.cuda.get_device_name(),
        "sheet": spec.name if spec else None,
        "torch": torch.__version__,
        "rows": rows,
        "dram_roof": roof.model_dump() if roof else None,
        "dram_read_vs_sheet": read.ratio if read is not None else None,
        "dram_read_sheet_target": DRAM_READ_SHEET_TARGET,
        "dram_read_sheet_pass": sheet_ok,
        "reference_target": REF_TARGET,
        "all_pass": sheet_ok and all(r["pass"] is not False for r in rows),
        "calibrate_in_process_s": ours_wall,
        "calibrate_measuring_s": cal.elapsed_s,
        "calibrate_cli": cli,
        "notes": cal.notes,
    }
    (args.out / "ceilings.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"wrote {args.out / 'ceilings.json'} and {args.out / 'calibration.json'}")
    return 0 if summary["all_pass"] else 1


if __name__ == "__main__":
    raise SystemExit(main())

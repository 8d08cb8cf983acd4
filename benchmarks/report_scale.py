"""Reading and rendering reports of 1k, 10k and 100k rows: every reader must stay linear in the rows.

    python benchmarks/report_scale.py [--sizes 1000,10000,100000] [--cli-size 100000] [--no-cli]
                                      [--cli-repeat 3] [--compare SRC]
                                      [--work DIR] [--out benchmarks/results/report_scale.json]

Builds synthetic reports with the library's own writers (no torch, no timing of anything real):

- bench: GEMM rows analysed by roofline.analysis.analyze_one on the H100 sheet and turned into bench rows by
  roofline.bench.run.bench_row, with 20 made-up timing samples each (a deterministic spread);
- diagnose: op records placed by roofline.diagnose.place.place (mm, add, gelu, layernorm, view in 1,000 modules,
  with repeated call sites), 10 samples per op, written by DiagnoseResult.report.

Each is written as JSON (that write is timed too), then, in this process (time.perf_counter around the library
calls the CLI makes): read back, CSV, Parquet, markdown, HTML (with its inline SVG chart), the chart as PNG and SVG,
JSON out again, `baseline save` (a baseline of the report), `gate` of the report against that baseline (and the
gate's console table), and the console table of the command that made the report (bench / diagnose). Then
fresh `python -m roofline ...` processes per format at ``--cli-size`` rows, ``--cli-repeat`` times each (the
median is reported: the machine may be shared). ``--compare SRC``: the same commands run with another source tree
too (a checkout of the code before a change, e.g. ``git worktree add /tmp/base BASE``), alternating with this one,
and the ratio of the medians. Prints tables (seconds, and the time per row relative to the smallest size: ~1 for
every size means linear) and writes the results as JSON.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from roofline.fileio import atomic_write_text  # noqa: E402

SAMPLES_BENCH = 20
SAMPLES_DIAGNOSE = 10
STEPS = (
    "write json",
    "read",
    "json",
    "csv",
    "parquet",
    "markdown",
    "html",
    "png",
    "svg",
    "baseline save",
    "gate",
    "gate table",
    "console table",
)


# ------------------------------------------------------------------------------------------------ reports


def _spread(median: float, n: int, sigma: float = 0.03) -> list[float]:
    """n samples around ``median``, deterministic (log-normal quantiles, interleaved)."""
    from statistics import NormalDist

    normal = NormalDist()
    z = [normal.inv_cdf((i + 0.5) / n) for i in range(n)]
    return [median * math.exp(sigma * z[(i * 7) % n]) for i in range(n)]


def bench_report(rows: int) -> tuple[Any, list[Any], Any]:
    """A bench report of ``rows`` GEMM rows on the H100 sheet; also its typed rows and device."""
    from roofline.analysis import analyze_one
    from roofline.bench.items import expand_items
    from roofline.bench.run import bench_row
    from roofline.measure.engine import Measurement
    from roofline.report.schema import new_report
    from roofline.roofs import device_from_sheet
    from roofline.specs.loader import load_registry

    device = device_from_sheet(load_registry().get("h100-sxm"))
    side = math.ceil(math.sqrt(rows / 10))
    items = expand_items(
        "gemm",
        {
            "m": [16 * (i + 1) for i in range(side)],
            "n": [64 * (i + 1) for i in range(side)],
            "k": [512 * (i + 1) for i in range(10)],
            "dtype": "bf16",
        },
    )[:rows]
    out = []
    for i, item in enumerate(items):
        row = analyze_one(item.kind, item.values, device)
        efficiency = 0.2 + 0.75 * ((i * 37) % 100) / 100
        median = max(row.roof_time_s / efficiency, row.launch_time_s * 1.2)
        samples = _spread(median, SAMPLES_BENCH)
        ordered = sorted(samples)
        m = Measurement(median, ordered[4], ordered[15], samples, "cuda-events", "cold", "spread", len(samples), 0.1)
        out.append(bench_row(row, m, item, op="gemm torch.matmul bf16", cache="cold"))
    report = new_report("roofline bench scale.yaml -o bench.json", "bench", [device], out).model_copy(
        update={
            "bench": {"device_kind": "cuda", "gpu": "NVIDIA H100", "sheet": "h100-sxm", "suite": {"name": "scale"}},
            "machine": {"kind": "cuda", "name": "NVIDIA H100 80GB HBM3", "sheet": "h100-sxm"},
            "skipped": [],
            "interrupted": False,
            "total": len(out),
        }
    )
    return report, out, device


def diagnose_result(rows: int) -> Any:
    """A DiagnoseResult of ``rows`` op calls: five ops per block in 1,000 modules, call sites repeated."""
    from roofline.diagnose.pipeline import DiagnoseResult
    from roofline.diagnose.place import place
    from roofline.report.records import OpRecord, OpTiming, Timing
    from roofline.roofs import device_from_sheet
    from roofline.specs.loader import load_registry

    device = device_from_sheet(load_registry().get("h100-sxm"))
    records, ops = [], []
    for index in range(rows):
        block, which = divmod(index, 5)
        module = f"blocks.{block % 1000}.mlp"
        tokens = 64 * (1 + (block // 1000) % 16)
        width = 1024
        if which == 0:
            op, shapes, out, flops, nbytes, math_ = (
                "aten::mm",
                ((tokens, width), (width, 4 * width)),
                ((tokens, 4 * width),),
                2 * tokens * width * 4 * width,
                2 * (tokens * width + width * 4 * width + tokens * 4 * width),
                "tensor",
            )
        elif which == 1:
            op, shapes, out, flops, nbytes, math_ = (
                "aten::gelu",
                ((tokens, 4 * width),),
                ((tokens, 4 * width),),
                8 * tokens * 4 * width,
                4 * tokens * 4 * width,
                "vector",
            )
        elif which == 2:
            op, shapes, out, flops, nbytes, math_ = (
                "aten::add",
                ((tokens, width), (tokens, width)),
                ((tokens, width),),
                tokens * width,
                6 * tokens * width,
                "vector",
            )
        elif which == 3:
            op, shapes, out, flops, nbytes, math_ = (
                "aten::native_layer_norm",
                ((tokens, width),),
                ((tokens, width),),
                5 * tokens * width,
                4 * tokens * width,
                "vector",
            )
        else:
            op, shapes, out = "aten::view", ((tokens, width),), ((tokens * width,),)
            flops, nbytes, math_ = 0, 0, "none"
        records.append(
            OpRecord(
                index=index,
                op=op,
                module=module,
                module_type="MLP",
                phase="forward",
                input_shapes=shapes,
                input_dtypes=tuple("bf16" for _ in shapes),
                output_shapes=out,
                flops=flops,
                bytes=nbytes,
                dtype="bf16",
                math=math_,
            )
        )
        if math_ != "none":
            floor = nbytes / 3.35e12 + 4e-6
            time_s = floor * (1.2 + ((index * 37) % 100) / 25)
            ops.append(OpTiming(index, time_s, 1, samples_s=tuple(_spread(time_s, SAMPLES_DIAGNOSE))))
    wall = sum(t.device_time_s for t in ops) * 1.1
    timing = Timing(
        device="cuda", iterations=SAMPLES_DIAGNOSE, wall_s=wall, ops=ops, kernel_count=len(ops), gpu_busy_s=wall / 1.1
    )
    placed = place(records, timing, device)
    options = {"entry": None, "device": "cuda", "dtype": "bf16", "mode": "inference", "warmup": 1}
    options.update(iters=SAMPLES_DIAGNOSE, argv=[])
    return DiagnoseResult(Path("scale_model.py"), "model", options, device, records, timing, placed, [])


# ------------------------------------------------------------------------------------------------ timing


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def steps(kind: str, path: Path, report: Any, console: Callable[[], str]) -> dict[str, float]:
    """Seconds per step for one report written at ``path`` (``report``: the one written)."""
    from dataclasses import replace

    from roofline.api import known_devices
    from roofline.cli.output import chart_content
    from roofline.gate import check
    from roofline.render.gate import GateRenderer
    from roofline.render.report_html import HtmlReportRenderer
    from roofline.render.report_markdown import MarkdownReportRenderer
    from roofline.report import baseline as baselines
    from roofline.report.chart import NamedReport, report_chart
    from roofline.report.export import to_csv, to_parquet
    from roofline.report.points import report_document, report_points
    from roofline.report.schema import read_report, write_report

    seconds: dict[str, float] = {}
    seconds["write json"], _ = timed(lambda: write_report(report, path))
    seconds["read"], loaded = timed(lambda: read_report(path))
    name = path.stem
    seconds["json"], _ = timed(lambda: loaded.to_json())
    seconds["csv"], _ = timed(lambda: to_csv(loaded, name))
    seconds["parquet"], _ = timed(lambda: to_parquet(loaded, name))

    def document(fmt: str) -> str:  # as `roofline report --format markdown|html` does it
        points = report_points(loaded, name)  # once, for the chart and the page
        spec = report_chart([NamedReport(name, loaded, points)], known_devices, marks=fmt == "html")
        doc = report_document(loaded, name, notes=spec.notes, points=points)
        if fmt == "markdown":
            return MarkdownReportRenderer().render(doc)
        svg = chart_content(replace(spec, notes=()), "svg") if spec.counts.get("plotted") else ""
        return HtmlReportRenderer(chart_svg=str(svg)).render(doc)

    seconds["markdown"], _ = timed(lambda: document("markdown"))
    seconds["html"], _ = timed(lambda: document("html"))

    def chart(fmt: str) -> Any:  # as `roofline plot` does it
        from roofline.api import chart_spec

        return chart_content(chart_spec([loaded]), fmt)

    seconds["png"], _ = timed(lambda: chart("png"))
    seconds["svg"], _ = timed(lambda: chart("svg"))
    base_path = path.with_suffix(".baseline.json")
    if base_path.exists():
        base_path.unlink()
    seconds["baseline save"], _ = timed(
        lambda: baselines.save(baselines.from_report(loaded, path=path, commit="0" * 40), base_path)
    )
    seconds["gate"], result = timed(lambda: check(loaded, baselines.load(base_path)))
    seconds["gate table"], _ = timed(lambda: GateRenderer(color=False).render(result))
    seconds["console table"], _ = timed(console)
    return seconds


def cli_runs(kind: str, path: Path, work: Path, repeat: int, compare: Path | None) -> dict[str, dict[str, Any]]:
    """Fresh `python -m roofline` processes per format (wall seconds): each command ``repeat`` times, alternating
    with the ``compare`` source tree where given; the medians, every time, and the ratio (this / compare)."""
    trees = {"this": ROOT, **({"compare": compare} if compare else {})}
    commands = {
        "report csv": ["report", str(path), "-o", str(work / f"{kind}.csv")],
        "report parquet": ["report", str(path), "-o", str(work / f"{kind}.parquet")],
        "report markdown": ["report", str(path), "-o", str(work / f"{kind}.md")],
        "report html": ["report", str(path), "-o", str(work / f"{kind}.html")],
        "plot png": ["plot", str(path), "-o", str(work / f"{kind}.png")],
        "plot svg": ["plot", str(path), "-o", str(work / f"{kind}.svg")],
        "baseline save": ["baseline", "save", str(path), "-o", str(work / f"{kind}-cli.baseline.json"), "--force"],
        "gate": ["gate", str(path), "--baseline", str(work / f"{kind}-cli.baseline.json")],
    }
    if kind == "diagnose":
        commands["report console"] = ["report", str(path), "--format", "console", "-o", str(work / f"{kind}.txt")]
    results: dict[str, dict[str, Any]] = {}
    for label, args in commands.items():
        times: dict[str, list[float]] = {tree: [] for tree in trees}
        for _ in range(repeat):
            for tree, src in trees.items():
                env = {**os.environ, "COLUMNS": "120", "PYTHONPATH": str(src)}
                start = time.perf_counter()
                done = subprocess.run(
                    [sys.executable, "-m", "roofline", *args, *(["--force"] if args[0] in ("report", "plot") else [])],
                    env=env,
                    capture_output=True,
                    text=True,
                    cwd=str(src),  # NB: `python -m` puts the working directory first on the path: the tree's own
                )
                times[tree].append(time.perf_counter() - start)
                if done.returncode not in (0, 3):  # gate: 3 is inconclusive (a verdict, not a failure to run)
                    raise SystemExit(
                        f"`roofline {' '.join(args)}` ({src}) failed ({done.returncode}): {done.stderr[-800:]}"
                    )
        row: dict[str, Any] = {"median_s": statistics.median(times["this"]), "times_s": times["this"]}
        if compare:
            row["compare_median_s"] = statistics.median(times["compare"])
            row["compare_times_s"] = times["compare"]
            row["ratio"] = row["median_s"] / row["compare_median_s"]
        results[label] = row
        shown = f"{row['median_s']:.2f} s" + (f" (was {row['compare_median_s']:.2f} s)" if compare else "")
        print(f"  cli {kind} {label}: {shown}", file=sys.stderr, flush=True)
    return results


def cli_table(cli: dict[str, dict[str, dict[str, Any]]], size: int, repeat: int, compared: bool) -> str:
    labels = list(dict.fromkeys(label for runs in cli.values() for label in runs))
    header = ["command"]
    for kind in cli:
        header += [kind, f"{kind} before", "ratio"] if compared else [kind]
    lines = [
        f"\n\nCLI, one fresh process each, at {size:,} rows: median wall s of {repeat}"
        + (" (before: the --compare tree, runs alternating)" if compared else ""),
        "| " + " | ".join(header) + " |",
        "|---|" + "---:|" * (len(header) - 1),
    ]
    for label in labels:
        cells = [label]
        for runs in cli.values():
            row = runs.get(label)
            if row is None:
                cells += ["-"] * (3 if compared else 1)
                continue
            cells.append(f"{row['median_s']:.2f}")
            if compared:
                cells += [f"{row['compare_median_s']:.2f}", f"{row['ratio']:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ main


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform()}
    info["cpus"] = os.cpu_count()
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        info["cpu"] = next((line.split(":", 1)[1].strip() for line in text.splitlines() if "Model name" in line), "")
    except OSError:
        pass
    return info


def table(results: dict[str, dict[int, dict[str, float]]], sizes: list[int]) -> str:
    lines = []
    for kind, by_size in results.items():
        header = ["step", *(f"{n:,} rows s" for n in sizes), *(f"x per row {n:,}" for n in sizes[1:])]
        lines.append(f"\n{kind}")
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|")
        for step in STEPS:
            cells = [step]
            values = [by_size[n].get(step) for n in sizes]
            cells += [f"{v:.3f}" if v is not None else "-" for v in values]
            first = values[0]
            for n, v in zip(sizes[1:], values[1:], strict=True):
                ratio = (v / n) / (first / sizes[0]) if v is not None and first else None
                cells.append(f"{ratio:.2f}" if ratio is not None else "-")
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--cli-size", type=int, default=100_000)
    parser.add_argument("--no-cli", action="store_true")
    parser.add_argument("--cli-repeat", type=int, default=3, help="Fresh processes per command (the median).")
    parser.add_argument(
        "--compare", type=Path, default=None, help="Another source tree to run the CLI with too (code before a change)."
    )
    parser.add_argument("--kinds", default="bench,diagnose")
    parser.add_argument("--work", type=Path, default=None, help="Where the reports go (default: a temporary folder).")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "report_scale.json")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    kinds = args.kinds.split(",")
    os.environ.setdefault("COLUMNS", "120")
    with tempfile.TemporaryDirectory(prefix="roofline-scale-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        os.environ["ROOFLINE_CACHE_DIR"] = str(work / "cache")  # no calibration of this machine on the charts
        results: dict[str, dict[int, dict[str, float]]] = {}
        built: dict[str, dict[int, float]] = {}
        cli: dict[str, dict[str, dict[str, Any]]] = {}
        for kind in kinds:
            results[kind], built[kind] = {}, {}
            for n in sizes:
                start = time.perf_counter()
                if kind == "bench":
                    from roofline.render.bench import BenchRenderer

                    report, rows, device = bench_report(n)

                    def console(rows: Any = rows, device: Any = device) -> str:
                        return BenchRenderer(device, timing="cuda events", color=False).render(rows)

                else:
                    from roofline.render.diagnose import DiagnoseRenderer

                    result = diagnose_result(n)
                    import roofline.specs.detect as detect_module

                    # the machine of the made-up run, not of this one (no NVML probe)
                    real = detect_module.describe_machine
                    detect_module.describe_machine = lambda *a, **k: {"kind": "cuda", "name": "NVIDIA H100 80GB HBM3"}
                    try:
                        report = result.report("roofline diagnose scale_model.py")
                    finally:
                        detect_module.describe_machine = real

                    def console(report: Any = report) -> str:
                        return DiagnoseRenderer(color=False).render(report)

                built[kind][n] = time.perf_counter() - start
                path = work / f"{kind}-{n}.json"
                print(f"{kind} {n:,} rows: built in {built[kind][n]:.1f} s", file=sys.stderr, flush=True)
                results[kind][n] = steps(kind, path, report, console)
                print(
                    "  " + ", ".join(f"{k} {v:.2f}" for k, v in results[kind][n].items()), file=sys.stderr, flush=True
                )
                if n == args.cli_size and not args.no_cli:
                    cli[kind] = cli_runs(kind, path, work, args.cli_repeat, args.compare)
                del report
                gc.collect()
    text = table(results, sizes)
    if cli:
        text += cli_table(cli, args.cli_size, args.cli_repeat, args.compare is not None)
    print(text)
    document = {
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": "python benchmarks/report_scale.py " + " ".join(sys.argv[1:]),
        "machine": machine(),
        "samples_per_row": {"bench": SAMPLES_BENCH, "diagnose": SAMPLES_DIAGNOSE},
        "build_s": {k: {str(n): v for n, v in d.items()} for k, d in built.items()},
        "seconds": {k: {str(n): v for n, v in d.items()} for k, d in results.items()},
        "cli_size": args.cli_size if cli else None,
        "cli_repeat": args.cli_repeat if cli else None,
        "cli_compare": str(args.compare) if args.compare else None,
        "cli_seconds": cli,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out, json.dumps(document, indent=2) + "\n")
    print(f"\nwritten to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()

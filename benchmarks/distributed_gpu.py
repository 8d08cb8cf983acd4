r"""GPU checks of distributed diagnosis (issue 24), on a machine of 2 or more GPUs:

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
        python benchmarks/distributed_gpu.py --nproc 2 --out benchmarks/results/distributed-h100x2

1. `roofline calibrate --collectives --nproc N --refresh`: all-reduce and all-gather bus bandwidth over message
   sizes (8 KiB .. 1 GiB), calls launched from the host and replayed from a CUDA graph, and the communication roof
   fitted under them (checked against the spec sheet's link peak);
2. in the same run, before and after calibrate, a reference written here, independent of roofline's code (this
   file as its own torchrun worker): nccl-tests' method (5 warm-up calls, a barrier, N calls back to back between two
   CUDA events, time per call = elapsed / N, the slowest rank's, the median of 9 such batches; N = 20, nccl-tests'
   -n default, or more where 20 calls take under 2 ms; and the same N calls replayed from a CUDA graph, nccl-tests'
   -G, its batches alternating with the host's; the shorter of the two, as calibrate keeps), and the per-call timing
   of the first round (each call between its own events after a barrier, the median of 20, the slowest rank's),
   which includes each call's launch and the ranks' skew. Its figures are the mean of the two runs; the ratio of
   the two runs is the method's own noise, shown beside calibrate's difference;
   then, interleaved (--rounds, default 9; --interleave-mib, default 8,32,128): at each size, rounds of the
   reference's point and calibrate's (roofline.measure.collectives.sweep at that one size) back to back in the same
   processes, their order swapped every round, so that both see the same moments of the link and the clocks (the
   separate runs above are minutes apart, and the method moves by more than 3% between them at 8 MiB); the medians
   over the rounds are compared, each method's spread over the rounds shown, and the SM clock read (NVML) at each
   round;
3. `roofline diagnose --nproc N --mode training` of a GPT-2-small-like step under DDP (benchmarks/models/gpt2_ddp.py)
   and under FSDP (benchmarks/models/gpt2_fsdp.py): per-rank iteration, transfer, wait, exposed and overlapped
   time, the largest collectives on the roof, the findings of rank 0 ranked with its op findings;
4. the checks of issue 24: every collective's bus bandwidth at or under the roof's curve at its size; the roof
   within 10% of the best measured bus bandwidth and under the sheet's link peak; calibrate within 3% of the
   nccl-tests reference at 8 MiB and above; FSDP's message sizes against the model's parameters (FSDP2 pads each
   parameter's first dimension to a multiple of the ranks).

NVLink multicast stays off: the three variables above are forced on for every process started here (a machine
shared with others can be put out of service by a program that uses it). Writes calibrate.json, reference.json,
reference-after.json, interleaved.json, ddp.json, fsdp.json (the merged reports), summary.json and summary.md into
--out; prints the tables. A step that fails is recorded with its error and the others still run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # NB: roofline from this checkout, installed or not
MODELS = Path(__file__).resolve().parent / "models"
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
WARMUP, REPEATS, BATCHES = 5, 20, 9
MIN_BATCH_S = 2e-3  # a timed batch lasts at least this long (calibrate's rule, written here on its own)


def env(extra: dict[str, str] | None = None) -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, **(extra or {}), **NO_MULTICAST, "PYTHONPATH": path, "COLUMNS": "160"}


def run(command: list[str], timeout: float, extra: dict[str, str] | None = None) -> tuple[int, str, str, float]:
    start = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env(extra), timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        return 124, exc.stdout or "", f"timed out after {timeout:g} s", time.perf_counter() - start
    return done.returncode, done.stdout, done.stderr, time.perf_counter() - start


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


# ------------------------------------------------------------------------------------------------ the worker


def _setup() -> tuple[Any, Any, int]:
    import torch
    import torch.distributed as dist

    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    return torch, dist, dist.get_world_size()


def reference_row(kind: str, size: int, per_call_timing: bool = False) -> dict[str, Any]:
    """The reference at one (kind, size) on the initialised process group: nccl-tests' method, host-launched and
    CUDA-graph batches alternating, the median of each, the shorter kept; and, with ``per_call_timing``, the median
    of 20 calls each timed alone."""
    import torch
    import torch.distributed as dist

    n = dist.get_world_size()

    def slowest(seconds: float) -> float:
        value = torch.tensor([seconds], dtype=torch.float64, device="cuda")
        dist.all_reduce(value, op=dist.ReduceOp.MAX)
        return float(value.item())

    numel = max(size // 4 // n * n, n)
    if kind == "all_reduce":
        buffer = torch.ones(numel, device="cuda")

        def call(buffer=buffer):
            dist.all_reduce(buffer)
    else:
        part, whole = torch.ones(numel // n, device="cuda"), torch.empty(numel, device="cuda")

        def call(part=part, whole=whole):
            dist.all_gather_into_tensor(whole, part)

    for _ in range(WARMUP):
        call()

    def batch(run, count: int) -> float:  # nccl-tests: a barrier, count calls between two events, / count
        torch.cuda.synchronize()
        dist.barrier()
        torch.cuda.synchronize()
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        run()
        end.record()
        end.synchronize()
        return slowest(begin.elapsed_time(end) * 1e-3 / count)

    def eager(call=call, count: int = REPEATS) -> None:
        for _ in range(count):
            call()

    # nccl-tests' -n 20, more calls where 20 take under MIN_BATCH_S (one batch is then not one hiccup)
    probe = batch(eager, REPEATS)
    count = min(max(REPEATS, math.ceil(MIN_BATCH_S / probe)), 1000)
    # nccl-tests -G: the same calls captured in a CUDA graph, the graph replayed
    graph, side = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    with torch.cuda.graph(graph, stream=side, capture_error_mode="thread_local"):
        eager(count=count)
    graph.replay()
    hosts, replays = [], []
    for _ in range(BATCHES):  # the two methods' batches alternate: a slow moment falls on both
        hosts.append(batch(lambda count=count: eager(count=count), count))
        replays.append(batch(graph.replay, count))
    back_to_back, replayed = statistics.median(hosts), statistics.median(replays)
    del graph
    per_call = None
    if per_call_timing:  # each call alone between its events
        times = []
        for _ in range(REPEATS):
            torch.cuda.synchronize()
            dist.barrier()
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            call()
            end.record()
            end.synchronize()
            times.append(begin.elapsed_time(end) * 1e-3)
        times.sort()
        per_call = slowest(times[len(times) // 2])
    factor = 2 * (n - 1) / n if kind == "all_reduce" else (n - 1) / n
    nbytes = numel * 4
    best = min(back_to_back, replayed)
    return {
        "kind": kind,
        "bytes": nbytes,
        "time_s": best,
        "busbw_bytes_per_s": nbytes / best * factor,
        "calls": count,
        "eager_time_s": back_to_back,
        "graph_time_s": replayed,
        "per_call_time_s": per_call,
        "per_call_busbw_bytes_per_s": None if per_call is None else nbytes / per_call * factor,
    }


def plain_worker(sizes: list[int], out: Path) -> None:
    """One rank of the reference timings (started by torchrun from main()): nccl-tests' method and the per-call
    timing, all-reduce and all-gather, fp32 buffers of ``sizes`` bytes."""
    _, dist, n = _setup()
    rows = [reference_row(k, s, per_call_timing=k == "all_reduce") for k in ("all_reduce", "all_gather") for s in sizes]
    if dist.get_rank() == 0:
        doc = {"world_size": n, "warmup": WARMUP, "repeats": REPEATS, "batches": BATCHES, "rows": rows}
        out.write_text(json.dumps(doc, indent=2))
    dist.destroy_process_group()


def sm_clock_mhz(torch: Any) -> int | None:
    """This rank's GPU's SM clock now (NVML through torch; read only), None where it cannot be read."""
    try:
        return int(torch.cuda.clock_rate())
    except Exception:  # NB: no pynvml, or a driver that does not say
        return None


def interleaved_worker(sizes: list[int], rounds: int, out: Path) -> None:
    """One rank of the interleaved comparison: at each (kind, size), ``rounds`` rounds of the reference's point
    (reference_row) and calibrate's (roofline.measure.collectives.sweep at that one size), back to back in the same
    processes, their order swapped every round: both see the same moments of the link and the clocks, so what
    differs between them is the method, not the minute it ran in."""
    torch, dist, n = _setup()
    from roofline.measure.collectives import sweep

    rows = []
    for kind in ("all_reduce", "all_gather"):
        for size in sizes:
            pairs = []
            for r in range(rounds):
                got: dict[str, float] = {}
                order = ("reference", "calibrate") if r % 2 == 0 else ("calibrate", "reference")
                clock = sm_clock_mhz(torch)
                for who in order:
                    if who == "reference":
                        got["reference"] = reference_row(kind, size)["time_s"]
                    else:
                        (p,), _ = sweep(device="cuda", sizes=[size], kinds=[kind])
                        got["calibrate"] = p.time_s
                pairs.append({"round": r, "first": order[0], "sm_clock_mhz": clock, **got})
            rows.append({"kind": kind, "bytes": max(size // 4 // n * n, n) * 4, "rounds": pairs})
    if dist.get_rank() == 0:
        out.write_text(json.dumps({"world_size": n, "rounds": rounds, "rows": rows}, indent=2))
    dist.destroy_process_group()


# ------------------------------------------------------------------------------------------------ the checks


def calibrate(nproc: int, out: Path, timeout: float) -> dict[str, Any]:
    command = [
        sys.executable, "-m", "roofline", "calibrate", "--collectives", "--nproc", str(nproc), "--refresh", "--json",
    ]  # fmt: skip
    code, stdout, stderr, seconds = run(command, timeout)
    first_error = ""
    if code != 0:  # once more without the CUDA-graph replay, the failure kept
        first_error = last_line(stderr)
        (out / "calibrate-graphs-failed.txt").write_text(stderr[-20000:])
        code, stdout, stderr, more = run(command, timeout, {"ROOFLINE_COLLECTIVE_GRAPHS": "0"})
        seconds += more
    if code != 0:
        return {"ok": False, "error": last_line(stderr), "seconds": seconds, "graphs_error": first_error}
    (out / "calibrate.json").write_text(stdout)
    return {"ok": True, "doc": json.loads(stdout), "seconds": seconds}


def plain(nproc: int, sizes: list[int], target: Path, timeout: float) -> dict[str, Any]:
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
        str(Path(__file__).resolve()), "--worker", "--sizes", ",".join(map(str, sizes)), "--out", str(target),
    ]  # fmt: skip
    code, _, stderr, seconds = run(command, timeout)
    if code != 0 or not target.is_file():
        return {"ok": False, "error": last_line(stderr), "seconds": seconds}
    return {"ok": True, "doc": json.loads(target.read_text()), "seconds": seconds}


def interleaved(nproc: int, sizes: list[int], rounds: int, target: Path, timeout: float) -> dict[str, Any]:
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
        str(Path(__file__).resolve()), "--worker", "--interleave", "--rounds", str(rounds),
        "--sizes", ",".join(map(str, sizes)), "--out", str(target),
    ]  # fmt: skip
    code, _, stderr, seconds = run(command, timeout)
    if code != 0 or not target.is_file():
        return {"ok": False, "error": last_line(stderr), "seconds": seconds}
    return {"ok": True, "doc": json.loads(target.read_text()), "seconds": seconds}


def interleaved_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Per (kind, bytes) of the interleaved comparison: each method's median time over the rounds, calibrate's
    busbw over the reference's (reference median / calibrate median), the median of the rounds' own ratios, and
    each method's spread over the rounds (slowest / fastest round: how much the moment moved them)."""
    from roofline.costs.collectives import bus_factor

    run_ = summary.get("interleaved") or {}
    if not run_.get("ok"):
        return []
    n = run_["doc"]["world_size"]
    out = []
    for row in run_["doc"]["rows"]:
        cal = [r["calibrate"] for r in row["rounds"]]
        ref = [r["reference"] for r in row["rounds"]]
        factor = bus_factor(row["kind"], n)
        ratio = statistics.median(ref) / statistics.median(cal)
        clocks = [r["sm_clock_mhz"] for r in row["rounds"] if r.get("sm_clock_mhz")]
        out.append({
            "kind": row["kind"],
            "bytes": row["bytes"],
            "rounds": len(cal),
            "calibrate_busbw": row["bytes"] / statistics.median(cal) * factor,
            "reference_busbw": row["bytes"] / statistics.median(ref) * factor,
            "calibrate_over_reference": ratio,
            "median_round_ratio": statistics.median(b / a for a, b in zip(cal, ref, strict=True)),
            "calibrate_spread": max(cal) / min(cal),
            "reference_spread": max(ref) / min(ref),
            "sm_clock_mhz": (min(clocks), max(clocks)) if clocks else None,
            "within_3pct": abs(ratio - 1) <= 0.03,
        })  # fmt: skip
    return out


def diagnose(name: str, nproc: int, out: Path, timeout: float) -> dict[str, Any]:
    target = out / f"{name}.json"
    command = [
        sys.executable, "-m", "roofline", "diagnose", str(MODELS / f"gpt2_{name}.py"), "--nproc", str(nproc),
        "--mode", "training", "-o", str(target), "--plot", str(out / f"{name}.png"),
    ]  # fmt: skip
    code, stdout, stderr, seconds = run(command, timeout)
    (out / f"{name}.txt").write_text(stdout + "\n--- stderr ---\n" + stderr)
    if code != 0 or not target.is_file():
        return {"ok": False, "error": last_line(stderr), "seconds": seconds}
    doc = json.loads(target.read_text())
    section = doc.get("distributed", {})
    rows = section.get("collectives", [])
    top = sorted(rows, key=lambda c: -(c.get("time_s") or 0) * (c.get("calls") or 1))
    findings = doc.get("findings") or (doc.get("diagnose") or {}).get("findings") or []
    return {
        "ok": True,
        "seconds": seconds,
        "ranks": section.get("ranks", []),
        "skew": section.get("skew"),
        "roof": section.get("roof"),
        "notes": section.get("notes", []),
        "collectives": rows,
        "top_collectives": top[:10],
        "findings": [{k: f.get(k) for k in ("rule", "rank", "evidence", "gain")} for f in section.get("findings", [])],
        "rank0_findings": [
            {k: f.get(k) for k in ("rule", "where", "share", "saving_s", "gain", "technique")} for f in findings
        ][:8],
    }


def roof_busbw(roof: dict[str, Any], bus_bytes: float) -> float:
    """The roof's bus bandwidth at ``bus_bytes``, as the report's roof defines it (roofline.costs.collectives)."""
    from roofline.costs.collectives import CommRoof

    return CommRoof(
        float(roof["bus_bytes_per_s"]), float(roof["latency_s"]), str(roof.get("source", ""))
    ).bus_bandwidth(bus_bytes)


def fsdp_expected(nproc: int) -> dict[str, Any]:
    """FSDP2's message per unit from the model's parameters (on the meta device): the all-gathered (and
    reduce-scattered) bytes of a unit = its parameters' element counts, each first dimension padded to a multiple
    of the ranks, x 2 bytes (bf16). Units: each block, and the root (the final LayerNorm)."""
    sys.path.insert(0, str(MODELS))
    import torch
    from gpt2_dist import GPT

    with torch.device("meta"):
        gpt = GPT()

    def padded(params: Any) -> int:
        total = 0
        for p in params:
            first = -(-p.shape[0] // nproc) * nproc if p.dim() else 1
            rest = p[0].numel() if p.dim() else 1
            total += first * rest
        return total * 2

    blocks = [padded(b.parameters()) for b in gpt.blocks]
    root = padded(gpt.ln.parameters())
    return {"blocks": blocks, "root": root, "sizes": sorted({*blocks, root})}


def reference_rows(summary: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    """The reference at each (kind, bytes): the mean of its two runs (before and after calibrate) where both ran,
    with ``run_to_run`` = the later run's time / the earlier's (what the same method gives twice: the noise)."""
    runs = [summary[k]["doc"]["rows"] for k in ("reference", "reference_after") if summary.get(k, {}).get("ok")]
    merged: dict[tuple[str, int], dict[str, Any]] = {}
    for rows in runs:
        for r in rows:
            merged.setdefault((r["kind"], r["bytes"]), {"runs": []})["runs"].append(r)
    for row in merged.values():
        both = row["runs"]
        row["factor"] = both[0]["busbw_bytes_per_s"] * both[0]["time_s"] / both[0]["bytes"]
        for key in ("time_s", "eager_time_s", "graph_time_s", "per_call_time_s"):
            values = [r[key] for r in both if r.get(key)]
            row[key] = statistics.fmean(values) if values else None
        row["busbw_bytes_per_s"] = both[0]["bytes"] / row["time_s"] * row["factor"]
        per_call = row["per_call_time_s"]
        row["per_call_busbw_bytes_per_s"] = None if not per_call else both[0]["bytes"] / per_call * row["factor"]
        row["run_to_run"] = both[1]["time_s"] / both[0]["time_s"] if len(both) == 2 else None
    return merged


def checks(summary: dict[str, Any]) -> dict[str, Any]:
    """Issue 24's checks over a run's summary."""
    out: dict[str, Any] = {}
    cal, refs = summary["calibrate"], reference_rows(summary)
    if cal["ok"]:
        doc = cal["doc"]
        link = (doc.get("link") or {}).get("bytes_per_s")
        for roof in doc["roofs"]:
            best = max(p["busbw_bytes_per_s"] for p in doc["points"] if p["kind"] == roof["kind"])
            out[f"roof_{roof['kind']}"] = {
                "bus_bytes_per_s": roof["bus_bytes_per_s"],
                "latency_s": roof["latency_s"],
                "best_measured_busbw": best,
                "roof_over_best": roof["bus_bytes_per_s"] / best,
                "within_10pct_of_best": abs(roof["bus_bytes_per_s"] / best - 1) <= 0.10,
                "link_bytes_per_s": link,
                "under_link": None if link is None else roof["bus_bytes_per_s"] <= link,
            }
        if refs:
            agree = []
            for p in doc["points"]:
                r = refs.get((p["kind"], p["bytes"]))
                if r is None:
                    continue
                ratio = r["time_s"] / p["time_s"]  # reference time / calibrate time = calibrate busbw / reference's
                eager = r["time_s"] / p["eager_time_s"] if p.get("eager_time_s") else None
                agree.append({"kind": p["kind"], "bytes": p["bytes"], "calibrate_over_reference": ratio,
                              "eager_over_reference": eager, "large": p["bytes"] >= 8 * 2**20,
                              "reference_run_to_run": r["run_to_run"],
                              "within_3pct": abs(ratio - 1) <= 0.03})  # fmt: skip
            out["calibrate_vs_reference"] = agree
            out["large_within_3pct"] = all(a["within_3pct"] for a in agree if a["large"])
    inter = interleaved_rows(summary)
    if inter:
        out["interleaved"] = inter
        out["interleaved_large_within_3pct"] = all(r["within_3pct"] for r in inter if r["bytes"] >= 8 * 2**20)
    for name in ("ddp", "fsdp"):
        d = summary[name]
        if not d["ok"] or not d.get("roof"):
            continue
        over = []
        for c in d["collectives"]:
            if c.get("bus_bytes") and c.get("busbw_bytes_per_s"):
                ceiling = roof_busbw(d["roof"], c["bus_bytes"])
                if c["busbw_bytes_per_s"] > ceiling * (1 + 1e-9):
                    over.append({k: c.get(k) for k in ("rank", "kind", "phase", "bytes", "time_s", "wait_s",
                                                       "busbw_bytes_per_s")} | {"roof_busbw": ceiling})  # fmt: skip
        out[f"{name}_over_roof"] = over
        out[f"{name}_collectives_at_or_under_roof"] = not over
    if summary["fsdp"]["ok"]:
        expected = summary.get("fsdp_expected") or {}
        sizes = set(expected.get("sizes", []))
        seen: dict[str, list[Any]] = {}
        for c in summary["fsdp"]["collectives"]:
            if c.get("rank") == 0 and c.get("source") == "counted":
                seen.setdefault(f"{c['kind']} {c.get('phase')}", []).append(c["bytes"])
        out["fsdp_messages"] = {k: {"calls": len(v), "sizes": sorted(set(v))} for k, v in seen.items()}
        out["fsdp_sizes_match_parameters"] = all(b in sizes for v in seen.values() for b in v)
    return out


def fmt_bw(value: float | None) -> str:
    return "-" if value is None else f"{value / 1e9:.2f} GB/s"


def fmt_t(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1e3:.3f} ms" if value >= 1e-3 else f"{value * 1e6:.1f} us"


def fmt_b(value: float | None) -> str:
    if value is None:
        return "-"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= size:
            return f"{value / size:g} {unit}"
    return f"{value:g} B"


def markdown(summary: dict[str, Any]) -> str:
    lines = [f"# Distributed checks ({summary['device']}, {summary['nproc']} ranks, {summary['date']})", ""]
    cal, chk, by = summary["calibrate"], summary["checks"], reference_rows(summary)
    lines += ["## Bus bandwidth: roofline calibrate --collectives vs the nccl-tests method (reference)", ""]
    lines += [
        "The reference ran twice, before and after calibrate; its figures are the mean of the two runs, and "
        "'reference run to run' is the later run's time over the earlier's: what the same method gives twice.",
        "",
    ]
    if cal["ok"] and by:
        lines += [
            "| kind | message | calibrate busbw | calibrate (host launches) | calibrate (CUDA graph) | reference "
            "(nccl-tests method) | reference (host launches) | reference (CUDA graph) | calibrate / reference | "
            "reference run to run | per-call timing |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        factor = {p["kind"]: p["busbw_bytes_per_s"] / p["algbw_bytes_per_s"] for p in cal["doc"]["points"]}
        for p in cal["doc"]["points"]:
            r = by.get((p["kind"], p["bytes"]))
            f = factor[p["kind"]]

            def bw(t: float | None, p: dict[str, Any] = p, f: float = f) -> str:
                return "-" if not t else fmt_bw(p["bytes"] / t * f)

            lines.append(
                f"| {p['kind']} | {fmt_b(p['bytes'])} | {fmt_bw(p['busbw_bytes_per_s'])} | "
                f"{bw(p.get('eager_time_s'))} | "
                f"{bw(p.get('graph_time_s'))} | {fmt_bw(r['busbw_bytes_per_s']) if r else '-'} | "
                f"{bw(r.get('eager_time_s')) if r else '-'} | {bw(r.get('graph_time_s')) if r else '-'} | "
                f"{(r['time_s'] / p['time_s']) if r else float('nan'):.3f} | "
                f"{'-' if not r or r['run_to_run'] is None else format(r['run_to_run'], '.3f')} | "
                f"{fmt_bw(r.get('per_call_busbw_bytes_per_s')) if r else '-'} |"
            )
        for roof in cal["doc"]["roofs"]:
            c = chk.get(f"roof_{roof['kind']}", {})
            lines.append(
                f"\nroof {roof['kind']}: {fmt_bw(roof['bus_bytes_per_s'])} (best measured "
                f"{fmt_bw(c.get('best_measured_busbw'))}), latency {fmt_t(roof['latency_s'])}; link peak per "
                f"direction {fmt_bw(c.get('link_bytes_per_s'))}: under it: {c.get('under_link')}"
            )
        lines.append(
            f"\ncalibrate within 3% of the reference at 8 MiB and above, separate runs: {chk.get('large_within_3pct')}"
        )
        lines += [f"\nnote: {n}" for n in cal["doc"].get("notes", [])]
    else:
        errors = [f"{k}: {summary[k].get('error', 'ok')}" for k in ("calibrate", "reference", "reference_after")]
        lines.append("; ".join(errors))
    inter = chk.get("interleaved") or []
    lines += ["", "## calibrate and the reference interleaved (the same moments)", ""]
    if inter:
        lines += [
            "Each round times the reference's point and calibrate's (roofline.measure.collectives.sweep at that one "
            "size) back to back in the same processes, their order swapped every round; the medians over the "
            "rounds are compared. 'spread' is a method's slowest round over its fastest: how much the moment "
            "moved it.",
            "",
            "| kind | message | rounds | calibrate busbw | reference busbw | calibrate / reference | median of the "
            "rounds' ratios | calibrate spread | reference spread | SM clock (MHz) | within 3% |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in inter:
            clock = r["sm_clock_mhz"]
            lines.append(
                f"| {r['kind']} | {fmt_b(r['bytes'])} | {r['rounds']} | {fmt_bw(r['calibrate_busbw'])} | "
                f"{fmt_bw(r['reference_busbw'])} | {r['calibrate_over_reference']:.3f} | "
                f"{r['median_round_ratio']:.3f} | {r['calibrate_spread']:.3f} | {r['reference_spread']:.3f} | "
                f"{'-' if not clock else f'{clock[0]}-{clock[1]}'} | {r['within_3pct']} |"
            )
        lines.append(
            f"\ncalibrate within 3% of the reference at 8 MiB and above, interleaved: "
            f"{chk.get('interleaved_large_within_3pct')}"
        )
    else:
        lines.append(f"not run: {(summary.get('interleaved') or {}).get('error', 'not asked for')}")
    for name in ("ddp", "fsdp"):
        d = summary[name]
        lines += ["", f"## GPT-2-like training step under {name.upper()} ({d.get('seconds', 0):.0f} s)", ""]
        if not d["ok"]:
            lines.append(f"failed: {d['error']}")
            continue
        lines += [
            "| rank | iteration | profiled | transfer | overlapped | exposed | wait | exposed wait |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in d["ranks"]:
            lines.append(
                f"| {r['rank']} | {fmt_t(r['iteration_s'])} | {fmt_t(r.get('profiled_iteration_s'))} | "
                f"{fmt_t(r['communication_s'])} | {fmt_t(r['overlapped_s'])} | {fmt_t(r['exposed_s'])} | "
                f"{fmt_t(r.get('wait_s'))} | {fmt_t(r.get('exposed_wait_s'))} |"
            )
        lines += [
            "",
            "| rank | collective | phase | calls | bytes | transfer | wait | busbw | of roof |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for c in d["top_collectives"]:
            eff = c.get("efficiency")
            lines.append(
                f"| {c['rank']} | {c['kind']} | {c.get('phase', '')} | {c['calls']:g} | {fmt_b(c['bytes'])} | "
                f"{fmt_t(c['time_s'])} | {fmt_t(c.get('wait_s'))} | {fmt_bw(c.get('busbw_bytes_per_s'))} | "
                f"{'-' if eff is None else f'{eff:.0%}'} |"
            )
        lines.append(f"\nevery collective at or under the roof: {chk.get(f'{name}_collectives_at_or_under_roof')}")
        for o in chk.get(f"{name}_over_roof", [])[:5]:
            lines.append(f"- over the roof: {o}")
        lines += ["", "rank 0's findings, ranked by saving (ops and communication together):"]
        for f in d["rank0_findings"]:
            gain = f.get("gain")
            lines.append(f"- {f['rule']} ({f.get('where')}): share {f.get('share') or 0:.0%}, "
                         f"at most {gain:.3g}x" if gain else f"- {f['rule']} ({f.get('where')})")  # fmt: skip
        lines += [f"- note: {n}" for n in d.get("notes", [])]
    if "fsdp_messages" in chk:
        lines += ["", f"FSDP messages on rank 0 (expected sizes {summary.get('fsdp_expected', {}).get('sizes')}):"]
        for k, v in chk["fsdp_messages"].items():
            lines.append(f"- {k}: {v['calls']} calls, sizes {v['sizes']}")
        lines.append(f"sizes match the parameters: {chk.get('fsdp_sizes_match_parameters')}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/distributed"))
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds for each step")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--sizes", default="", help=argparse.SUPPRESS)
    parser.add_argument("--interleave", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=9, help="rounds of the interleaved comparison (0: skip it)")
    parser.add_argument(
        "--interleave-mib", default="8,32,128", help="message sizes (MiB) of the interleaved comparison"
    )
    args = parser.parse_args()
    if args.worker:
        sizes = [int(s) for s in args.sizes.split(",") if s]
        if args.interleave:
            interleaved_worker(sizes, args.rounds, args.out)
        else:
            plain_worker(sizes, args.out)
        return
    os.environ.update(NO_MULTICAST)
    import torch

    gpus = torch.cuda.device_count()
    if gpus < args.nproc or args.nproc < 2:
        sys.exit(f"needs {max(args.nproc, 2)} GPUs, this machine shows {gpus}")
    args.out.mkdir(parents=True, exist_ok=True)
    from roofline.measure.collectives import GPU_SIZES

    summary: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0),
        "nproc": args.nproc,
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "torch": torch.__version__,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "env": NO_MULTICAST,
    }
    print("1/5 reference, before calibrate (nccl-tests method, per-call timing)", flush=True)
    summary["reference"] = plain(args.nproc, list(GPU_SIZES), args.out / "reference.json", args.timeout)
    print(f"2/5 calibrate --collectives ({args.nproc} ranks)", flush=True)
    summary["calibrate"] = calibrate(args.nproc, args.out, args.timeout)
    print("3/5 reference, after calibrate", flush=True)
    summary["reference_after"] = plain(args.nproc, list(GPU_SIZES), args.out / "reference-after.json", args.timeout)
    if args.rounds > 0:
        print(f"3b/5 calibrate and the reference interleaved ({args.rounds} rounds)", flush=True)
        mib = [int(float(x) * 2**20) for x in args.interleave_mib.split(",") if x]
        summary["interleaved"] = interleaved(args.nproc, mib, args.rounds, args.out / "interleaved.json", args.timeout)
    print("4/5 diagnose DDP", flush=True)
    summary["ddp"] = diagnose("ddp", args.nproc, args.out, args.timeout)
    print("5/5 diagnose FSDP", flush=True)
    summary["fsdp"] = diagnose("fsdp", args.nproc, args.out, args.timeout)
    try:
        summary["fsdp_expected"] = fsdp_expected(args.nproc)
    except Exception as exc:  # NB: the check's own failure is recorded, the run's results kept
        summary["fsdp_expected"] = {"error": f"{type(exc).__name__}: {exc}"}
    summary["checks"] = checks(summary)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    text = markdown(summary)
    (args.out / "summary.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()

"""`roofline diagnose --counters`: the model's iteration profiled by Nsight Compute, in a child process.

ncu profiles a process it starts, and replays each kernel once per group of counters, so the counters come from a
dedicated child -- ``python -m roofline.diagnose.counters MODEL.py ...`` -- that loads the model as diagnose does
(same device, dtype, mode, entry and script arguments), runs the warm-up iterations, then one iteration inside the
NVTX range roofline.measure.ncu.NVTX_RANGE, the only kernels ncu profiles (the counting pass and the warm-up are
left out). :func:`collect` runs it under ncu (roofline.measure.ncu.run_ncu) and returns the launches' counters.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from roofline.measure.ncu import NVTX_RANGE, KernelCounters, run_ncu


def child_command(
    path: str | Path,
    *,
    device: str,
    mode: str = "inference",
    warmup: int = 3,
    dtype: str | None = None,
    entry: str | None = None,
    argv: Sequence[str] = (),
) -> list[str]:
    """The child's command line (this Python, this module)."""
    command = [sys.executable, "-m", "roofline.diagnose.counters", str(Path(path).resolve())]
    command += ["--device", device, "--mode", mode, "--warmup", str(max(warmup, 1))]
    if dtype:
        command += ["--dtype", dtype]
    if entry:
        command += ["--entry", entry]
    return [*command, "--", *argv]


def _env() -> dict[str, str]:
    """This environment, with the directory holding the roofline package first on PYTHONPATH (the child imports
    the same roofline)."""
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([root, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    return env


def collect(
    path: str | Path,
    *,
    device: str,
    mode: str = "inference",
    warmup: int = 3,
    dtype: str | None = None,
    entry: str | None = None,
    argv: Sequence[str] = (),
    which: Callable[[str], str | None] | None = None,
    run: Callable[..., Any] | None = None,
    timeout_s: float | None = None,
) -> list[KernelCounters]:
    """The counters of one iteration of the model under ncu. roofline.measure.ncu.CountersUnavailable (naming
    the fix) when ncu is missing, lacks permission or the run fails."""
    import functools
    import shutil
    import subprocess

    command = child_command(path, device=device, mode=mode, warmup=warmup, dtype=dtype, entry=entry, argv=argv)
    runner = functools.partial(run or subprocess.run, env=_env(), cwd=str(Path(path).resolve().parent))
    with tempfile.TemporaryDirectory(prefix="roofline-ncu-") as workdir:
        return run_ncu(command, Path(workdir), which=which or shutil.which, run=runner, timeout_s=timeout_s)


def main(argv: Sequence[str] | None = None) -> int:
    """The child: load the model, warm up, one iteration inside the NVTX range."""
    parser = argparse.ArgumentParser(prog="python -m roofline.diagnose.counters")
    parser.add_argument("model")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--mode", default="inference")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--dtype", default=None)
    parser.add_argument("--entry", default=None)
    given = list(sys.argv[1:] if argv is None else argv)
    # NB: the script's own arguments follow '--' (argparse's nargs='*' after '--' refuses an empty list)
    cut = given.index("--") if "--" in given else len(given)
    args = parser.parse_args(given[:cut])
    args.script_args = given[cut + 1 :]

    import torch

    from roofline.diagnose.execute import run_once
    from roofline.diagnose.loader import load_model

    loaded = load_model(
        args.model, entry=args.entry, device=args.device, dtype=args.dtype, argv=args.script_args, mode=args.mode
    )
    zero_grad = getattr(loaded.model, "zero_grad", None) if args.mode == "training" else None

    def step() -> None:
        if zero_grad is not None:
            zero_grad(set_to_none=True)
        run_once(loaded.model, loaded.inputs, loaded.kwargs, args.mode)

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(NVTX_RANGE)
    step()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    return 0


__all__ = ["child_command", "collect", "main"]


if __name__ == "__main__":  # pragma: no cover - run by ncu
    sys.exit(main())

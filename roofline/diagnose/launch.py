"""``--nproc N``: run a roofline command on N ranks through torch.distributed.run (torchrun) itself, and tell what
happened in our words.

The parent runs ``python -m torch.distributed.run --nproc-per-node N --tee 3 --redirects 3 --log-dir DIR -m roofline
COMMAND ...`` (the same command without --nproc: each rank finds itself in a torchrun launch and does its part;
rank 0 writes the merged output). torchrun prefixes its ranks' lines ('[default0]:'), so the parent forwards rank
0's standard output as its own, every rank's standard error (other ranks' lines prefixed 'rank N: '), and drops
torchrun's own lines (its banner, its ChildFailedError traceback). A rank that fails writes its one-line error
into the folder named by ``ROOFLINE_RANK_ERRORS``; torchrun then stops the others, and the parent raises the first
failing rank's error (:class:`RankFailed`, that rank's exit code): one line, ``Error: rank R: ...``.

No torch import here: the parent only starts processes.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from roofline.errors import RooflineError, UsageError

ENV_ERRORS = "ROOFLINE_RANK_ERRORS"  # the folder a failing rank writes its error into
ENV_LAUNCHED = "ROOFLINE_NPROC"  # set by the parent: the ranks know they were started by --nproc
_PREFIX = re.compile(r"^\[(?:[A-Za-z_]*?)(\d+)\]:(.*)$")
_DROPPED = re.compile(r"^(Error: |Terminated \(SIG\w+\)\.$|Interrupted\.$)")


class RankFailed(RooflineError):
    """A rank of a --nproc launch failed: its error in one line, its exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def launched(env: dict[str, str] | None = None) -> bool:
    """Whether this process is a rank of a torchrun launch (RANK and WORLD_SIZE in its environment)."""
    env = dict(os.environ) if env is None else env
    return "RANK" in env and "WORLD_SIZE" in env


def rank_of(env: dict[str, str] | None = None) -> int:
    env = dict(os.environ) if env is None else env
    try:
        return int(env.get("RANK", "0"))
    except ValueError:
        return 0


def record_failure(exc: BaseException, env: dict[str, str] | None = None) -> None:
    """In a rank of a --nproc launch: write this rank's error (one line, its exit code) for the parent. Never
    raises (the error itself goes on up)."""
    env = dict(os.environ) if env is None else env
    folder = env.get(ENV_ERRORS)
    if not folder or isinstance(exc, KeyboardInterrupt):
        return
    code = int(getattr(exc, "exit_code", 1) or 1)
    message = str(exc) if isinstance(exc, RooflineError) else f"{type(exc).__name__}: {exc}"
    rank = rank_of(env)
    payload = {"rank": rank, "message": message.splitlines()[0] if message else type(exc).__name__, "exit_code": code}
    payload["time"] = time.time()
    with contextlib.suppress(OSError):
        Path(folder, f"rank-{rank}.json").write_text(json.dumps(payload), encoding="utf-8")


def first_failure(folder: Path) -> dict[str, Any] | None:
    """The earliest error a rank wrote (the others were stopped because of it), or None."""
    found = []
    for path in sorted(Path(folder).glob("rank-*.json")):
        try:
            found.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, RecursionError):
            continue
    return min(found, key=lambda f: (f.get("time", 0.0), f.get("rank", 0)), default=None)


def check_nproc(nproc: int, device_kind: str, gpus: int) -> None:
    """--nproc N: at least 1; on GPUs, one process per GPU, so at most the GPUs visible."""
    if nproc < 1:
        raise UsageError(f"--nproc {nproc}: at least 1")
    if device_kind == "cuda" and gpus == 0:
        raise UsageError(f"--nproc {nproc} --device cuda: torch sees no GPU: use --device cpu (gloo ranks)")
    if device_kind == "cuda" and nproc > gpus:
        raise UsageError(
            f"--nproc {nproc}: this machine shows {gpus} GPU{'s' if gpus != 1 else ''} (one process per GPU): "
            f"use --nproc {max(gpus, 1)} or fewer, or --device cpu"
        )


def torchrun_command(nproc: int, args: Sequence[str], log_dir: Path, python: str = sys.executable) -> list[str]:
    """The torchrun command line that runs ``roofline ARGS`` on ``nproc`` ranks of this machine."""
    return [
        python,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={nproc}",
        "--tee=3",
        "--redirects=3",
        f"--log-dir={log_dir}",
        "-m",
        "roofline",
        *args,
    ]


def route(line: str, stream: str) -> tuple[str, str] | None:
    """Where one line of torchrun's output goes: ('stdout' | 'stderr', text) or None (dropped).

    A rank's line carries torchrun's prefix: rank 0's standard output stays standard output; other ranks' standard
    output goes to standard error, prefixed 'rank N: ', as do their standard error lines; a rank's 'Error: ...' and
    'Terminated' lines are dropped (the parent says the error once). torchrun's own lines (no prefix) are dropped."""
    match = _PREFIX.match(line.rstrip("\n"))
    if match is None:
        return None
    rank, text = int(match.group(1)), match.group(2)
    if _DROPPED.match(text):
        return None
    if stream == "stdout" and rank == 0:
        return "stdout", text
    return "stderr", text if rank == 0 else f"rank {rank}: {text}"


def _pump(source: IO[str], stream: str, write: Callable[[str, str], None]) -> None:
    for line in source:
        routed = route(line, stream)
        if routed is not None:
            write(*routed)


def run_ranks(
    nproc: int,
    args: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    python: str = sys.executable,
    write: Callable[[str, str], None] | None = None,
) -> None:
    """Run ``roofline ARGS`` on ``nproc`` ranks through torch.distributed.run; returns when all succeeded, else
    raises :class:`RankFailed` with the first failing rank's error (or torchrun's exit code when no rank said)."""
    lock = threading.Lock()

    def default_write(where: str, text: str) -> None:
        target = sys.stdout if where == "stdout" else sys.stderr
        with lock:
            target.write(text + "\n")
            target.flush()

    write = write or default_write
    with tempfile.TemporaryDirectory(prefix="roofline-ranks-") as folder:
        errors = Path(folder, "errors")
        errors.mkdir()
        child_env = {**(dict(os.environ) if env is None else env), ENV_ERRORS: str(errors), ENV_LAUNCHED: str(nproc)}
        child_env.setdefault("OMP_NUM_THREADS", "1")  # torchrun's default for several ranks, without its banner
        command = torchrun_command(nproc, args, Path(folder, "logs"), python)
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env, bufsize=1
        )
        assert process.stdout is not None and process.stderr is not None
        pumps = [
            threading.Thread(target=_pump, args=(process.stdout, "stdout", write), daemon=True),
            threading.Thread(target=_pump, args=(process.stderr, "stderr", write), daemon=True),
        ]
        for pump in pumps:
            pump.start()
        try:
            code = process.wait()
        except KeyboardInterrupt:
            process.terminate()
            process.wait()
            raise
        finally:
            for pump in pumps:
                pump.join(timeout=5)
        if code == 0:
            return
        failure = first_failure(errors)
    if failure is None:
        raise RankFailed(
            f"a rank failed (torch.distributed.run exited with {code}) without an error of ours: see its output above",
            code if 0 < code < 256 else 1,
        )
    raise RankFailed(f"rank {failure['rank']}: {failure['message']}", int(failure.get("exit_code", 1)))


__all__ = [
    "ENV_ERRORS",
    "ENV_LAUNCHED",
    "RankFailed",
    "check_nproc",
    "first_failure",
    "launched",
    "rank_of",
    "record_failure",
    "route",
    "run_ranks",
    "torchrun_command",
]

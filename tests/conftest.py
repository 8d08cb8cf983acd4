from __future__ import annotations

import atexit
import json
import math
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence

import pytest

# Deterministic console output in CLI tests: fixed width, no colour.
os.environ["COLUMNS"] = "120"
os.environ["NO_COLOR"] = "1"
os.environ.pop("ROOFLINE_DEVICE", None)
os.environ.pop("ROOFLINE_SPECS_DIR", None)
# Hermetic: nothing the tests run reads or writes the user's home. Every cache and config directory a library of
# ours writes by default (~/.cache/roofline's calibrations, matplotlib's font cache and config, torch.compile's
# inductor cache, Triton's kernels, the CUDA JIT cache, torch hub, Hypothesis's example database) goes under one
# temporary directory for the whole session, children included (they inherit the environment); it is removed at exit.
# pytest-benchmark, where installed, would make ./.benchmarks: pyproject.toml's addopts leave that plugin out (no test
# uses it). tests/test_first_hour.py runs a slice of the suite under a fake HOME and checks that nothing appears there.
SESSION_TMP = tempfile.mkdtemp(prefix="roofline-test-")
REDIRECTED = {
    "ROOFLINE_CACHE_DIR": "roofline-cache",  # calibrations (analyze --roofs auto would read the user's)
    "XDG_CACHE_HOME": "xdg-cache",  # whatever else follows the XDG rule (~/.cache)
    "XDG_CONFIG_HOME": "xdg-config",
    "MPLCONFIGDIR": "matplotlib",  # matplotlib's font cache and config (~/.cache/matplotlib, ~/.config/matplotlib)
    "TORCHINDUCTOR_CACHE_DIR": "torchinductor",  # torch.compile
    "TRITON_CACHE_DIR": "triton",  # ~/.triton/cache
    "TRITON_HOME": "triton-home",  # newer Triton: ~/.triton
    "TORCH_HOME": "torch",  # torch hub, ~/.cache/torch
    "CUDA_CACHE_PATH": "nv-compute-cache",  # ~/.nv/ComputeCache
    "HYPOTHESIS_STORAGE_DIRECTORY": "hypothesis",  # ./.hypothesis: its example database and caches
    "RUSTUP_HOME": "rustup",  # pip asks `rustc --version` (test_packaging): a rustup proxy writes ~/.rustup/settings
}
for _name, _sub in REDIRECTED.items():
    os.environ[_name] = os.path.join(SESSION_TMP, _sub)
    os.makedirs(os.environ[_name], exist_ok=True)
atexit.register(shutil.rmtree, SESSION_TMP, ignore_errors=True)
# Idle OpenMP threads sleep instead of spinning. torch's CPU ops run on every core; under -n auto each core also
# runs an xdist worker (or a child process), so a thread that spins after each parallel op (libgomp's default) burns
# the core another test is waiting for (a fifth to a third of the CPU time of modules that run torch ops, measured).
# Only how idle threads wait changes (torch.get_num_threads() is the same, so reports and findings are too).
# Children inherit it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Bytecode: where Python may not write it (PYTHONDONTWRITEBYTECODE), each process of the session (the xdist workers,
# every child a test starts: CLI runs, ranks, pytest runs) would compile the modules it imports from source again
# (seconds each). Their bytecode goes under the session's temporary directory instead (PYTHONPYCACHEPREFIX, shared
# with the workers and children through the environment), never into the checkout.
if sys.dont_write_bytecode and not os.environ.get("PYTHONPYCACHEPREFIX"):
    os.environ["PYTHONPYCACHEPREFIX"] = sys.pycache_prefix = os.path.join(SESSION_TMP, "pycache")
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False


#: The CPU roofs every test that diagnoses on the CPU without roofs of its own gets (written by
#: ``seeded_cpu_calibration`` into the session's calibration cache): round figures of a 2-core VM, never measured.
#: A real CPU calibration takes 10-25 s per process (each xdist worker and each child process would measure its
#: own, and measure again while the machine is busy); the tests that check calibrating itself (tests/
#: test_calibrate.py, tests/test_calibration_policy.py, tests/test_roofs.py) point ROOFLINE_CACHE_DIR at their own
#: empty folders and measure for real.
SEEDED_CPU_CEILINGS = (
    ("cpu-gemm-fp32", "compute", 1e11, "FLOP/s", "fp32"),
    ("cpu-gemm-fp64", "compute", 5e10, "FLOP/s", "fp64"),
    ("cpu-copy", "bandwidth", 2e10, "B/s", None),
    ("cpu-triad", "bandwidth", 2e10, "B/s", None),
    ("launch-host", "latency", 5e-6, "s", None),
)
SEEDED_NOTE = "TEST FIXTURE (tests/conftest.py SEEDED_CPU_CEILINGS): fixed CPU roofs, not measured"


@pytest.fixture(scope="session", autouse=True)
def seeded_cpu_calibration() -> object:
    """This machine's CPU calibration in the session's cache (ROOFLINE_CACHE_DIR, children included), written once
    per process from SEEDED_CPU_CEILINGS: a CPU diagnosis reads it instead of measuring. Its path (None without
    torch)."""
    try:
        import torch
    except ImportError:
        return None
    from datetime import datetime, timezone

    from roofline.measure import calibration
    from roofline.specs.detect import describe_cpu

    ceilings = [
        calibration.Ceiling(name=name, kind=kind, value=value, unit=unit, dtype=dtype, note=SEEDED_NOTE)
        for name, kind, value, unit, dtype in SEEDED_CPU_CEILINGS
    ]
    seeded = calibration.Calibration(
        created_utc=datetime(2026, 1, 1, tzinfo=timezone.utc),
        machine=describe_cpu(torch),
        ceilings=ceilings,
        notes=[SEEDED_NOTE],
    )
    return calibration.save(seeded)  # through cache_dir(): tests/test_first_hour.py sees it if that were HOME's


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_configure(config: pytest.Config) -> None:
    """Under ``-n N`` (pytest-xdist) without a ``--dist`` of the caller's: ``--dist loadgroup``. Each test goes to
    the next free worker (not in chunks of hundreds, whose last one could hold the slowest tests), and the tests of
    one ``xdist_group`` (those that share a costly start: the first torch.compile of a process, a module's gloo
    calibration) run on one worker."""
    if any(arg == "--dist" or arg.startswith("--dist=") for arg in config.invocation_params.args):
        return
    if getattr(config.option, "dist", "no") == "load":  # the controller of -n N
        config.option.dist = "loadgroup"
    elif hasattr(config, "workerinput"):  # a worker: its test ids name their group, as under --dist loadgroup
        config.option.loadgroup = True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # the slow tests first (a stable sort: the others keep their order), so that under xdist the short ones fill
    # the end of the run instead of one slow test started last making it
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


class CliResult:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    def json(self):
        return json.loads(self.out)

    def error_line(self) -> str:
        """The one line a bad input gets on stderr (asserting it is one line and starts with 'Error: ')."""
        lines = self.err.strip().splitlines()
        assert len(lines) == 1, self.err
        assert lines[0].startswith("Error: ")
        return lines[0]


def exit_code(main: Callable[[list[str]], object], args: Sequence[str]) -> int:
    """``main(args)``'s exit code as the shell would see it: SystemExit's code (None 0, a message 1), else 0."""
    try:
        main(list(args))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    """Run `roofline ARGS` in-process through the real entry point (error boundary included). A piped bench's
    progress lines are off (they come once a run has taken 2 s, which a loaded machine reaches: a stderr of one
    line would then hold two); a test of them sets ``roofline.cli.output.PLAIN_PROGRESS_EVERY_S`` itself."""
    from roofline.cli import main

    monkeypatch.setattr("roofline.cli.output.PLAIN_PROGRESS_EVERY_S", math.inf)

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        code = exit_code(main, args)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run

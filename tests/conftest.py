from __future__ import annotations

import atexit
import json
import os
import shutil
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
# inductor cache, Triton's kernels, the CUDA JIT cache, torch hub) goes under one temporary directory for the whole
# session, children included (they inherit the environment); it is removed at exit. tests/test_hermetic.py runs a
# slice of the suite under a fake HOME and checks that nothing appears there.
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
}
for _name, _sub in REDIRECTED.items():
    os.environ[_name] = os.path.join(SESSION_TMP, _sub)
    os.makedirs(os.environ[_name], exist_ok=True)
atexit.register(shutil.rmtree, SESSION_TMP, ignore_errors=True)


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
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
def cli(capsys: pytest.CaptureFixture[str]):
    """Run `roofline ARGS` in-process through the real entry point (error boundary included)."""
    from roofline.cli import main

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        code = exit_code(main, args)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run

from __future__ import annotations

import json
import os
import tempfile

import pytest

# Deterministic console output in CLI tests: fixed width, no colour.
os.environ["COLUMNS"] = "120"
os.environ["NO_COLOR"] = "1"
os.environ.pop("ROOFLINE_DEVICE", None)
os.environ.pop("ROOFLINE_SPECS_DIR", None)
# Hermetic: no test reads or writes the user's calibration cache (analyze --roofs auto would use it).
os.environ["ROOFLINE_CACHE_DIR"] = tempfile.mkdtemp(prefix="roofline-test-cache-")


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


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):
    """Run `roofline ARGS` in-process through the real entry point (error boundary included)."""
    from roofline.cli import main

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        else:
            code = 0
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run

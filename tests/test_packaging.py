"""The wheel carries the spec sheets and workload files: build it, install it in a fresh venv, run it."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_ships_data_and_runs_outside_the_repo(tmp_path: Path) -> None:
    pytest.importorskip("hatchling")
    dist = tmp_path / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(dist),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = dist.glob("roofline-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "roofline/_data/hardware_specs/h100-sxm.yaml" in names
    assert "roofline/_data/workloads/llm/llama-3-8b.yaml" in names
    assert "roofline/_data/workloads/suites/transformer-ops.yaml" in names

    # A fresh environment outside the repo; the heavy runtime deps (torch, pandas) come from this
    # interpreter's site-packages so the test needs no network.
    env_dir = tmp_path / "venv"
    venv.create(env_dir, system_site_packages=True, with_pip=True)
    bindir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    python = bindir / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-index", "--no-deps", str(wheel)],
        check=True,
        capture_output=True,
    )
    clean_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ROOFLINE_SPECS_DIR")}
    result = subprocess.run(
        [str(bindir / "roofline"), "specs", "list", "--json"],
        cwd=tmp_path,
        env=clean_env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert '"name": "h100-sxm"' in result.stdout
    # It really ran the installed copy, not the checkout.
    where = subprocess.run(
        [str(python), "-c", "import roofline; print(roofline.__file__)"],
        cwd=tmp_path,
        env=clean_env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert str(env_dir) in where.stdout

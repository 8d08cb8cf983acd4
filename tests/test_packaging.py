"""The wheel carries the spec sheets and workload files: build it, install it in a fresh venv, run it."""

from __future__ import annotations

import os
import re
import site
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
    assert "roofline/py.typed" in names  # PEP 561: type checkers read the package's hints
    assert "roofline/report/report.schema.json" in names  # the report's JSON Schema (`roofline schema`)
    entry_points = zipfile.ZipFile(wheel).read("roofline-0.1.0.dist-info/entry_points.txt").decode()
    assert "[pytest11]" in entry_points and "roofline = roofline.pytest_plugin" in entry_points

    # The base install is the pure core: torch, pandas, matplotlib and pyarrow come with extras only.
    metadata = zipfile.ZipFile(wheel).read("roofline-0.1.0.dist-info/METADATA").decode()
    requires = [line.split(":", 1)[1].strip() for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    base = sorted(re.split(r"[\s<>=;\[]", r, maxsplit=1)[0] for r in requires if "extra ==" not in r)
    assert base == ["pydantic", "pyyaml", "rich", "tomli", "typer"], base
    assert "tomli>=1.1; python_version < '3.11'" in requires  # gate reads pyproject.toml on Python 3.10 too
    assert any(r.startswith("torch") and "extra == 'measure'" in r for r in requires), requires

    # A fresh environment outside the repo. Its dependencies come from this interpreter's site-packages (so the
    # test needs no network), named in a .pth file: system_site_packages would give the base interpreter's,
    # which are not this one's when pytest itself runs in a venv.
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)  # this interpreter's pip installs into it (--python): no ensurepip (seconds)
    bindir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    python = bindir / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    outer = [*site.getsitepackages(), *([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])]
    (Path(purelib) / "outer-site-packages.pth").write_text("".join(f"{path}\n" for path in outer))
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-index", "--no-deps", str(wheel)],
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

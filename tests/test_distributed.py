"""Distributed diagnosis end to end on the CPU: two gloo ranks through torch.distributed.run (`--nproc 2`, and a
torchrun launch of our own), the data-parallel MLP's all-reduce and the tensor-parallel linear's all-gather with
their exact bytes, per-rank rows, the merged report, the charts, `calibrate --collectives`, and bad input (a rank
that fails, a backend that cannot run, --nproc beyond the GPUs) as one line.

The ranks get fixed CPU roofs from tests/dist_site/sitecustomize.py (first on their PYTHONPATH): no calibration
of the CPU runs, and nothing here depends on the host's speed (only bytes, counts and shapes are compared); the
collectives sweep there is the CPU's three smallest sizes, 3 batches each. Bad input, refused before any rank
starts, runs in-process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from roofline.report.collectives_chart import collectives_chart

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "workloads" / "models" / "distributed"
SITE = Path(__file__).resolve().parent / "dist_site"
FAST = ("--device", "cpu", "--warmup", "1", "--iters", "2")


@pytest.fixture(scope="module", autouse=True)
def gloo() -> None:
    """Every test here is skipped without torch.distributed and gloo (asked in the worker that runs them, once: not
    a child process at collection)."""
    try:
        import torch.distributed as dist
    except ImportError:
        pytest.skip("needs torch.distributed with gloo")
    if not (dist.is_available() and dist.is_gloo_available()):
        pytest.skip("needs torch.distributed with gloo")


def _env(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["PYTHONPATH"] = os.pathsep.join([str(SITE), str(ROOT), env.get("PYTHONPATH", "")])
    env["ROOFLINE_CACHE_DIR"] = str(cache)
    env["ROOFLINE_MODEL_SIZE"] = "tiny"
    env["COLUMNS"] = "120"
    return env


def roofline(*args: str, cache: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "roofline", *args], capture_output=True, text=True, env=_env(cache), timeout=timeout
    )


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """A calibration cache holding a collectives sweep of 2 gloo ranks (calibrate --collectives, run once)."""
    folder = tmp_path_factory.mktemp("cache")
    done = roofline("calibrate", "--collectives", "--nproc", "2", "--json", cache=folder)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["schema"] == "roofline.collectives" and doc["world_size"] == 2 and doc["backend"] == "gloo"
    kinds = {p["kind"] for p in doc["points"]}
    assert kinds == {"all_reduce", "all_gather"}
    for p in doc["points"]:  # nccl-tests' definitions on 2 ranks: all-reduce x 1, all-gather x 1/2
        factor = 1.0 if p["kind"] == "all_reduce" else 0.5
        assert p["algbw_bytes_per_s"] == pytest.approx(p["bytes"] / p["time_s"])
        assert p["busbw_bytes_per_s"] == pytest.approx(p["algbw_bytes_per_s"] * factor)
    assert {r["kind"] for r in doc["roofs"]} == kinds
    assert list(folder.glob("collectives-cpu-gloo-n2.json"))
    return folder


@pytest.mark.slow
@pytest.mark.xdist_group("gloo-calibration")  # share the module's `cache` (a gloo launch) on one worker
def test_ddp_mlp_all_reduce_per_rank_merged_report_and_charts(cache, tmp_path):
    out, plot = tmp_path / "ddp.json", tmp_path / "ddp.png"
    done = roofline(
        "diagnose", str(MODELS / "ddp_mlp.py"), "--nproc", "2", "--mode", "training", *FAST, "-o", str(out),
        "--plot", str(plot), cache=cache,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Distributed: 2 ranks · gloo" in done.stdout and "all_reduce" in done.stdout
    assert "Traceback" not in done.stderr and "torch.distributed.elastic" not in done.stderr
    doc = json.loads(out.read_text())
    ranks = {row["rank"] for row in doc["rows"]}
    assert ranks == {0, 1}
    assert not any(row["op"].startswith("c10d::") for row in doc["rows"])  # collectives are not compute rows
    section = doc["distributed"]
    assert section["world_size"] == 2 and section["backend"] == "gloo"
    assert [r["rank"] for r in section["ranks"]] == [0, 1]
    assert all(r["iteration_s"] > 0 and r["communication_s"] > 0 for r in section["ranks"])
    for r in section["ranks"]:
        assert r["overlapped_s"] + r["exposed_s"] == pytest.approx(r["communication_s"])
    # DDP all-reduces the gradients: fp32, (64*128 + 128) + (128*64 + 64) parameters, one bucket
    params = 64 * 128 + 128 + 128 * 64 + 64
    reduces = [c for c in section["collectives"] if c["kind"] == "all_reduce" and c["source"] == "counted"]
    assert sorted(c["rank"] for c in reduces) == [0, 1]
    assert all(c["bytes"] == 4 * params and c["phase"] == "backward" for c in reduces)
    assert all(c["busbw_bytes_per_s"] == pytest.approx(c["bytes"] / c["time_s"]) for c in reduces)  # x 2(n-1)/n = 1
    # matched across the ranks: one transfer (the shortest duration), each rank's wait apart
    assert reduces[0]["time_s"] == pytest.approx(reduces[1]["time_s"])
    # a rank's kernel holds the transfer, unless the call was shorter than the roof allows (early: counted at the roof)
    assert all((c["duration_s"] >= c["time_s"] or c["early"]) and c["wait_s"] >= 0 for c in reduces)
    assert all(c["time_s"] >= c["roof_time_s"] * (1 - 1e-9) for c in reduces)  # never under the roof
    assert all(r["wait_s"] >= r["exposed_wait_s"] >= 0 for r in section["ranks"])
    # the measured roof of `calibrate --collectives` places them
    assert section["roof"]["source"] == "measured"
    assert all(c["roof_time_s"] is not None and c["efficiency"] is not None for c in reduces)
    spec = collectives_chart(section)
    assert len(spec.points) >= 2 and spec.ceiling
    assert plot.is_file() and (tmp_path / "ddp-collectives.png").is_file()


@pytest.mark.slow
@pytest.mark.xdist_group("gloo-calibration")  # share the module's `cache` (a gloo launch) on one worker
def test_tp_linear_all_gather_bytes(cache, tmp_path):
    out = tmp_path / "tp.json"
    done = roofline("diagnose", str(MODELS / "tp_linear.py"), "--nproc", "2", *FAST, "--json", "-o", str(out),
                    cache=cache)  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)  # --json: standard output is rank 0's merged report alone
    assert doc == json.loads(out.read_text())
    mm = [row for row in doc["rows"] if row["op"] == "aten::mm"]
    assert sorted(row["rank"] for row in mm) == [0, 1]
    assert all(row["input_shapes"] == [[8, 64], [64, 64]] for row in mm)  # OUT / world = 64 columns each
    gathers = [c for c in doc["distributed"]["collectives"] if c["kind"] == "all_gather"]
    assert len(gathers) == 2 and all(c["bytes"] == 8 * 128 * 4 and c["calls"] == 1 for c in gathers)
    assert all(c["bus_bytes"] == pytest.approx(8 * 128 * 4 / 2) for c in gathers)  # x (n-1)/n


@pytest.mark.slow
def test_inside_a_torchrun_launch_and_a_file_that_initialises_the_group(tmp_path):
    model = tmp_path / "own_init.py"
    model.write_text(
        textwrap.dedent(
            """
            import torch
            import torch.distributed as dist

            dist.init_process_group("gloo")  # as a script written for torchrun does

            class Model(torch.nn.Module):
                def forward(self, x):
                    y = x * 2
                    dist.all_reduce(y)
                    return y + 1

            def get_init_inputs():
                return ()

            def get_inputs():
                return (torch.ones(4, 256),)
            """
        )
    )
    out = tmp_path / "r.json"
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m", "roofline",
        "diagnose", str(model), *FAST, "-o", str(out), "--json",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env=_env(tmp_path), timeout=120)
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    reduces = [c for c in doc["distributed"]["collectives"] if c["kind"] == "all_reduce"]
    assert len(reduces) == 2 and all(c["bytes"] == 4 * 256 * 4 for c in reduces)
    assert doc["distributed"]["roof"] is None  # no calibration in this cache, no sheet for the CPU


@pytest.mark.slow
def test_a_failing_rank_is_one_line_and_stops_the_others(tmp_path):
    model = tmp_path / "fails.py"
    model.write_text(
        textwrap.dedent(
            """
            import torch
            import torch.distributed as dist

            class Model(torch.nn.Module):
                def forward(self, x):
                    if dist.get_rank() == 1:
                        raise ValueError("rank one cannot go on")
                    dist.all_reduce(x)  # rank 0 waits here for rank 1: stopped by torchrun
                    return x

            def get_init_inputs():
                return ()

            def get_inputs():
                return (torch.ones(4),)
            """
        )
    )
    done = roofline("diagnose", str(model), "--nproc", "2", *FAST, "-o", str(tmp_path / "r.json"), cache=tmp_path)
    assert done.returncode == 1  # the user's code failed on rank 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: rank 1: ") and "rank one cannot go on" in last, done.stderr
    assert sum(line.startswith("Error:") for line in done.stderr.splitlines()) == 1
    assert "ChildFailedError" not in done.stderr
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--nproc", "0"), "--nproc 0: at least 1"),
        (("--nproc", "2", "--backend", "nccl"), "--backend nccl: NCCL runs on GPUs"),
        (("--nproc", "2", "--backend", "mpi"), "--backend 'mpi'"),
        (("--backend", "gloo"), "--backend: only with --nproc"),
    ],
)
def test_bad_input_is_one_line(cli, tmp_path, monkeypatch, args, needle):
    # refused by the parent before any rank starts: in-process, through the real entry point (no launch to test)
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(tmp_path))
    done = cli("diagnose", str(MODELS / "tp_linear.py"), "--device", "cpu", *args)
    assert done.code == 2
    assert done.err.strip().splitlines()[-1].startswith("Error: ") and needle in done.err, done.err


def test_nproc_beyond_the_gpus_is_one_line():
    from roofline.diagnose.launch import check_nproc
    from roofline.errors import UsageError

    check_nproc(2, "cpu", 0)
    check_nproc(2, "cuda", 2)
    with pytest.raises(UsageError, match="--nproc 4: this machine shows 2 GPUs"):
        check_nproc(4, "cuda", 2)
    with pytest.raises(UsageError, match="torch sees no GPU"):
        check_nproc(2, "cuda", 0)


def test_routing_of_torchrun_lines():
    from roofline.diagnose.launch import route

    assert route('[default0]:{"schema": 1}\n', "stdout") == ("stdout", '{"schema": 1}')
    assert route("[default1]:hello\n", "stdout") == ("stderr", "rank 1: hello")
    assert route("[default1]:Error: boom\n", "stderr") is None  # the parent says it once
    assert route("[default0]:Terminated (SIGTERM).\n", "stderr") is None
    assert (
        route("W1124 02:03:12.429000 20965 api.py:1028] Sending process 21027 closing signal SIGTERM", "stderr") is None
    )
    assert route("torch.distributed.elastic.multiprocessing.errors.ChildFailedError:", "stderr") is None


def test_strip_option():
    from roofline.cli.distributed import strip_option

    assert strip_option(["diagnose", "m.py", "--nproc", "2", "-o", "r.json"], "--nproc") == [
        "diagnose",
        "m.py",
        "-o",
        "r.json",
    ]
    assert strip_option(["diagnose", "--nproc=2", "m.py", "--", "--nproc", "3"], "--nproc") == [
        "diagnose", "m.py", "--", "--nproc", "3",
    ]  # fmt: skip


def _gpus() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(_gpus() < 2, reason="needs two GPUs")
def test_two_gpus_nccl(tmp_path, monkeypatch):
    """The same run on two GPUs through NCCL (NVLink multicast off, as the machines here require)."""
    for name, value in {
        "NCCL_NVLS_ENABLE": "0",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
        "NVSHMEM_DISABLE_NVLS": "1",
    }.items():
        monkeypatch.setenv(name, value)
    out = tmp_path / "tp.json"
    done = roofline("diagnose", str(MODELS / "tp_linear.py"), "--nproc", "2", "--device", "cuda", "--warmup", "1",
                    "--iters", "2", "-o", str(out), cache=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    section = doc["distributed"]
    assert section["backend"] == "nccl" and section["world_size"] == 2
    gathers = [c for c in section["collectives"] if c["kind"] == "all_gather"]
    assert len(gathers) == 2 and all(c["bytes"] == 8 * 128 * 4 for c in gathers)
    assert {r["device"] for r in section["ranks"]} == {"cuda:0", "cuda:1"}

"""Faults around the files a command writes: a full disk (an injected writer, and a real tiny tmpfs where this
process may mount one), a read-only directory, a directory made read-only while measuring, concurrent writers
of one path, and Ctrl-C / SIGTERM during a real `roofline bench` process. In every case the results are printed,
what was there before is kept or replaced whole, and the command ends with one line and its exit code."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from diagnose_devices import CPU

from roofline import fileio
from roofline.report import baseline as baselines
from roofline.report.schema import read_report, write_report
from tests.gate_synthetic import bench_report, bench_row, spread

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
GEMM = ("bench", "gemm", "-n", "16", "-k", "16", "--device", "cpu", "--max-time", "0.01")
BENCH = (*GEMM, "-m", "16,32")
NO_SPACE = os.strerror(errno.ENOSPC)


@pytest.fixture(autouse=True)
def _here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def fake_cpu(monkeypatch):
    """CPU roofs without a calibration; the kinds of the bench items built, in order."""
    from roofline.bench import runners

    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (CPU, ["test roofs"]))
    built: list[int] = []
    real = runners.build

    def build(kind, params, **kwargs):
        built.append(params.m)
        return real(kind, params, **kwargs)

    monkeypatch.setattr(runners, "build", build)
    return built


@pytest.fixture
def disk_full(monkeypatch):
    """Every atomic write fails half-way with ENOSPC (the injected writer has written half the bytes)."""

    def half_then_full(fd: int, data: bytes) -> None:
        try:
            os.write(fd, data[: len(data) // 2])
        finally:
            os.close(fd)
        raise OSError(errno.ENOSPC, NO_SPACE)

    monkeypatch.setattr(fileio, "_write_durably", half_then_full)


def _one_error_line(result, needle: str, code: int = 2) -> None:
    assert result.code == code, result.out + result.err
    assert "Traceback" not in result.err, result.err
    assert result.err.strip().splitlines()[-1] == f"Error: {needle}", result.err
    assert sum(line.startswith("Error:") for line in result.err.splitlines()) == 1


def _no_temporaries(directory: Path) -> None:
    assert not [p.name for p in directory.iterdir() if p.name.endswith(".tmp")]


def _old_report(path: Path) -> str:
    text = bench_report([bench_row("m=1", spread(1e-4, 10, 0.01))], suite="old").to_json()
    path.write_text(text)  # not through fileio: its writer may be the failing one here
    return text


# ------------------------------------------------------------------------------------------ a full disk


def test_bench_on_a_full_disk_prints_the_table_then_one_line_and_keeps_the_old_report(
    cli, tmp_path, fake_cpu, disk_full
):
    old = _old_report(tmp_path / "r.json")
    result = cli(*BENCH, "-o", "r.json")
    _one_error_line(result, f"-o r.json: cannot write it: {NO_SPACE}")
    assert "m=16" in result.out and "m=32" in result.out  # what was measured is shown
    assert fake_cpu == [16, 32]
    assert (tmp_path / "r.json").read_text() == old  # nothing half-written
    _no_temporaries(tmp_path)


def test_bench_json_on_a_full_disk_still_prints_the_report(cli, tmp_path, fake_cpu, disk_full):
    result = cli(*BENCH, "-o", "r.json", "--json")
    _one_error_line(result, f"-o r.json: cannot write it: {NO_SPACE}")
    assert [row["params"]["m"] for row in result.json()["rows"]] == [16, 32]
    assert not (tmp_path / "r.json").exists()


def test_analyze_report_and_baseline_save_on_a_full_disk_are_one_line(cli, tmp_path, disk_full):
    analyze = ("analyze", "gemm", "-m", "64", "-n", "64", "-k", "64", "--device", "h100-sxm")
    result = cli(*analyze, "-o", "a.json")
    _one_error_line(result, f"-o a.json: cannot write it: {NO_SPACE}")
    assert "h100" in result.out.lower()  # the table came first
    _old_report(tmp_path / "r.json")
    _one_error_line(cli("report", "r.json", "-o", "r.md"), f"-o r.md: cannot write it: {NO_SPACE}")
    result = cli("baseline", "save", "r.json", "-o", "b.json")
    _one_error_line(result, f"-o b.json: cannot write it: {NO_SPACE}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def _gate_scenario(tmp_path: Path) -> tuple[Path, Path]:
    rows = [bench_row("m=1", spread(1e-4, 30, 0.01))]
    baseline = baselines.save(baselines.from_report(bench_report(rows, suite="demo")), tmp_path / "b.json")
    report = tmp_path / "r.json"
    write_report(bench_report(rows, suite="demo"), report)
    return report, baseline


def test_gate_junit_on_a_full_disk_prints_the_verdict_then_one_line(cli, tmp_path, monkeypatch):
    report, baseline = _gate_scenario(tmp_path)
    baseline_text = baseline.read_text()
    real = fileio._write_durably

    def junit_fails(fd: int, data: bytes) -> None:
        if data.startswith(b"<?xml"):
            os.close(fd)
            raise OSError(errno.ENOSPC, NO_SPACE)
        real(fd, data)

    monkeypatch.setattr(fileio, "_write_durably", junit_fails)
    args = ("gate", str(report), "-b", str(baseline), "--markdown", "s.md", "--junit", "g.xml")
    result = cli(*args, "--update-baseline")
    _one_error_line(result, f"--junit g.xml: cannot write it: {NO_SPACE}")
    assert "PASS" in result.out
    assert (tmp_path / "s.md").read_text().startswith("### roofline gate: PASS")
    assert not (tmp_path / "g.xml").exists()
    assert baseline.read_text() == baseline_text  # a failed write: the baseline is not updated


def test_gate_of_a_suite_on_a_full_disk_prints_the_verdict_then_one_line(cli, tmp_path, fake_cpu, monkeypatch):
    suite = tmp_path / "tiny.yaml"
    suite.write_text("name: tiny\nworkloads:\n  - {kind: gemm, m: 16, n: 16, k: 16, dtype: fp32}\n")
    fast = ("--device", "cpu", "--max-time", "0.01")
    assert cli("bench", str(suite), *fast, "-o", "r.json").code == 0
    assert cli("baseline", "save", "r.json", "-o", "b.json").code == 0

    def full(fd: int, data: bytes) -> None:
        os.close(fd)
        raise OSError(errno.ENOSPC, NO_SPACE)

    monkeypatch.setattr(fileio, "_write_durably", full)
    result = cli("gate", str(suite), "-b", "b.json", *fast, "--fail-on", "efficiency:off", "-o", "now.json")
    _one_error_line(result, f"-o now.json: cannot write it: {NO_SPACE}")
    assert "1 points compared: 1 pass" in result.out
    assert not (tmp_path / "now.json").exists()


# ------------------------------------------------------------------------------------------ real file systems


def _mount_tmpfs(directory: Path, options: str) -> None:
    if not sys.platform.startswith("linux") or os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root on Linux")
    directory.mkdir(exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(directory)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")


@pytest.fixture
def tmpfs(tmp_path):
    """mount(name, options): a tmpfs under tmp_path (skipped where this process cannot mount), unmounted after."""
    mounted: list[Path] = []

    def mount(name: str, options: str = "size=64k") -> Path:
        directory = tmp_path / name
        _mount_tmpfs(directory, options)
        mounted.append(directory)
        return directory

    yield mount
    for directory in reversed(mounted):
        if subprocess.run(["umount", str(directory)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(directory)], capture_output=True)


def _fill(directory: Path) -> None:
    """Write to ``directory`` until its file system is full."""
    fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)


def test_bench_on_a_real_full_tmpfs(cli, tmpfs, fake_cpu):
    disk = tmpfs("full")
    _fill(disk)
    result = cli(*BENCH, "-o", str(disk / "r.json"))
    _one_error_line(result, f"-o {disk / 'r.json'}: cannot write it: {NO_SPACE}")
    assert "m=32" in result.out and fake_cpu == [16, 32]
    assert sorted(p.name for p in disk.iterdir()) == ["filler"]


def _read_only_directory(tmp_path: Path, tmpfs) -> Path:
    """A directory no file can be created in: chmod 555 where that binds this user, else a read-only tmpfs."""
    directory = tmp_path / "ro"
    directory.mkdir()
    directory.chmod(0o555)
    try:
        (directory / "probe").touch()
    except PermissionError:
        return directory
    (directory / "probe").unlink()  # root: chmod does not bind
    directory.chmod(0o755)
    return tmpfs("ro", "size=64k,ro")


def test_a_read_only_directory_is_refused_before_measuring(cli, tmp_path, tmpfs, fake_cpu):
    directory = _read_only_directory(tmp_path, tmpfs)
    try:
        result = cli(*BENCH, "-o", str(directory / "r.json"))
        assert result.code == 2 and fake_cpu == []  # nothing was measured
        line = result.error_line()
        assert line.startswith(f"Error: -o {directory / 'r.json'}: cannot write in {directory}: ")
        assert line.endswith(("Permission denied", "Read-only file system"))
        result = cli("analyze", "gemm", "-m", "8", "-n", "8", "-k", "8", "--plot", str(directory / "c.png"))
        assert result.code == 2 and result.error_line().startswith(f"Error: --plot {directory / 'c.png'}: cannot")
    finally:
        if not os.path.ismount(directory):
            directory.chmod(0o755)  # let pytest remove it


def test_a_directory_made_read_only_while_measuring(cli, tmpfs, fake_cpu, monkeypatch):
    disk = tmpfs("disk")
    from roofline.bench import runners

    real = runners.build

    def build(kind, params, **kwargs):
        if params.m == 32:  # between the rows: the permission changes under the running command
            subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        return real(kind, params, **kwargs)

    monkeypatch.setattr(runners, "build", build)
    result = cli(*BENCH, "-o", str(disk / "r.json"))
    _one_error_line(result, f"-o {disk / 'r.json'}: cannot write it: {os.strerror(errno.EROFS)}")
    assert "m=16" in result.out and "m=32" in result.out
    assert list(disk.iterdir()) == []


# ------------------------------------------------------------------------------------------ concurrent writers

WRITER = """\
import json, sys
from pathlib import Path
from roofline.report.outputs import write

path, tag, times = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
text = json.dumps({"schema": "roofline.report", "writer": tag, "rows": [tag * 64] * 4000})
for _ in range(times):
    write(path, text)
"""


def test_concurrent_writers_leave_one_whole_report(tmp_path):
    path = tmp_path / "same.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), tag, "80"], env=env) for tag in ("a", "b")]
    while any(w.poll() is None for w in writers):  # read while they write: always one whole document
        try:
            text = path.read_text()
        except FileNotFoundError:
            continue
        doc = json.loads(text)
        assert doc["rows"] == [doc["writer"] * 64] * 4000
    assert [w.wait() for w in writers] == [0, 0]
    doc = json.loads(path.read_text())
    assert doc["writer"] in ("a", "b") and doc["rows"] == [doc["writer"] * 64] * 4000
    assert [p.name for p in tmp_path.iterdir()] == ["same.json"]  # no temporaries left


def test_concurrent_threads_leave_one_whole_report(tmp_path):
    from roofline.report.outputs import write

    path = tmp_path / "same.json"
    texts = {tag: json.dumps({"writer": tag, "rows": [tag * 64] * 2000}) for tag in "abcd"}
    threads = [threading.Thread(target=lambda t=t: [write(path, texts[t]) for _ in range(50)]) for t in texts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert path.read_text() in texts.values()
    assert [p.name for p in tmp_path.iterdir()] == ["same.json"]


# ------------------------------------------------------------------------------------------ signals

#: `roofline bench` in its own process, with fake CPU roofs (no calibration) and a gate before the second row:
#: it says when the first row is done and waits there for the signal, so the test never depends on speed.
DRIVER = """\
import sys, time
import roofline.roofs
from roofline.bench import runners
from diagnose_devices import CPU

roofline.roofs.cpu_roofs = lambda torch_: (CPU, ["test roofs"])
real = runners.build

def build(kind, params, **kwargs):
    if params.m == 32:
        sys.stderr.write("first row done\\n")
        sys.stderr.flush()
        while True:
            time.sleep(0.05)
    return real(kind, params, **kwargs)

runners.build = build
from roofline.cli import main
main(sys.argv[1:])
"""


@pytest.mark.slow
@pytest.mark.parametrize(("signame", "code"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_during_bench_leaves_a_valid_report_of_the_finished_rows(tmp_path, signame, code):
    out = tmp_path / "r.json"
    path = os.pathsep.join([str(ROOT), str(TESTS), os.environ.get("PYTHONPATH", "")])
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, *GEMM, "-m", "16,32,64", "-o", str(out)],
        env={**os.environ, "PYTHONPATH": path},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watchdog = threading.Timer(300, proc.kill)  # a hung child fails the test instead of hanging it
    watchdog.start()
    try:
        seen: list[str] = []
        for line in proc.stderr:  # poll for the first row, never sleep a guessed time
            seen.append(line)
            if line == "first row done\n":
                break
        else:
            pytest.fail("bench ended before its first row:\n" + "".join(seen))
        proc.send_signal(getattr(signal, signame))
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, stderr
    assert "Traceback" not in stderr
    report = read_report(out)
    assert [row["params"]["m"] for row in report.rows] == [16]
    assert report.model_extra["interrupted"] is True
    assert "m=16" in stdout and "Interrupted: 1 of 3 rows measured and written." in stderr

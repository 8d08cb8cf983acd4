"""The user-code boundary (roofline.diagnose.execute.user_code), the gate's "nothing measured" exit 4, --timeout
and the sweep-size guard, on the CPU. A model that exits, calls os._exit, closes sys.stdout or changes directory
runs through the real CLI in-process: the process survives and the report lands where the user asked. The models
are tiny, the op times modelled (no dependence on the host's speed), and the hanging models wait in a bounded
Python loop, so a broken --timeout fails the test instead of hanging it."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch  # noqa: F401  (imported before any --timeout starts: a cold import of torch takes seconds)
from diagnose_devices import CPU
from diagnose_doubles import timed_by

from roofline.diagnose.execute import user_code
from roofline.diagnose.pipeline import DiagnoseOptions, diagnose
from roofline.errors import TimedOut, UserCodeError
from roofline.report.records import OpTiming, Timing

FAST = ("--device", "cpu", "--warmup", "1", "--iters", "2")
HANG = "_deadline = time.monotonic() + 60\nwhile time.monotonic() < _deadline:\n    time.sleep(0.002)"


def modelled_timing(model, inputs, kwargs, records, *, device, mode, warmup, iters, **_):
    """The timing stage without running the model: 10 us per op, in each iteration (the gate measures with the
    samples: a report without them is refused)."""
    ops = [OpTiming(index=r.index, device_time_s=1e-5, kernels=0, samples_s=(1e-5,) * iters) for r in records]
    return Timing(device="cpu", iterations=iters, wall_s=1e-5 * len(ops) * 1.1, ops=ops)


@pytest.fixture
def fake_cpu(monkeypatch):
    """CPU roofs without running a calibration."""
    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (CPU, ["test roofs"]))
    return CPU


@pytest.fixture
def modelled_cpu(monkeypatch, fake_cpu):
    """Fake CPU roofs and modelled op times (the counting pass still runs the model)."""
    monkeypatch.setattr("roofline.diagnose.profile.time_model", modelled_timing)
    return fake_cpu


@pytest.fixture(autouse=True)
def _boundary_restored():
    """Every test leaves os._exit, the streams' state, SIGALRM and the timer as it found them."""
    real_exit, handler = os._exit, signal.getsignal(signal.SIGALRM)
    yield
    assert os._exit is real_exit
    assert signal.getsignal(signal.SIGALRM) is handler
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def model_file(tmp_path: Path, forward: str = "", *, top: str = "", name: str = "model.py") -> Path:
    """A KernelBench-style model whose forward runs ``forward`` (indented by the caller's 4 spaces) then
    returns relu(x); ``top`` runs at import."""
    path = tmp_path / name
    body = textwrap.indent(textwrap.dedent(forward).strip("\n"), "        ") if forward else ""
    path.write_text(
        "import os, signal, sys, threading, time\nimport torch\n"
        + textwrap.dedent(top)
        + "\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
        + (body + "\n" if body else "")
        + "        return torch.relu(x)\n\n\ndef get_init_inputs():\n    return ()\n\n\n"
        "def get_inputs():\n    return (torch.randn(4, 8),)\n"
    )
    return path


def _last_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert lines and lines[-1].startswith("Error: "), err
    return lines[-1]


# ------------------------------------------------------------------------------------------- exits


def test_sys_exit_at_import_is_a_user_error(cli, tmp_path, fake_cpu):
    model = model_file(tmp_path, "", top="sys.exit(0)\n")
    result = cli("diagnose", str(model), *FAST, "-o", str(tmp_path / "r.json"))
    assert result.code == 1
    assert _last_error(result.err) == "Error: model.py exited (SystemExit: 0)"
    assert "Traceback (most recent call last)" in result.err and "sys.exit(0)" in result.err
    assert not (tmp_path / "r.json").exists()


def test_sys_exit_in_forward_is_a_user_error(cli, tmp_path, fake_cpu):
    model = model_file(tmp_path, "sys.exit(0)")
    result = cli("diagnose", str(model), *FAST, "-o", str(tmp_path / "r.json"))
    assert result.code == 1
    assert "(SystemExit: 0): a forward must return" in _last_error(result.err)
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize(("where", "needle"), [("forward", "the model called os._exit(0)"), ("import", "model.py")])
def test_os_exit_does_not_end_the_process(cli, tmp_path, fake_cpu, where, needle):
    model = model_file(tmp_path, "os._exit(0)") if where == "forward" else model_file(tmp_path, "", top="os._exit(0)")
    result = cli("diagnose", str(model), *FAST, "-o", str(tmp_path / "r.json"))  # we are still here
    assert result.code == 1
    line = _last_error(result.err)
    assert line.startswith(f"Error: {needle}") and "os._exit(0)" in line and "without a report" in line
    assert "    os._exit(0)\nExitCalled: os._exit(0) was called\n" in result.err  # their traceback, to the call
    assert "roofline/diagnose" not in result.err
    assert not (tmp_path / "r.json").exists()


def test_a_forked_child_still_exits_for_real():
    real_exit = os._exit
    with user_code("the model"):
        pid = os.fork()
        if pid == 0:  # the child: as multiprocessing ends its children
            try:
                os._exit(7)
            finally:
                real_exit(3)  # only if the boundary raised in the child
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 7


def test_ctrl_c_and_our_errors_go_on_up_untouched():
    for exc in (KeyboardInterrupt(), TimedOut(1.0), UserCodeError("ours")):
        with pytest.raises(type(exc)) as caught, user_code("the model"):
            raise exc
        assert caught.value is exc


# ------------------------------------------------------------------------------------------- streams, cwd


def _run_main(*args: str) -> int:
    from roofline.cli import main

    try:
        main(list(args))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    return 0


@pytest.mark.parametrize("as_json", [False, True])
def test_a_model_that_closes_stdout_still_gets_its_report(tmp_path, modelled_cpu, capfd, monkeypatch, as_json):
    model = model_file(tmp_path, 'print("closing")\nsys.stdout.close()')
    # streams of our own on file descriptors 1 and 2 (pytest's would be closed), as a terminal's are
    monkeypatch.setattr(sys, "stdout", open(1, "w", encoding="utf-8", closefd=False))  # noqa: SIM115
    monkeypatch.setattr(sys, "stderr", open(2, "w", encoding="utf-8", closefd=False))  # noqa: SIM115
    code = _run_main("diagnose", str(model), *FAST, "-o", str(tmp_path / "r.json"), *(["--json"] if as_json else []))
    assert not sys.stdout.closed and not sys.stderr.closed
    sys.stdout.flush()
    sys.stderr.flush()
    out = capfd.readouterr().out
    assert code == 0
    assert (tmp_path / "r.json").exists()
    if as_json:
        assert out.lstrip().startswith("{") and '"source": "diagnose"' in out
    else:
        assert "relu" in out


def test_a_model_that_replaces_stdout_gets_it_back(cli, tmp_path, modelled_cpu):
    model = model_file(tmp_path, 'sys.stdout = open(os.devnull, "w")')
    result = cli("diagnose", str(model), *FAST, "-o", str(tmp_path / "r.json"))
    assert result.code == 0, result.err
    assert "relu" in result.out


def test_closed_file_descriptor_1_is_one_clear_line(tmp_path):
    code = textwrap.dedent(
        """
        import os, sys
        from roofline.diagnose.execute import user_code
        from roofline.errors import UserCodeError
        try:
            with user_code("the model"):
                os.close(1)
        except UserCodeError as exc:
            sys.stderr.write(f"Error: {exc}\\n")
            sys.exit(1)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 1
    assert "Error: the model closed standard output (file descriptor 1)" in done.stderr


def test_chdir_in_forward_the_report_lands_where_asked(cli, tmp_path, modelled_cpu, monkeypatch):
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    model = model_file(tmp_path, f"os.chdir({str(elsewhere)!r})")
    monkeypatch.chdir(work)
    result = cli("diagnose", str(model), *FAST, "-o", "r.json")
    assert result.code == 0, result.err
    assert (work / "r.json").exists() and not (elsewhere / "r.json").exists()
    assert Path.cwd() == work
    assert "Report written to r.json" in result.err


# ------------------------------------------------------------------------------------------- gate: exit 4


@pytest.fixture
def baseline(cli, tmp_path, modelled_cpu, monkeypatch):
    """A baseline of model.py (a healthy model), in an empty working directory."""
    monkeypatch.chdir(tmp_path)
    model = model_file(tmp_path, "")
    assert cli("diagnose", str(model), *FAST, "-o", "d.json").code == 0
    assert cli("baseline", "save", "d.json", "-o", "b.json").code == 0
    return model


@pytest.mark.parametrize(
    ("forward", "needle"),
    [
        ('raise ValueError("broken")', "nothing measured: the model raised ValueError: broken"),
        ("sys.exit(0)", "nothing measured: the model exited while running (SystemExit: 0)"),
        ("os._exit(0)", "nothing measured: the model called os._exit(0)"),
    ],
)
def test_gate_on_a_failing_model_is_never_a_pass(cli, tmp_path, baseline, forward, needle):
    model_file(tmp_path, forward)  # the same file, now broken
    result = cli("gate", str(baseline), "-b", "b.json", *FAST)
    assert result.code == 4, result.out + result.err
    assert _last_error(result.err).startswith(f"Error: {needle}")
    assert "Traceback (most recent call last)" in result.err
    assert result.out == ""  # no verdict table


def test_gate_on_a_model_that_times_out_is_never_a_pass(cli, tmp_path, baseline):
    model_file(tmp_path, HANG)
    result = cli("gate", str(baseline), "-b", "b.json", *FAST, "--timeout", "0.3")
    assert result.code == 4, result.err
    assert _last_error(result.err).startswith("Error: nothing measured: timed out after 0.3 s while")


def test_gate_on_a_report_with_no_rows_is_never_a_pass(cli, tmp_path, baseline):
    import json

    doc = json.loads(Path("d.json").read_text())
    doc["rows"] = []
    Path("empty.json").write_text(json.dumps(doc))
    result = cli("gate", "empty.json", "-b", "b.json")
    assert result.code == 4
    assert result.error_line().startswith("Error: nothing measured: the report empty.json gave no measured row")


def test_gate_timeout_is_not_an_option_for_a_report(cli, tmp_path, baseline):
    result = cli("gate", "d.json", "-b", "b.json", "--timeout", "5")
    assert result.code == 2 and "--timeout: not an option for a report" in result.error_line()


# ------------------------------------------------------------------------------------------- --timeout


def test_diagnose_timeout_says_what_was_running_and_exits_124(cli, tmp_path, fake_cpu):
    model = model_file(tmp_path, HANG)
    result = cli("diagnose", str(model), *FAST, "-o", str(tmp_path / "r.json"), "--timeout", "0.5")
    assert result.code == 124
    assert _last_error(result.err).startswith("Error: timed out after 0.5 s while ")
    assert not (tmp_path / "r.json").exists()


def test_the_pipeline_names_the_stage_that_timed_out(fake_cpu, tmp_path):
    from roofline.cli.timeout import time_limit

    model = model_file(tmp_path, "")

    def hang(*args, **kwargs):
        exec(HANG, {"time": __import__("time")})

    with pytest.raises(TimedOut) as caught, time_limit(0.2):
        diagnose(model, DiagnoseOptions(device="cpu", warmup=1, iters=2), boundaries=timed_by(hang))
    assert str(caught.value) == "timed out after 0.2 s while timing the model's forward"
    assert caught.value.exit_code == 124


def test_bench_timeout_writes_the_rows_finished_and_exits_124(cli, tmp_path, fake_cpu, monkeypatch):
    import time

    from roofline.bench import runners
    from roofline.report.schema import read_report

    real = runners.build

    def build(kind, params, **kwargs):
        if params.m == 128:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                time.sleep(0.002)
        return real(kind, params, **kwargs)

    monkeypatch.setattr(runners, "build", build)
    out = tmp_path / "r.json"
    args = ("bench", "gemm", "-m", "64,128,256", "-n", "64", "-k", "64", "--device", "cpu", "-o", str(out))
    result = cli(*args, "--max-time", "0.02", "--timeout", "1")
    assert result.code == 124, result.err
    rows = read_report(out).rows
    assert [r["params"]["m"] for r in rows] in ([64], [])  # [] only when m=64 itself took a whole second
    assert f"Timed out after 1 s (--timeout): {len(rows)} of 3 rows measured and written." in result.err


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
@pytest.mark.parametrize("command", ["diagnose", "bench", "gate"])
def test_timeout_must_be_a_positive_number(cli, tmp_path, fake_cpu, command, value):
    model = model_file(tmp_path, "")
    args = {
        "diagnose": ("diagnose", str(model), *FAST),
        "bench": ("bench", "gemm", "-m", "8", "-n", "8", "-k", "8", "--device", "cpu"),
        "gate": ("gate", str(model), "-b", str(tmp_path / "missing.json"), *FAST),
    }[command]
    result = cli(*args, "-o", str(tmp_path / "r.json"), f"--timeout={value}")
    assert result.code == 2, result.err
    why = "'0' must be positive" if value == "0" else f"cannot read '{value}' as a time: use a number in s"
    assert result.error_line().startswith(f"Error: --timeout: {why}")


# ------------------------------------------------------------------------------------------- sweep size


def test_a_large_sweep_warns_with_its_count(cli):
    sizes = ",".join(str(64 + i) for i in range(501))
    result = cli("analyze", "gemm", "-m", sizes, "-n", "64", "-k", "64", "--device", "h100-sxm", "--json")
    assert result.code == 0, result.err
    assert "warning: this sweep has 501 rows (" in result.err
    assert len(result.json()["rows"]) == 501


@pytest.mark.parametrize("command", ["analyze", "bench"])
def test_a_sweep_above_a_million_rows_is_refused(cli, command):
    many = ",".join(str(1 + i) for i in range(1001))
    extra = ("--device", "h100-sxm") if command == "analyze" else ("--device", "cpu")
    result = cli(command, "gemm", "-m", many, "-n", many, "-k", "8", *extra)
    assert result.code == 2
    assert result.error_line().startswith("Error: this sweep has 1,002,001 rows, more than 1,000,000")


def test_a_suite_above_a_million_rows_is_refused(cli, tmp_path):
    many = ", ".join(str(1 + i) for i in range(1001))
    suite = tmp_path / "huge.yaml"
    suite.write_text(f"name: huge\nworkloads:\n  - {{kind: gemm, m: [{many}], n: [{many}], k: 8}}\n")
    result = cli("analyze", "suite", str(suite), "--device", "h100-sxm")
    assert result.code == 2 and "the suite sweeps more than 1,000,000 rows" in result.error_line()


def test_check_sweep_thresholds():
    from roofline.costs.suite import MAX_SWEEP_ROWS, WARN_SWEEP_ROWS, check_sweep, sweep_size

    assert check_sweep(WARN_SWEEP_ROWS) == ""
    assert check_sweep(WARN_SWEEP_ROWS + 1).startswith("warning: this sweep has 501 rows")
    assert check_sweep(MAX_SWEEP_ROWS).startswith("warning:")
    assert sweep_size({"m": [1, 2, 3], "n": 4, "k": [5, 6]}) == 6
    assert math.prod([]) == 1 and sweep_size({}) == 1


@pytest.mark.parametrize(
    ("signame", "code", "line"), [("SIGINT", 130, "Interrupted."), ("SIGTERM", 143, "Terminated (SIGTERM).")]
)
def test_an_interrupt_in_forward_goes_on_up_untouched(cli, tmp_path, fake_cpu, signame, code, line):
    model = model_file(tmp_path, f"os.kill(os.getpid(), signal.{signame})\ntime.sleep(1)", top="import signal\n")
    result = cli("diagnose", str(model), *FAST, "-o", str(tmp_path / "r.json"))
    assert result.code == code
    assert result.err.strip().splitlines()[-1] == line

"""Output we own, user code that cannot hold us, escapes, bench rows kept on a signal (issue 28, items 3, 4, 6, 7
and the flags of 8): a corpus of cases across commands, each checking the documented exit code, one `Error:` line
where it is an error, no traceback of ours, and nothing lost (the files written, the rows kept).

Most cases run the real entry point in-process (roofline.cli.main) with standard output replaced by a stream that
fails, or holds only ASCII or latin-1; the few that need a real process (an encoding set by PYTHONIOENCODING, a
device that is full, a thread that never ends) run one, each with a timeout. Models are tiny, their op times
modelled, the CPU's roofs fixed (no calibration)."""

from __future__ import annotations

import errno
import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch  # noqa: F401  (imported once, before the in-process runs)
from conftest import exit_code
from diagnose_devices import CPU
from gate_synthetic import bench_report, bench_row, spread
from test_user_boundary import model_file

from roofline.report import baseline as baselines
from roofline.report.records import OpTiming, Timing
from roofline.report.schema import read_report, write_report

ROOT = Path(__file__).resolve().parent.parent
FAST = ("--device", "cpu", "--warmup", "1", "--iters", "1")
OSC = "\x1b]0;pwned\x07"  # sets the terminal's title
OSC8 = "\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\"  # a hyperlink
OSC52 = "\x1b]52;c;cm0gLXJmIH4=\x07"  # writes the clipboard
CSI = "\x1b[2J\x1b[31m"  # clears the screen, red
DCS = "\x1bPq#0;2;0;0;0\x1b\\"  # a sixel / device control string
C1_CSI = "\x9b31m"  # the 8-bit CSI
SEQUENCES = {"osc": OSC, "osc8": OSC8, "osc52": OSC52, "csi": CSI, "dcs": DCS, "c1": C1_CSI}


def modelled_timing(model, inputs, kwargs, records, *, device, mode, warmup, iters, **_):
    ops = [OpTiming(index=r.index, device_time_s=1e-5, kernels=0) for r in records]
    return Timing(device="cpu", iterations=iters, wall_s=1e-5 * len(ops) * 1.1, ops=ops)


@pytest.fixture
def fake_cpu(monkeypatch):
    """The CPU's roofs fixed, op times modelled (the counting pass still runs the model)."""
    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (CPU, ["test roofs"]))
    monkeypatch.setattr("roofline.diagnose.profile.time_model", modelled_timing)
    return CPU


# ------------------------------------------------------------------------------------------------ streams


class Failing(io.TextIOBase):
    """A standard output that fails every write (a full device, or a reader that went away)."""

    def __init__(self, error: OSError) -> None:
        self.error = error
        self.tries = 0

    @property
    def encoding(self) -> str:
        return "utf-8"

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.tries += 1
        raise self.error

    def isatty(self) -> bool:
        return False


def full() -> Failing:
    return Failing(OSError(errno.ENOSPC, "No space left on device"))


def broken_pipe() -> Failing:
    return Failing(BrokenPipeError(errno.EPIPE, "Broken pipe"))


class Run:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    def error_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.startswith("Error:")]


@pytest.fixture
def run(capsys):
    """`roofline ARGS` in-process through the real entry point with ``stdout`` as standard output (default: the
    captured one); returns the exit code, what reached stdout (a text stream's or a byte stream's text) and stderr."""
    from roofline.cli import main

    def go(*args: str, stdout: Any = None, encoding: str | None = None) -> Run:
        raw = None
        capsys.readouterr()
        if encoding is not None:
            raw = io.BytesIO()
            stdout = io.TextIOWrapper(raw, encoding=encoding, errors="strict", write_through=True)
        saved = sys.stdout
        if stdout is not None:
            sys.stdout = stdout
        try:
            code = exit_code(main, args)
        finally:
            sys.stdout = saved
        captured = capsys.readouterr()
        # strict: the decode raises if anything written is not in the encoding
        out = raw.getvalue().decode(encoding or "utf-8") if raw is not None else captured.out
        return Run(code, out, captured.err)

    return go


def no_traceback(result: Run) -> None:
    assert "Traceback" not in result.err, result.err


# ------------------------------------------------------------------------------------------------ reports


@pytest.fixture
def reports(tmp_path):
    """A bench report and its baseline, a diagnose-like analyze report: what report, plot, gate, predict read."""
    rows = [bench_row(f"m={m}", spread(1.0e-4 * m, 20, 0.01)) for m in (1, 2, 3)]
    bench = tmp_path / "bench.json"
    write_report(bench_report(rows), bench)
    baseline = baselines.save(baselines.from_report(bench_report(rows), commit=""), tmp_path / "base.json")
    return {"bench": bench, "baseline": baseline}


HOSTILE_LABELS = [
    f"osc {OSC} title",
    f"link {OSC8}",
    f"clip {OSC52}",
    "[click](javascript:alert(1))",
    "![img](https://evil.example/x.png)",
    '=HYPERLINK("https://evil.example")',
    "+1+2",
    "-2+3",
    "@SUM(A1:A2)",
    f"dcs {DCS} csi {CSI} c1 {C1_CSI}",
]


@pytest.fixture
def hostile(tmp_path):
    """A bench report whose labels, suite and machine name carry control sequences, markdown links and formulas."""
    rows = [bench_row(label, spread(1.0e-4 * (i + 1), 20, 0.01)) for i, label in enumerate(HOSTILE_LABELS)]
    report = bench_report(rows, suite=f"suite {OSC}", machine={"kind": "cpu", "name": f"cpu {CSI}"})
    path = tmp_path / "hostile.json"
    write_report(report, path)
    return path


def assert_no_sequence(text: str) -> None:
    for char in ("\x1b", "\x9b", "\x9d", "\x90", "\x07"):
        assert char not in text, (char, text[:2000])
    for residue in ("]0;pwned", "]52;c;", "]8;;", "#0;2;0;0;0"):  # whole sequences go, not only their ESC
        assert residue not in text, (residue, text[:2000])


# ======================================================================= 3. output we own: failing stdout


def _analyze(*extra: str) -> tuple[str, ...]:
    return ("analyze", "gemm", "-m", "64", "-n", "64", "-k", "64", "--dtype", "fp16", "--device", "h100-sxm", *extra)


def _bench(out: Path, *extra: str) -> tuple[str, ...]:
    return ("bench", "gemm", "-m", "16,32", "-n", "16", "-k", "16", "--device", "cpu", "--max-time", "0.01",
            "-o", str(out), *extra)  # fmt: skip


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "table"])
@pytest.mark.parametrize("stream", [full, broken_pipe], ids=["full", "pipe"])
def test_analyze_with_a_failing_stdout_writes_its_file_then_says_it(run, tmp_path, as_json, stream):
    out = tmp_path / "a.json"
    result = run(*_analyze("-o", str(out), *(["--json"] if as_json else [])), stdout=stream())
    no_traceback(result)
    assert read_report(out).rows, "the file is written although stdout failed"
    if stream is full:
        assert result.code == 2
        assert result.error_lines() == ["Error: standard output: cannot write it: No space left on device"]
    else:  # a reader that went away (`| head`): nothing to say, the command's own exit code
        assert result.code == 0 and result.error_lines() == []


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "table"])
@pytest.mark.parametrize("stream", [full, broken_pipe], ids=["full", "pipe"])
def test_bench_with_a_failing_stdout_keeps_its_rows(run, tmp_path, fake_cpu, as_json, stream):
    out = tmp_path / "b.json"
    result = run(*_bench(out, *(["--json"] if as_json else [])), stdout=stream())
    no_traceback(result)
    assert [r["params"]["m"] for r in read_report(out).rows] == [16, 32]
    assert result.code == (2 if stream is full else 0)
    assert len(result.error_lines()) == (1 if stream is full else 0)


@pytest.mark.parametrize("fmt", ["markdown", "csv", "html"])
def test_report_to_a_full_stdout_is_one_line_exit_2(run, reports, fmt):
    result = run("report", str(reports["bench"]), "--format", fmt, stdout=full())
    no_traceback(result)
    assert result.code == 2
    assert result.error_lines() == ["Error: standard output: cannot write it: No space left on device"]


def test_report_to_a_file_needs_no_stdout(run, reports, tmp_path):
    page = tmp_path / "r.md"
    result = run("report", str(reports["bench"]), "-o", str(page), stdout=full())
    assert result.code == 0 and result.error_lines() == []
    assert page.read_text().lstrip("#").lstrip().startswith("roofline")


def test_gate_verdict_survives_a_full_stdout(run, reports, tmp_path):
    junit = tmp_path / "gate.xml"
    result = run("gate", str(reports["bench"]), "-b", str(reports["baseline"]), "--junit", str(junit), stdout=full())
    no_traceback(result)
    assert result.code == 2 and len(result.error_lines()) == 1
    assert "<testsuites" in junit.read_text()


def test_gate_regression_keeps_its_exit_code_on_a_closed_pipe(run, reports, tmp_path):
    slower = [bench_row(f"m={m}", spread(1.0e-4 * m, 20, 0.01, 0.5)) for m in (1, 2, 3)]
    after = tmp_path / "after.json"
    write_report(bench_report(slower), after)
    result = run("gate", str(after), "-b", str(reports["baseline"]), stdout=broken_pipe())
    no_traceback(result)
    assert result.code == 1 and result.error_lines() == []  # 1: a regression, said by the exit code


@pytest.mark.parametrize(
    "args",
    [
        ("specs", "list"),
        ("specs", "show", "h100-sxm"),
        ("predict", "{bench}", "--device", "h100-sxm"),
        ("baseline", "show", "{baseline}"),
        ("completion", "bash"),
    ],
    ids=["specs-list", "specs-show", "predict", "baseline-show", "completion"],
)
def test_other_commands_on_a_full_stdout(run, reports, args):
    args = tuple(a.format(**reports) for a in args)
    result = run(*args, stdout=full())
    no_traceback(result)
    if result.code == 2 and "cannot write it" not in result.err:
        pytest.fail(result.err)  # an input error of the case itself
    assert result.code == 2
    assert result.error_lines() == ["Error: standard output: cannot write it: No space left on device"]


def test_an_error_and_a_full_stdout_keep_the_errors_code(run):
    result = run("analyze", "gemm", "-m", "0", "-n", "1", "-k", "1", "--device", "h100-sxm", stdout=full())
    assert result.code == 2
    assert result.error_lines()[0].startswith("Error: -m")


def test_plot_writes_its_chart_whatever_stdout(run, reports, tmp_path):
    pytest.importorskip("matplotlib")
    chart = tmp_path / "c.svg"
    result = run("plot", str(reports["bench"]), "-o", str(chart), stdout=full())
    assert result.code == 0, result.err
    assert chart.read_text().lstrip().startswith("<?xml")


def test_diagnose_json_with_a_full_stdout_writes_the_report(run, tmp_path, fake_cpu):
    out = tmp_path / "r.json"
    result = run("diagnose", str(model_file(tmp_path)), *FAST, "--json", "-o", str(out), stdout=full())
    no_traceback(result)
    assert result.code == 2 and len(result.error_lines()) == 1
    assert read_report(out).rows


# ======================================================================= 3. output we own: any encoding


@pytest.mark.parametrize("encoding", ["ascii", "latin-1", "cp1252"])
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (_analyze(), "bottleneck -> property"),
        (("analyze", "attention", "--seq", "128", "--heads", "2", "--head-dim", "64", "--device", "h100-sxm"), "->"),
        (("specs", "show", "h100-sxm"), "H100"),
        (("specs", "list"), "h100-sxm"),
        (("analyze", "gemm", "--help"), "--json"),
    ],
    ids=["gemm", "attention", "specs-show", "specs-list", "help"],
)
def test_text_fits_any_stdout_encoding(run, encoding, args, needle):
    result = run(*args, encoding=encoding)  # the run's decode is strict: every byte is in the encoding
    assert result.code == 0, result.err
    no_traceback(result)
    assert needle in result.out


@pytest.mark.parametrize("fmt", ["csv", "markdown"])
def test_report_views_fit_ascii(run, reports, fmt):
    result = run("report", str(reports["bench"]), "--format", fmt, encoding="ascii")
    assert result.code == 0, result.err
    assert "m=1" in result.out


def test_bench_table_fits_latin1(run, tmp_path, fake_cpu):
    out = tmp_path / "b.json"
    result = run(*_bench(out), encoding="latin-1")
    assert result.code == 0, result.err
    assert "m=16" in result.out and read_report(out).rows


def test_fallbacks_are_readable():
    from roofline.cli.stdout import ERRORS

    text = "a \u2192 b \u00d7 2 \u2026 \u00b1 \u2264 \u00b5s caf\u00e9 \u2500\u2502\u250c \u2588 \ud800 \u4e2d"
    assert text.encode("ascii", ERRORS).decode() == "a -> b x 2 ... +/- <= us cafe -|+ # ? ?"
    assert "caf\u00e9".encode("latin-1", ERRORS) == "caf\u00e9".encode("latin-1")  # what fits stays


def _python(code: str, env: dict[str, str] | None = None, stdout: Any = subprocess.PIPE, timeout: float = 60):
    return subprocess.run(
        [sys.executable, "-c", code],
        stdout=stdout,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}", **(env or {})},
        timeout=timeout,
        cwd=ROOT,
    )


_ENTRY = "import sys; sys.argv = ['roofline', *{args!r}]; from roofline.cli import main; main()"


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_a_real_process_with_a_narrow_stdout_encoding(encoding):
    done = _python(_ENTRY.format(args=list(_analyze())), env={"PYTHONIOENCODING": encoding})
    assert done.returncode == 0, done.stderr
    assert b"Traceback" not in done.stderr
    assert b"launch -> locality" in done.stdout


def test_a_real_process_on_a_full_device_writes_the_file_first(tmp_path):
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    out = tmp_path / "a.json"
    with open("/dev/full", "w") as device:
        done = _python(_ENTRY.format(args=list(_analyze("--json", "-o", str(out)))), stdout=device)
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert err.strip().splitlines() == ["Error: standard output: cannot write it: No space left on device"]
    assert read_report(out).rows


# ======================================================================= 3. --json: stdout holds our document


def test_diagnose_json_keeps_stdout_for_the_report(run, tmp_path, fake_cpu):
    model = model_file(tmp_path, "print('forward says hi')", top="print('import says hi')\n")
    result = run("diagnose", str(model), *FAST, "--json", "-o", str(tmp_path / "r.json"))
    assert result.code == 0, result.err
    assert json.loads(result.out)["schema"] == "roofline.report"
    assert "import says hi" in result.err and "forward says hi" in result.err


_DRIVER = """
import sys
import roofline.roofs, roofline.diagnose.profile
from diagnose_devices import CPU
from test_output_corpus import modelled_timing
roofline.roofs.cpu_roofs = lambda torch_: (CPU, ["test roofs"])
roofline.diagnose.profile.time_model = modelled_timing
sys.argv = ["roofline", *{args!r}]
from roofline.cli import main
main()
"""

_CHATTER = """
def _chatter():
    for i in range(100000):
        print("chatter", i, flush=True)
        os.write(1, b"raw chatter\\n")
        sys.stdout.buffer.write(b"binary chatter\\n")
        time.sleep(0.001)

threading.Thread(target=_chatter).start()
threading.Thread(target=lambda: time.sleep(3600), name="forever").start()
"""


def test_a_model_that_leaves_threads_neither_corrupts_json_nor_holds_the_exit(tmp_path):
    """The model starts a thread that prints (Python and file descriptor 1) through the run and after it, and a
    non-daemon thread that sleeps an hour: stdout is one JSON document, the report is written, the process ends."""
    model = model_file(tmp_path, top=_CHATTER)
    out = tmp_path / "r.json"
    args = [str(model), *FAST, "--json", "-o", str(out)]
    done = _python(_DRIVER.format(args=["diagnose", *args]), timeout=90)  # a hang fails here, not forever
    err = done.stderr.decode(errors="replace")
    assert done.returncode == 0, err[-3000:]
    assert json.loads(done.stdout)["schema"] == "roofline.report"
    assert "chatter" in err and "raw chatter" in err and "binary chatter" in err
    assert "thread(s) left running by the model" in err and "forever" in err
    assert "Traceback" not in err
    assert read_report(out).rows


# ======================================================================= 4. the user's code cannot hold us


BAD_STR = {
    "raises": "raise RuntimeError('no message for you')",
    "exits": "raise SystemExit(3)",
    "returns-int": "return 42",
    "recurses": "return str(self)",
}


@pytest.mark.parametrize("how", list(BAD_STR))
@pytest.mark.parametrize("where", ["forward", "import"])
def test_an_exception_whose_str_misbehaves(run, tmp_path, fake_cpu, how, where):
    top = f"class Weird(Exception):\n    def __str__(self):\n        {BAD_STR[how]}\n"
    if where == "import":
        model = model_file(tmp_path, top=top + "raise Weird()\n")
    else:
        model = model_file(tmp_path, "raise Weird()", top=top)
    out = tmp_path / "r.json"
    result = run("diagnose", str(model), *FAST, "-o", str(out))
    assert result.code == 1, result.err
    (line,) = result.error_lines()
    assert "Weird" in line
    assert "/roofline/" not in result.err.replace("\\", "/"), result.err  # their frames only, never ours
    assert not out.exists()


@pytest.mark.parametrize("name", list(SEQUENCES))
def test_a_user_exception_message_cannot_drive_the_terminal(run, tmp_path, fake_cpu, name):
    model = model_file(tmp_path, f"raise ValueError({('boom ' + SEQUENCES[name] + ' end').__repr__()})")
    result = run("diagnose", str(model), *FAST, "-o", str(tmp_path / "r.json"))
    assert result.code == 1
    (line,) = result.error_lines()
    assert line.startswith("Error: the model raised ValueError: boom") and line.endswith("end")
    for char in ("\x1b", "\x9b", "\x07"):  # their traceback shows the source line's escapes as text, never raw
        assert char not in result.err
    assert_no_sequence(line)
    assert result.err.splitlines()[-2].startswith("ValueError: boom")  # their traceback's last line, cleaned too
    assert_no_sequence(result.err.splitlines()[-2])


def test_a_multi_line_message_is_one_error_line(run, tmp_path, fake_cpu):
    model = model_file(tmp_path, "raise ValueError('first\\nsecond\\n\\nthird')")
    result = run("diagnose", str(model), *FAST, "-o", str(tmp_path / "r.json"))
    assert result.code == 1
    assert result.error_lines() == ["Error: the model raised ValueError: first second third"]


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT", "SIGHUP", "SIGALRM", "SIGUSR1"])
@pytest.mark.parametrize("where", ["forward", "import"])
def test_signal_handlers_the_model_installs_end_with_its_calls(run, tmp_path, fake_cpu, signame, where):
    number = getattr(signal, signame)
    before = signal.getsignal(number)
    install = f"signal.signal(signal.{signame}, lambda *a: None)"
    model = model_file(tmp_path, install) if where == "forward" else model_file(tmp_path, top=install + "\n")
    result = run("diagnose", str(model), *FAST, "-o", str(tmp_path / "r.json"))
    assert result.code == 0, result.err
    assert signal.getsignal(number) is before
    assert read_report(tmp_path / "r.json").rows


def test_the_models_sigterm_handler_does_not_stop_the_timeout(run, tmp_path, fake_cpu):
    """A model that ignores SIGALRM at import: --timeout still ends a forward that hangs (exit 124)."""
    hang = "_deadline = time.monotonic() + 30\nwhile time.monotonic() < _deadline:\n    time.sleep(0.002)"
    model = model_file(tmp_path, hang, top="signal.signal(signal.SIGALRM, signal.SIG_IGN)\n")
    result = run("diagnose", str(model), *FAST, "--timeout", "1.5", "-o", str(tmp_path / "r.json"))
    assert result.code == 124, result.err
    assert result.error_lines()[0].startswith("Error: timed out after 1.5 s")


# ======================================================================= 6. escapes


def test_bench_table_strips_every_sequence(run, hostile, tmp_path):
    result = run("predict", str(hostile), "--device", "h100-sxm")
    assert_no_sequence(result.out + result.err)


def test_markdown_report_neutralises_links(run, hostile):
    result = run("report", str(hostile), "--format", "markdown")
    assert result.code == 0, result.err
    assert_no_sequence(result.out)
    assert "](javascript:" not in result.out and "](https://evil" not in result.out
    assert "[click]\\(javascript:alert(1))" in result.out


@pytest.mark.parametrize("label", ["=HYPERLINK(", "+1+2", "-2+3", "@SUM(A1:A2)"])
def test_csv_cells_that_start_like_a_formula_are_quoted(run, hostile, label):
    import csv

    result = run("report", str(hostile), "--format", "csv")
    assert result.code == 0, result.err
    assert_no_sequence(result.out)
    rows = list(csv.DictReader(io.StringIO(result.out)))
    labels = [row["label"] for row in rows]
    assert any(cell.startswith("'" + label) for cell in labels), labels
    assert not any(cell.startswith(label) for cell in labels)
    assert all(not cell.startswith(("=", "+", "-", "@")) for row in rows for cell in row.values())
    assert float(rows[0]["median_s"]) > 0  # numbers stay numbers


def test_negative_numbers_in_csv_stay_numbers():
    from roofline.report.export import _csv_column

    assert _csv_column([-1.5, 2.0]) == ["-1.5", "2.0"]
    assert _csv_column([-3, 4]) == ["-3", "4"]
    assert _csv_column(["-x", "y"]) == ["'-x", "y"]


def test_gate_markdown_and_junit_carry_no_sequence_or_link(run, hostile, tmp_path):
    baseline = baselines.save(baselines.from_report(read_report(hostile), commit=""), tmp_path / "b.json")
    junit = tmp_path / "g.xml"
    result = run("gate", str(hostile), "-b", str(baseline), "--format", "markdown", "--junit", str(junit))
    assert result.code == 0, result.err
    assert_no_sequence(result.out)
    assert "](javascript:" not in result.out
    assert_no_sequence(junit.read_text())


def test_gate_console_carries_no_sequence(run, hostile, tmp_path):
    baseline = baselines.save(baselines.from_report(read_report(hostile), commit=""), tmp_path / "b.json")
    result = run("gate", str(hostile), "-b", str(baseline))
    assert result.code == 0, result.err
    assert_no_sequence(result.out + result.err)


def test_html_report_carries_no_sequence(run, hostile, tmp_path):
    pytest.importorskip("matplotlib")
    page = tmp_path / "r.html"
    result = run("report", str(hostile), "-o", str(page))
    assert result.code == 0, result.err
    assert_no_sequence(page.read_text())
    assert 'href="javascript:' not in page.read_text()


def test_predict_and_baseline_show_carry_no_sequence(run, hostile, tmp_path):
    baseline = baselines.save(baselines.from_report(read_report(hostile), commit=""), tmp_path / "b.json")
    shown = run("baseline", "show", str(baseline))
    assert shown.code == 0, shown.err
    assert_no_sequence(shown.out)


def test_an_error_naming_a_hostile_path_is_one_clean_line(run, tmp_path):
    missing = tmp_path / f"no{OSC}such.json"
    result = run("report", str(missing))
    assert result.code == 2
    (line,) = result.error_lines()
    assert_no_sequence(result.err)
    assert "such.json" in line


@pytest.mark.parametrize("name", list(SEQUENCES))
def test_strip_sequences_takes_them_whole(name):
    from roofline.render.escape import markdown_text, plain_text, xml_text

    text = f"a{SEQUENCES[name]}b"
    expected = "alinkb" if name == "osc8" else "ab"  # a hyperlink's text stays, its target goes
    for escaped in (plain_text(text), xml_text(text), markdown_text(text)):
        assert escaped == expected, (name, escaped)


# ======================================================================= 7. bench rows kept on every signal


@pytest.mark.parametrize(
    ("signame", "code"), [("SIGTERM", 143), ("SIGHUP", 129), ("SIGINT", 130)], ids=["term", "hup", "int"]
)
@pytest.mark.parametrize("window", ["cleanup", "progress", "writing"])
def test_a_signal_in_the_window_between_rows_keeps_them(run, tmp_path, fake_cpu, monkeypatch, signame, code, window):
    """The signal arrives after row 2 of 3 is finished, outside any measurement: in the clean-up after the row, in
    the progress update before the next one, or while the report is being written: the finished rows are written."""
    from roofline.bench import run as bench_run
    from roofline.cli import output

    number = getattr(signal, signame)
    finished: list[int] = []
    real_item = bench_run._run_item

    def item(it, *args, **kwargs):
        real_item(it, *args, **kwargs)
        finished.append(it.values["m"])
        if window == "cleanup" and len(finished) == 2:
            os.kill(os.getpid(), number)  # delivered right here, between row 2 and row 3

    monkeypatch.setattr(bench_run, "_run_item", item)
    real_progress = output.plain_progress

    def progress(echo, *args, **kwargs):
        update = real_progress(echo, *args, **kwargs)

        def step(done, total, label):
            if window == "progress" and done == 2 and label:
                os.kill(os.getpid(), number)
            update(done, total, label)

        return step

    monkeypatch.setattr(output, "plain_progress", progress)
    real_save = output.save_report

    def save(*args, **kwargs):
        if window == "writing":
            os.kill(os.getpid(), number)  # the loop is over: this one waits until the report is written
        real_save(*args, **kwargs)

    monkeypatch.setattr("roofline.cli.bench.save_report", save)
    out = tmp_path / "b.json"
    args = ("bench", "gemm", "-m", "16,32,48", "-n", "16", "-k", "16", "--device", "cpu", "--max-time", "0.01")
    result = run(*args, "-o", str(out))
    assert result.code == code, result.err
    no_traceback(result)
    kept = [r["params"]["m"] for r in read_report(out).rows]
    assert kept == ([16, 32, 48] if window == "writing" else [16, 32])
    assert signal.getsignal(signal.SIGTERM) is not None


def test_a_timeout_between_the_last_row_and_the_report_loses_nothing(run, tmp_path, fake_cpu, monkeypatch):
    """--timeout's alarm once the loop is over (the progress display closing): dropped, the work is kept."""
    import contextlib

    @contextlib.contextmanager
    def progress():
        yield None
        os.kill(os.getpid(), signal.SIGALRM)  # the timer fires here, before --timeout's limit is left

    monkeypatch.setattr("roofline.cli.bench.bench_progress", progress)
    out = tmp_path / "b.json"
    result = run(*_bench(out, "--timeout", "60"))
    assert result.code == 0, result.err
    assert [r["params"]["m"] for r in read_report(out).rows] == [16, 32]
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_signal_hold_delivers_what_it_held():
    from roofline.cli.timeout import SignalHold

    hold = SignalHold()
    hold.hold()
    os.kill(os.getpid(), signal.SIGINT)  # recorded, not acted on
    with pytest.raises(KeyboardInterrupt):
        hold.release()  # Python's own Ctrl-C handler is back, and the signal delivered to it
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


# ======================================================================= 8. flags shown as flags


@pytest.mark.parametrize(
    "command",
    [
        ("bench", "gemm"),
        ("analyze", "gemm"),
        ("diagnose",),
        ("gate",),
        ("report",),
        ("plot",),
        ("predict",),
        ("calibrate",),
        ("baseline", "save"),
        (),
    ],
    ids=lambda c: "-".join(c) or "roofline",
)
def test_help_shows_no_bool_metavar(run, command):
    result = run(*command, "--help")
    assert result.code == 0, result.err
    assert "<bool>" not in result.out
    assert "--help" in result.out

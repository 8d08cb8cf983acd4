"""Diagnose's own time outside its stages (issue 15): every second of the command in a named stage (no 'other'),
and the CLI's own process with its heap frozen after torch's import (roofline.cli.process), its output complete
and flushed when piped, its atexit handlers run. Nothing here depends on the host's speed."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from roofline.cli import process

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "workloads" / "models" / "gelu_chain_unfused.py"

# the CLI run as the process's entry point (main() with no argv), CPU roofs faked (no calibration run)
ENTRY = textwrap.dedent(
    """
    import atexit, gc, os, sys
    import roofline.roofs

    sys.path.insert(0, os.path.join(os.getcwd(), "tests"))  # the repository's root: run_entry's cwd
    from diagnose_devices import CPU_SLOW_LAUNCH as CPU

    roofline.roofs.cpu_roofs = lambda torch_: (CPU, ["test roofs"])
    atexit.register(lambda: print(f"ATEXIT frozen={gc.get_freeze_count()}", file=sys.stderr))
    sys.argv = ["roofline", *sys.argv[1:]]
    from roofline.cli import main
    main()
    """
)


def run_entry(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", ENTRY, "diagnose", str(MODEL), "--device", "cpu", "--warmup", "1", "--iters", "2",
         *args],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip


def test_piped_output_is_complete_and_atexit_handlers_run(tmp_path):
    out = tmp_path / "r.json"
    result = run_entry("--json", "-o", str(out))
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)  # the whole report on the pipe, flushed before the exit
    written = json.loads(out.read_text())
    assert printed["rows"] and printed["rows"] == written["rows"]
    assert printed["aggregates"] == written["aggregates"] and printed["findings"] == written["findings"]
    stages = written["diagnose"]["stages"]
    assert {"python", "setup", "torch_import", "count", "events", "place", "render"} <= set(stages)
    # the user's (here: the test's) atexit handler ran, after the heap was frozen
    frozen = [line for line in result.stderr.splitlines() if line.startswith("ATEXIT frozen=")]
    assert len(frozen) == 1 and int(frozen[0].split("=")[1]) > 0, result.stderr

    table = run_entry("-o", str(tmp_path / "t.json"))
    assert table.returncode == 0, table.stderr
    # the console report whole on the pipe: its first line, and its last block (the notes), ended
    assert table.stdout.startswith(str(MODEL)) and "\nNotes: " in table.stdout and table.stdout.endswith("\n")
    assert json.loads((tmp_path / "t.json").read_text())["rows"]
    summary = [line for line in table.stderr.splitlines() if line.startswith("diagnose took ")]
    assert len(summary) == 1 and "setup " in summary[0]


def test_in_process_callers_never_freeze(monkeypatch):
    frozen: list[bool] = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))
    process.set_entry(False)
    process.freeze_heap()
    with process.frozen_after():
        assert gc.isenabled()  # not paused either
    assert frozen == []


def test_entry_pauses_the_collector_then_freezes(monkeypatch):
    frozen: list[bool] = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(gc.isenabled()))
    try:
        process.set_entry(True)
        with process.frozen_after():
            assert not gc.isenabled()
        assert gc.isenabled() and frozen == [False]  # frozen while paused, then resumed
        with pytest.raises(RuntimeError), process.frozen_after():
            raise RuntimeError("import failed")
        assert gc.isenabled() and len(frozen) == 2
    finally:
        process.set_entry(False)


def test_main_with_argv_is_no_process_entry(cli, monkeypatch):
    seen: list[bool] = []
    monkeypatch.setattr(process, "set_entry", lambda entry: seen.append(entry))
    assert cli("specs", "list").code == 0
    assert seen == [False, False]  # main(["specs", "list"]): an in-process caller, reset after the command


# the end of the CLI's own process (process.end_process): a stand-in torch module (the condition is only that torch
# was imported), an atexit handler, output left in Python's and in C's stdio buffers, then end_process(CODE)
END = textwrap.dedent(
    """
    import atexit, ctypes, sys, types
    from roofline.cli import process

    if sys.argv[2] == "torch":
        sys.modules.setdefault("torch", types.ModuleType("torch"))
    atexit.register(lambda: print("ATEXIT ran", flush=True))
    user = types.ModuleType("user_model")  # a model file's module-level log file, written, never closed
    user.log = open(sys.argv[3], "w")
    user.log.write("user line\\n")
    sys.modules["user_model"] = user
    libc = ctypes.CDLL(None)
    libc.printf(b"C-level line\\n")  # C's stdout buffer (a pipe: fully buffered), written only by a flush
    sys.stdout.write("python line, unflushed\\n")
    code = eval(sys.argv[1])
    process.end_process(code)
    print("NOT ENDED", flush=True)  # the normal exit follows (end_process returned)
    sys.exit(code)
    """
)


def run_end(code: str, log: Path, torch: str = "torch") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # NB: buffered, C's stdio included
    return subprocess.run([sys.executable, "-c", END, code, torch, str(log)], capture_output=True, text=True,
                          cwd=ROOT, timeout=60, env=env)  # fmt: skip


@pytest.mark.skipif(sys.platform != "linux", reason="os._exit and C's printf through ctypes: Linux")
def test_the_process_ends_with_its_code_its_output_flushed_and_its_atexit_handlers_run(tmp_path):
    for code, expected in (("0", 0), ("None", 0), ("3", 3)):
        log = tmp_path / f"log-{code}.txt"
        result = run_end(code, log)
        assert log.read_text() == "user line\n"  # the user's open file flushed, as a normal exit would
        assert result.returncode == expected, result.stderr
        lines = result.stdout.splitlines()
        # Python's buffer and C's both written out, the atexit handler run; nothing after end_process ran
        assert sorted(lines) == sorted(["C-level line", "python line, unflushed", "ATEXIT ran"]), result.stdout
        assert "NOT ENDED" not in result.stdout


@pytest.mark.skipif(sys.platform != "linux", reason="os._exit and C's printf through ctypes: Linux")
def test_the_normal_exit_without_torch_or_with_a_message(tmp_path):
    without_torch = run_end("0", tmp_path / "a.txt", torch="no")
    assert without_torch.returncode == 0 and "NOT ENDED" in without_torch.stdout
    message = run_end("'a message'", tmp_path / "b.txt")
    assert message.returncode == 1 and "NOT ENDED" in message.stdout and "a message" in message.stderr


@pytest.mark.skipif(sys.platform != "linux", reason="os._exit and C's printf through ctypes: Linux")
def test_a_process_under_a_profiler_ends_normally_so_the_profile_is_written(tmp_path):
    """`python -m cProfile -o FILE -m roofline ...`: cProfile writes FILE after the command returns; end_process
    leaves such a process to Python's exit (sys.getprofile before 3.12, sys.monitoring from 3.12)."""
    stats = tmp_path / "run.prof"
    script = tmp_path / "end.py"
    script.write_text(END)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    result = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(stats), str(script), "0", "torch",
                             str(tmp_path / "log.txt")], capture_output=True, text=True, cwd=ROOT, timeout=60,
                            env=env)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "NOT ENDED" in result.stdout  # end_process returned: the normal exit followed
    assert stats.is_file() and stats.stat().st_size > 0


def test_quiet_lasts_for_the_command_only(cli):
    """main(argv) from a caller's process (tests, a notebook): --quiet/--verbose are the command's, not the
    process's (a later in-process diagnose's status line and notes are not silenced by an earlier -q)."""
    from roofline.cli import verbosity

    assert verbosity.level() == verbosity.NORMAL
    assert cli("--quiet", "specs", "list").code == 0
    assert verbosity.level() == verbosity.NORMAL
    assert cli("--verbose", "specs", "list").code == 0
    assert verbosity.level() == verbosity.NORMAL

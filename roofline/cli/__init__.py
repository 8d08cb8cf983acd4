"""The `roofline` command: a thin layer that parses, calls the library, renders, and maps errors to exit codes."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import Any, NoReturn

import typer
from typer.core import TyperGroup

from roofline.cli import analyze, bench, diagnose, plot, process, report, specs, verbosity
from roofline.cli import baseline as baseline_cli
from roofline.cli import calibrate as calibrate_cli
from roofline.cli import completion as completion_cli
from roofline.cli import counters as counters_cli
from roofline.cli import gate as gate_cli
from roofline.cli import predict as predict_cli
from roofline.cli import schema as schema_cli
from roofline.version import __version__


class _Interrupted(Exception):
    """A KeyboardInterrupt (Ctrl-C, errors.Terminated, errors.TimedOut) carried past typer, which would turn it
    into a silent exit 130, to main(), which says what happened and exits with its code."""

    def __init__(self, interrupt: KeyboardInterrupt) -> None:
        super().__init__(str(interrupt))
        self.interrupt = interrupt


class _RootGroup(TyperGroup):
    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            raise _Interrupted(exc) from exc


def _flags_as_flags() -> None:
    """A boolean flag (--json, --force, --warm/--cold, --help) shows no ``<bool>`` value in --help: it takes none.
    (typer 0.29 labels every option with its type; a flag's label is dropped here, once for every command. An
    older typer has no such label, and nothing to drop: left as it is.)"""
    from typer.core import TyperOption

    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is None or getattr(shown, "roofline_flags", False):
        return

    def display_type_rich(self: TyperOption, ctx: Any) -> str | None:
        if getattr(self, "is_flag", False) and self.metavar is None:
            return None
        return shown(self, ctx)

    display_type_rich.roofline_flags = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_flags_as_flags()

app = typer.Typer(
    cls=_RootGroup,
    name="roofline",
    help=(
        "Roofline analysis and GPU performance diagnosis: what limits this kernel, which property to "
        "exploit, and how much faster it can go.\n\n"
        "Start with `roofline analyze gemm -m 4096 -n 4096 -k 4096 --dtype fp16 --device h100-sxm` "
        "(napkin math, no GPU needed) or `roofline specs list`."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(specs.app, name="specs")
app.add_typer(analyze.app, name="analyze")
app.add_typer(bench.app, name="bench")
app.command("calibrate")(calibrate_cli.calibrate)
app.command("diagnose")(diagnose.diagnose)
app.add_typer(counters_cli.app, name="counters")
app.command("plot")(plot.plot)
app.command("predict")(predict_cli.predict)
app.command("report")(report.report)
app.command("gate")(gate_cli.gate)
app.add_typer(baseline_cli.app, name="baseline")
app.command("schema")(schema_cli.schema)
app.command("completion")(completion_cli.completion)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"roofline {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
    quiet: bool = typer.Option(
        False, "--quiet", "-q", help="Say nothing on stderr but errors (no notes, progress or 'written to' lines)."
    ),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="Also show our own traceback under an error (for a bug report)."
    ),
) -> None:
    """Roofline analysis and GPU performance diagnosis."""
    from roofline.cli import verbosity

    if quiet and verbose:
        from roofline.errors import UsageError

        raise UsageError("--quiet and --verbose: give one of them")
    verbosity.set_level(verbosity.QUIET if quiet else verbosity.VERBOSE if verbose else verbosity.NORMAL)
    from roofline.cli import defaults

    defaults.apply(ctx)  # [tool.roofline] of pyproject.toml: the defaults of the subcommand about to run


def _click_errors() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """(usage/click errors, exit signals) for whichever click this typer uses (vendored since typer 0.20)."""
    errors: list[type[BaseException]] = [cls for cls in (getattr(typer, "TyperException", None),) if cls]
    exits: list[type[BaseException]] = [typer.Exit, typer.Abort]
    try:
        import click
    except ImportError:
        pass
    else:
        errors.append(click.ClickException)
        exits += [click.exceptions.Exit, click.exceptions.Abort]
    return tuple(errors), tuple(exits)


def _command_path(command: Any, argv: list[str] | None) -> str:
    """'roofline bench' for `roofline bench gemm ...`: the command a message is about."""
    args = sys.argv[1:] if argv is None else argv
    name = args[0] if args else ""
    return f"roofline {name}" if name in getattr(command, "commands", {}) else "roofline"


def _terminate_like_ctrl_c() -> Callable[[], None]:
    """SIGTERM and SIGHUP raise :class:`roofline.errors.Terminated` (a KeyboardInterrupt) while a command runs, so
    they stop it the way Ctrl-C does (bench keeps and writes its finished rows); returns what puts the previous
    handlers back. A no-op outside the main thread (signal handlers can only be set there)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def handler(signum: int, frame: object) -> None:
        from roofline.errors import Terminated

        raise Terminated(signum, signal.Signals(signum).name)

    previous = {}
    for name in ("SIGTERM", "SIGHUP"):
        number = getattr(signal, name, None)
        if number is not None:
            previous[number] = signal.signal(number, handler)

    def restore() -> None:
        for number, old in previous.items():
            signal.signal(number, old)

    return restore


def _interrupted(exc: KeyboardInterrupt) -> NoReturn:
    """Ctrl-C (130), SIGTERM/SIGHUP (143/129: errors.Terminated) or --timeout (124: errors.TimedOut, naming what
    was running): one line, then exit."""
    from roofline.errors import Terminated, TimedOut, interrupt_exit_code

    if isinstance(exc, TimedOut):
        typer.echo(f"Error: {exc} (--timeout)", err=True)
    else:
        typer.echo(f"Terminated ({exc.signal_name})." if isinstance(exc, Terminated) else "Interrupted.", err=True)
    sys.exit(interrupt_exit_code(exc))


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: every known error becomes one line `Error: ...` and its exit code. Standard
    output is owned for the command (roofline.cli.stdout: any encoding, a failing stdout said in one line at the
    end, exit 2, after the files are written); in the CLI's own process, threads the user's code left running do
    not keep it alive (:func:`_leave`), and its exit skips torch's teardown
    (:func:`roofline.cli.process.end_process`)."""
    from roofline.cli import stdout

    entry = argv is None
    installed = stdout.install(entry)
    before = verbosity.level()  # an in-process caller's: --quiet/--verbose last for the command only
    code: Any = 0
    try:
        _main(argv)
    except SystemExit as exc:
        code = exc.code
    finally:
        failure = stdout.settle()
        stdout.uninstall(installed)
        if not entry:
            verbosity.set_level(before)
    if failure is not None and not isinstance(failure, BrokenPipeError):  # a closed pipe (`| head`): nothing to say
        typer.echo(f"Error: standard output: cannot write it: {failure.strerror or failure}", err=True)
        if code in (0, None):
            from roofline.errors import EXIT_USAGE

            code = EXIT_USAGE
    if entry:
        _leave(code)
        process.end_process(code)  # the interpreter's exit without torch's teardown (roofline.cli.process)
    sys.exit(code)


#: how long the CLI's own process waits, once its command is done, for threads the user's code left running
LEAVE_GRACE_S = 1.0


def _leave(code: Any) -> None:
    """The CLI's own process, its command done (report written, results printed): threads the user's code started
    and left running (not daemon threads) would keep the interpreter from exiting, however long they run. They get
    LEAVE_GRACE_S to end; then one note names them and the process ends with ``os._exit`` (after flushing standard
    output and standard error; atexit handlers do not run: those threads hold the interpreter's shutdown anyway)."""
    import os
    import threading
    import time

    current = threading.current_thread()
    left = [t for t in threading.enumerate() if t is not current and not t.daemon and t.is_alive()]
    if not left:
        return
    deadline = time.monotonic() + LEAVE_GRACE_S
    for thread in left:
        thread.join(max(0.0, deadline - time.monotonic()))
    left = [t for t in left if t.is_alive()]
    if not left:
        return
    from roofline.render.escape import plain_text

    names = ", ".join(plain_text(t.name) for t in left[:5]) + (", ..." if len(left) > 5 else "")
    verbosity.info(f"note: {len(left)} thread(s) left running by the model ({names}): roofline exits without them")
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code if isinstance(code, int) else 1)


def _error_line(message: object) -> str:
    """``Error: ...`` with text that may come from the user's code or files made safe for a terminal: control
    sequences stripped whole (roofline.render.escape), and one line (a message's other lines joined)."""
    from roofline.render.escape import plain_text

    text = " ".join(line.strip() for line in plain_text(message).splitlines() if line.strip())
    return f"Error: {text}"


def _main(argv: list[str] | None) -> None:
    """The command itself (see main); always ends with SystemExit."""
    from roofline.errors import EXIT_USAGE, RooflineError
    from roofline.render.base import clean_terminal_size_env

    clean_terminal_size_env()
    if completion_cli.completing():
        completion_cli.enable_completion()
    click_errors, exits = _click_errors()
    command = typer.main.get_command(app)
    restore = _terminate_like_ctrl_c()
    verbosity.set_level(verbosity.NORMAL)
    process.set_entry(argv is None)  # the console script / python -m roofline: the process ends after this command
    try:
        result = command.main(args=argv, prog_name="roofline", standalone_mode=False)
    except RooflineError as exc:
        traceback_text = getattr(exc, "traceback_text", "")
        if traceback_text:  # the user's code failed: their traceback (ours trimmed), then our one line
            from roofline.render.escape import plain_text

            typer.echo(plain_text(traceback_text).rstrip("\n"), err=True)
        elif verbosity.verbose():  # --verbose: where in roofline the error was raised
            import traceback

            typer.echo("".join(traceback.format_exception(exc)).rstrip("\n"), err=True)
        typer.echo(_error_line(exc), err=True)
        sys.exit(exc.exit_code)
    except _Interrupted as exc:
        _interrupted(exc.interrupt)
    except KeyboardInterrupt as exc:
        _interrupted(exc)
    except MemoryError:  # past the free memory, or the process guard (roofline.resources.memory_guard)
        typer.echo(
            "Error: out of memory: the run needed more than this machine has free (or than the process's data "
            "limit, RLIMIT_DATA, allows): use smaller sizes",
            err=True,
        )
        sys.exit(EXIT_USAGE)
    except ModuleNotFoundError as exc:  # a dependency of ours is missing from this environment
        from roofline.extras import EXTRAS, install_hint, missing_extra

        missing = missing_extra(exc)
        if missing is not None:  # an optional one: name the extra that brings it
            module, extra = missing
            typer.echo(f"Error: {_command_path(command, argv)} needs {module}: {install_hint(extra)}", err=True)
            sys.exit(EXIT_USAGE)
        if exc.name is None or exc.name.split(".")[0] in ("roofline", *EXTRAS):
            raise  # ours, or an optional package imported outside roofline or broken: the traceback says more
        package = exc.name.split(".")[0]
        typer.echo(
            f"Error: roofline needs the Python package '{package}': install it (pip install {package}) "
            "or reinstall roofline with its dependencies",
            err=True,
        )
        sys.exit(EXIT_USAGE)
    except exits as exc:
        if type(exc).__name__ == "Abort":  # click turns a KeyboardInterrupt into Abort: the original decides
            cause = exc.__cause__ or exc.__context__
            _interrupted(cause if isinstance(cause, KeyboardInterrupt) else KeyboardInterrupt())
        sys.exit(getattr(exc, "exit_code", 0))
    except click_errors as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # `roofline` or a group alone: its help was asked for
            sys.exit(0)
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        ctx = getattr(exc, "ctx", None)
        hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        typer.echo(_error_line(f"{message}{hint}"), err=True)
        sys.exit(getattr(exc, "exit_code", EXIT_USAGE) or EXIT_USAGE)
    except BrokenPipeError:  # `roofline ... | head` (a write outside the owned stdout)
        if argv is None:  # what is still buffered goes nowhere, instead of failing again at exit
            import os

            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, sys.__stdout__.fileno() if sys.__stdout__ is not None else 1)
            os.close(null)
        sys.exit(0)
    finally:
        restore()
        process.set_entry(False)
    sys.exit(result if isinstance(result, int) else 0)

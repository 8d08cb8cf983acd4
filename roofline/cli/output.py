"""What commands share to put their results out: files and stdout, chart files, --plot, progress displays."""

from __future__ import annotations

import contextvars
import os
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer

from roofline.cli.verbosity import info
from roofline.errors import UsageError

CHART_FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
BINARY_FORMATS = ("png", "pdf", "parquet")


def command_line() -> str:
    """The command as the user ran it, stored in the reports it writes."""
    return " ".join(["roofline", *sys.argv[1:]])


# ------------------------------------------------------------------------------------------------ output


def _either(items: list[str]) -> str:
    return ", ".join(items[:-1]) + f" or {items[-1]}" if len(items) > 1 else items[0]


def output_format(
    output: Path | None, fmt: str | None, formats: dict[str, str], default: str, *, option: str = "-o"
) -> str:
    """--format when given (checked), else the format the output's extension names, else ``default``."""
    names = list(dict.fromkeys(formats.values()))
    if fmt is not None:
        if fmt.lower() not in names:
            raise UsageError(f"--format {fmt!r}: use {_either(names)}")
        return fmt.lower()
    if output is None:
        return default
    suffix = output.suffix.lower()
    if suffix in formats:
        return formats[suffix]
    exts = _either(list(formats))
    hint = " (or give --format)" if option == "-o" else ""
    if not suffix:
        raise UsageError(f"{option} {output}: no extension to tell the format: end it in {exts}{hint}")
    raise UsageError(f"{option} {output}: unknown output extension {suffix!r}: use {exts}{hint}")


def stdout_is_terminal() -> bool:
    return sys.stdout.isatty()


def refuse_binary_to_terminal(output: Path | None, fmt: str) -> None:
    """Before any work: binary output with no -o is refused when stdout is a terminal (see write_output)."""
    if output is None and fmt in BINARY_FORMATS and stdout_is_terminal():
        write_output(b"", None, fmt)


def write_output(content: str | bytes, output: Path | None, fmt: str, shown: Path | None = None) -> None:
    """To -o (atomically; a failure is one line ``-o PATH: cannot write it: ...``), else to stdout; binary output
    to a terminal is refused (it would garble it)."""
    from roofline.fileio import absolute

    if output is None:
        if isinstance(content, bytes):
            if stdout_is_terminal():
                raise UsageError(
                    f"not writing {fmt} (binary) to a terminal: give -o FILE.{fmt}, or redirect stdout to a file"
                )
            sys.stdout.flush()
            sys.stdout.buffer.write(content)
            sys.stdout.buffer.flush()
        else:
            from roofline.cli.stdout import write_document

            write_document(content)
        return
    from roofline.report.outputs import write

    write(absolute(output), content, shown=shown if shown is not None else output)


FORCE_HELP = (
    "Replace an existing output file even when it is not one roofline writes (a file the command reads is never "
    "replaced)."
)
_FORCE: contextvars.ContextVar[bool] = contextvars.ContextVar("roofline_force", default=False)


def _remember_force(ctx: typer.Context, value: bool) -> bool:
    _FORCE.set(bool(value))
    ctx.call_on_close(lambda: _FORCE.set(False))
    return value


def forced() -> bool:
    """Whether the running command was given --force (force_option)."""
    return _FORCE.get()


def force_option() -> Any:
    """--force for a command that writes files; :func:`prepare_outputs` reads it through the command's context (as
    --plot), not its signature."""
    return typer.Option(False, "--force", help=FORCE_HELP, callback=_remember_force, expose_value=False)


def prepare_outputs(
    output: Path | None,
    kind: Any,
    *,
    inputs: Iterable[tuple[str, Path | str | None]] = (),
    force: bool | None = None,
    option: str = "-o",
) -> Path | None:
    """Before any work (measuring, the user's code): check -o and --plot (roofline.report.outputs.prepare) and
    return -o's absolute path (None without -o); --plot's is kept for :func:`write_requested_plot`. ``force``:
    default --force (force_option)."""
    return prepare_all(output, kind, inputs=inputs, force=force, option=option)[0]


def prepare_all(
    output: Path | None,
    kind: Any,
    extra: Sequence[tuple[str, Path | None, Any]] = (),
    *,
    inputs: Iterable[tuple[str, Path | str | None]] = (),
    force: bool | None = None,
    option: str = "-o",
) -> list[Path | None]:
    """:func:`prepare_outputs` with more outputs checked with them (``extra``: (option, path, kind), e.g.
    diagnose's --export-trace): [-o's absolute path, then each extra one's] (None where not asked for)."""
    from roofline.report.outputs import prepare

    force = _FORCE.get() if force is None else force

    plot = _REQUESTED.get()
    plot_kind = CHART_FORMATS.get(plot.suffix.lower()) if plot is not None else None
    where, plot_where, *more = prepare(
        [(option, output, kind), ("--plot", plot, plot_kind), *extra], inputs=inputs, force=force
    )
    _PREPARED_PLOT.set(plot_where)
    return [where, *more]


def save_report(report: Any, path: Path, shown: Path | str, option: str = "-o") -> None:
    """Write a report atomically at ``path`` (prepared); a failure is one line ``-o PATH: cannot write it: ...``,
    exit 2 (call it after printing the results, so that they are not lost with it)."""
    from roofline.report.outputs import write

    write(path, report.to_json(), option=option, shown=shown)


def print_notes(notes: Any) -> None:
    from roofline.cli.verbosity import info

    for note in notes:
        info(f"note: {note}")


def chart_content(spec: Any, fmt: str, size: tuple[int, int] = (1600, 1000)) -> str | bytes:
    """The drawn chart: SVG as text, PNG and PDF as bytes."""
    from roofline.render.figure import figure, figure_bytes

    data = figure_bytes(figure(spec, size_px=size), fmt)
    return data.decode("utf-8") if fmt == "svg" else data


# ------------------------------------------------------------------------------------------------ --plot


_REQUESTED: contextvars.ContextVar[Path | None] = contextvars.ContextVar("roofline_plot", default=None)
_PREPARED_PLOT: contextvars.ContextVar[Path | None] = contextvars.ContextVar("roofline_plot_at", default=None)


def _remember(ctx: typer.Context, value: Path | None) -> Path | None:
    """Checks --plot FILE before the command runs (a bench must not fail at its end on a typo), and keeps it
    for :func:`write_requested_plot` until the command ends."""
    if value is not None:
        output_format(value, None, CHART_FORMATS, "png", option="--plot")
    _REQUESTED.set(value)
    _PREPARED_PLOT.set(None)
    ctx.call_on_close(lambda: (_REQUESTED.set(None), _PREPARED_PLOT.set(None)))
    return value


def plot_option() -> Any:
    """--plot FILE for a command that writes a report; the command calls write_requested_plot(report) once the
    report is built (the option's value reaches it through the command's context, not its signature)."""
    return typer.Option(
        None,
        "--plot",
        metavar="FILE",
        help="Also write the roofline chart of the report here (.png, .svg or .pdf; see `roofline plot`).",
        callback=_remember,
        expose_value=False,
    )


def requested_plot() -> Path | None:
    """The path --plot asked for (None when it did not)."""
    return _REQUESTED.get()


def write_requested_plot(report: Any, name: str) -> None:
    """Write the chart of ``report`` where --plot asked for it (nothing when it did not)."""
    path = _REQUESTED.get()
    if path is None:
        return
    from roofline.api import known_devices
    from roofline.fileio import absolute
    from roofline.report.chart import NamedReport, report_chart
    from roofline.report.outputs import write

    spec = report_chart([NamedReport(name, report)], known_devices)
    fmt = output_format(path, None, CHART_FORMATS, "png")
    write(_PREPARED_PLOT.get() or absolute(path), chart_content(spec, fmt), option="--plot", shown=path)
    print_notes(spec.notes)
    info(f"Chart written to {path}")


# ------------------------------------------------------------------------------------------------ progress


#: a piped bench prints a finished row at most this often (the last row always)
PLAIN_PROGRESS_EVERY_S = 2.0


def plain_progress(echo: Any, now: Any = time.monotonic, every_s: float = PLAIN_PROGRESS_EVERY_S) -> Any:
    """A run_bench progress callback for a non-terminal stderr: a plain line for a finished row,
    ``bench: 3/12 m=64 n=64 k=64 1.2 s`` (its label and the seconds it took), at most one every ``every_s`` and
    the first once the run has taken ``every_s``: a piped run is never silent for minutes, and a short one (or
    one whose rows all fail at once) prints none. ``echo(line)`` writes a line."""
    state: dict[str, Any] = {"label": "", "started": None, "printed": None}

    def update(done: int, total: int, label: str) -> None:
        moment = now()
        if state["printed"] is None:
            state["printed"] = moment  # the run starts: the first line comes every_s later at the earliest
        started, finished = state["started"], state["label"]
        if started is not None and finished and done > 0 and moment - state["printed"] >= every_s:
            echo(f"bench: {done}/{total} {finished} {moment - started:.1f} s")
            state["printed"] = moment
        state["label"], state["started"] = label, moment

    return update


@contextmanager
def bench_progress() -> Iterator[Any]:
    """Progress over the rows on stderr, as a run_bench progress callback: a transient bar on a terminal, plain
    lines (:func:`plain_progress`) otherwise."""
    from rich.console import Console

    from roofline.cli.verbosity import quiet

    console = Console(stderr=True)
    if quiet():
        yield None
        return
    if not console.is_terminal:
        yield plain_progress(info, every_s=PLAIN_PROGRESS_EVERY_S)
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("bench"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("", total=None)

        def update(done: int, total: int, label: str) -> None:
            bar.update(task, completed=done, total=total, description=label)

        yield update


def _may_be_terminal(stream: Any) -> bool:
    """Whether rich's Console could take ``stream`` for a terminal: a tty, or the environment says so (rich reads
    TTY_COMPATIBLE and FORCE_COLOR, https://force-color.org/). False here: rich's answer is False too."""
    if os.environ.get("TTY_COMPATIBLE") is not None or os.environ.get("FORCE_COLOR") is not None:
        return True
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


@contextmanager
def diagnose_status() -> Iterator[Any]:
    """A transient status line on stderr naming the running stage (terminals only), as a diagnose progress
    callback. NB: rich is imported only where the line may show (a --json run on a pipe never needs it)."""
    from roofline.cli.verbosity import quiet

    if quiet() or not _may_be_terminal(sys.stderr):
        yield None
        return
    from rich.console import Console

    console = Console(stderr=True)
    if not console.is_terminal:
        yield None
        return
    with console.status("diagnose", spinner="dots") as status:

        def update(stage: str) -> None:
            status.update(f"diagnose: {stage}")

        yield update

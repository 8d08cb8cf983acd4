"""Options and helpers shared by commands."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import typer

from roofline.costs.params import Param, Workload
from roofline.units import split_list

SPEC_HELP = "Extra spec sheet (YAML); repeatable. A directory of sheets can be named by $ROOFLINE_SPECS_DIR."


def spec_option() -> Any:
    return typer.Option(None, "--spec", help=SPEC_HELP, metavar="FILE")


def json_option() -> Any:
    return typer.Option(False, "--json", help="Print one JSON document instead of tables.")


def registry(spec_files: list[Path] | None):  # -> SpecRegistry
    from roofline.specs.loader import load_registry

    return load_registry(spec_files or [])


def print_json(data: Any) -> None:
    from roofline.yamlio import dumps_json

    print_text(dumps_json(data, indent=2, default=str) + "\n")


def print_text(text: str) -> None:
    """Our document (a table, JSON...) to standard output (roofline.cli.stdout: also after the model's writes were
    diverted to standard error)."""
    from roofline.cli.stdout import write_document

    write_document(text)


SWEEP = " Comma list sweeps."


def sizes_value(text: str | None, option: str, *, allow_zero: bool = False, integer: bool = True) -> Any:
    """A size option's value: None (not given), one size, or a list of sizes (a sweep); ``integer=False``: numbers
    (2.5)."""
    from roofline.units import parse_sizes

    if text is None:
        return None
    values = parse_sizes(text, option, allow_zero=allow_zero, integer=integer)
    return values if len(values) > 1 else values[0]


def times_value(text: str | None, option: str, unit: str) -> Any:
    """A time option's value in ``unit``: None (not given), one time, or a list (a sweep): ``5us,10us``."""
    from roofline.units import parse_times

    if text is None:
        return None
    values = parse_times(text, option, unit)
    return values if len(values) > 1 else values[0]


def words_value(text: str | None, option: str) -> Any:
    """A word option's value (dtype, op, impl): None, one word, or a list (a sweep)."""
    if text is None:
        return None
    values = split_list(text, option)
    return values if len(values) > 1 else values[0]


def bytes_value(text: str | None, option: str) -> Any:
    """A byte count such as 80G, 80GB, 75.6e9: None or an int."""
    from roofline.units import parse_size

    if text is None:
        return None
    stripped = text.strip()
    if stripped[-1:] in ("B", "b"):
        stripped = stripped[:-1]
    return int(parse_size(stripped, option, integer=False))


# ------------------------------------------------------------------------- options declared once, for many commands
# Typer reads a command's options from its signature. `with_options` writes a group of options once: the command
# names one parameter where the group stands, and receives what the group's values build in it.

Command = Callable[..., Any]


def with_options(
    into: str, params: Sequence[inspect.Parameter], build: Callable[..., Any]
) -> Callable[[Command], Command]:
    """A decorator: ``params`` stand in the command's signature where its parameter ``into`` stood, and the command
    is called with ``into=build(**their values)``. ``build`` takes ``**_`` for the options that reach the code
    through the command's context (--plot, --force: typer passes them too)."""
    names = {p.name for p in params}

    def decorate(func: Command) -> Command:
        signature = inspect.signature(func, eval_str=True)
        if into not in signature.parameters:
            raise TypeError(f"{func.__name__} has no parameter {into!r} for its options")
        listed: list[inspect.Parameter] = []
        for param in signature.parameters.values():
            listed.extend(params if param.name == into else [param])

        @functools.wraps(func)
        def command(**kwargs: Any) -> Any:
            given = {name: kwargs.pop(name) for name in list(kwargs) if name in names}
            return func(**{into: build(**given)}, **kwargs)

        command.__signature__ = signature.replace(parameters=listed)  # type: ignore[attr-defined]
        return command

    return decorate


def option(name: str, default: Any, annotation: Any) -> inspect.Parameter:
    """One parameter of a generated signature: ``default`` is the typer.Option."""
    return inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=annotation)


def workload_option(param: Param) -> inspect.Parameter:
    """The typer option of a workload parameter (roofline.costs.params)."""
    text = param.help + ("." if param.kind == "dtype" and param.default is not None else "")
    if param.kind == "dtype" and param.default is None:
        text += " (default: bf16 on a GPU, fp32 on the CPU)."
    if param.sweeps and param.sweep_help:
        text += SWEEP
    extra: dict[str, Any] = {"metavar": param.metavar} if param.metavar else {}
    annotation: Any = {"flag": bool, "path": Path | None}.get(
        param.kind, str if param.default is not None else str | None
    )
    return option(param.key, typer.Option(param.default, *param.flags, help=text, **extra), annotation)


def workload_values(
    workload: Workload, texts: dict[str, Any], default_dtype: Callable[[], str] | None = None
) -> dict[str, Any]:
    """The values of ``workload``'s options from their texts, in the order its sweep nests them. A dtype not given
    is ``default_dtype()`` (bench: the device's)."""
    params = {p.key: p for p in workload.params}
    values: dict[str, Any] = {}
    for key in workload.order:
        param, text = params[key], texts[key]
        if param.kind == "size":
            values[key] = sizes_value(text, param.option, allow_zero=param.zero)
        elif param.kind == "word" or (param.kind == "dtype" and text is not None):
            values[key] = words_value(text, param.option)
        elif param.kind == "dtype":
            values[key] = default_dtype() if default_dtype is not None else None
        elif param.kind == "number":
            values[key] = sizes_value(text, param.option, integer=False)
        elif param.kind == "time":
            values[key] = times_value(text, param.option, param.unit)
        elif param.kind == "bytes":
            values[key] = bytes_value(text, param.option)
        else:
            values[key] = text
    return values


def workload_options(workload: Workload, into: str = "texts") -> Callable[[Command], Command]:
    """A decorator: ``workload``'s options, in its declared order, where the command's parameter ``into`` stands;
    the command receives their texts, keyed as the cost model names them (read by :func:`workload_values`)."""
    return with_options(into, [workload_option(p) for p in workload.params], lambda **texts: texts)

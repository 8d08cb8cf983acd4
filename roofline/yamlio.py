"""Reading YAML and JSON input files with one-line errors that name the file and the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from roofline.errors import RooflineError

M = TypeVar("M", bound=BaseModel)


def load_yaml(path: Path, error: type[RooflineError]) -> Any:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise error(f"{path}:{where}: invalid YAML: {problem}") from None


def describe_validation_error(exc: ValidationError, doc: str = "") -> str:
    """First problem of a pydantic error as 'field.path: message' (plus a count of the others)."""
    errors = exc.errors()
    first = errors[0]
    loc = ".".join(str(part) for part in first["loc"]) or "(top level)"
    kind = first["type"]
    if kind == "extra_forbidden":
        message = "unknown key (check the spelling" + (f"; {doc} lists the allowed keys)" if doc else ")")
    elif kind == "missing":
        message = "required field is missing"
    else:
        message = str(first["msg"]).removeprefix("Value error, ")
        value = first.get("input")
        shown = repr(value)
        # Echo the offending value when it is short and not already quoted in the message.
        scalar = kind not in ("model_type", "dict_type") and not isinstance(value, (dict, list))
        quoted = isinstance(value, str) and shown in message
        if scalar and len(shown) <= 60 and not quoted:
            message += f" (got {shown})"
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    return f"{loc}: {message}{more}"


def validate(model: type[M], data: Any, source: str, error: type[RooflineError], doc: str = "") -> M:
    if not isinstance(data, dict):
        raise error(f"{source}: expected a mapping of keys to values at the top level")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise error(f"{source}: {describe_validation_error(exc, doc)}") from None

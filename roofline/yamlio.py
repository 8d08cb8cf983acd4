"""Reading YAML and JSON input files with one-line errors that name the file and the field."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from roofline.errors import RooflineError

M = TypeVar("M", bound=BaseModel)


def read_text(path: Path, error: type[RooflineError], what: str = "YAML") -> str:
    """A UTF-8 text file's text (a leading byte-order mark dropped); one-line errors for a missing, unreadable,
    binary or non-UTF-8 file (say where the first bad byte is and how to fix it)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except IsADirectoryError:
        raise error(f"{path}: is a directory, not a {what} file") from None
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror or exc}") from None
    if b"\x00" in data[:8192]:
        raise error(f"{path}: a binary file, not {what} text: give the {what} file itself")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise error(
            f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line}): save the file as UTF-8"
        ) from None


MAX_DEPTH = 1000


def _flow_depth(text: str) -> int:
    """How deep ``[`` and ``{`` nest (quotes not parsed: an upper bound); cheap unless the text holds many."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return 0
    depth = deepest = 0
    for char in text:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth = max(depth - 1, 0)
    return deepest


def load_yaml(path: Path, error: type[RooflineError]) -> Any:
    """The YAML document in ``path`` (safe loading: plain data only); every problem is one ``error`` naming
    the file (and the line, for invalid YAML)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    text = read_text(path, error)
    if _flow_depth(text) > MAX_DEPTH:  # libyaml crashes the process on some 10^5 nested brackets
        raise error(f"{path}: invalid YAML: nested more than {MAX_DEPTH} levels deep")
    try:
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}:" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if isinstance(exc, yaml.reader.ReaderError):  # a control character: say which and where
            line = text.count("\n", 0, exc.position) + 1
            where, problem = f" line {line}:", f"{str(exc).splitlines()[0]}: remove it"
        raise error(f"{path}:{where} invalid YAML: {problem}") from None
    except RecursionError:
        raise error(f"{path}: invalid YAML: nested too deeply") from None


def describe_validation_error(exc: ValidationError, doc: str = "") -> str:
    """First problem of a pydantic error as 'field.path: message' (plus a count of the others)."""
    errors = exc.errors()
    first = errors[0]
    loc = ".".join(str(part) for part in first["loc"])  # '' for a check of the whole model (no field to name)
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
    return f"{loc}: {message}{more}" if loc else f"{message}{more}"


def validate(model: type[M], data: Any, source: str, error: type[RooflineError], doc: str = "") -> M:
    if not isinstance(data, dict):
        raise error(f"{source}: expected a mapping of keys to values at the top level")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise error(f"{source}: {describe_validation_error(exc, doc)}") from None


# ------------------------------------------------------------------------------------------------ JSON numbers


def null_nonfinite(data: Any, path: str = "") -> tuple[Any, list[str]]:
    """``data`` (parsed JSON) with every NaN and infinity replaced by None, and where each was (JSON paths such as
    ``rows[3].median_s``). Python's json reads NaN, Infinity and 1e400 as floats no JSON reader elsewhere takes;
    readers use this so that such a value is a missing one (a note, never a crash), writers so that they never
    write one. Containers without such values are returned as they are (no copy)."""
    found: list[str] = []
    return _null(data, path, found), found


def _null(value: Any, path: str, found: list[str]) -> Any:
    if isinstance(value, float):
        if value != value or value in (math.inf, -math.inf):
            found.append(path or "(top level)")
            return None
        return value
    if isinstance(value, dict):
        before = len(found)
        items = {key: _null(item, f"{path}.{key}" if path else str(key), found) for key, item in value.items()}
        return items if len(found) > before else value
    if isinstance(value, (list, tuple)):
        before = len(found)
        listed = [_null(item, f"{path}[{index}]", found) for index, item in enumerate(value)]
        return listed if len(found) > before else value
    return value


def dumps_json(data: Any, **kwargs: Any) -> str:
    """``json.dumps`` that never writes NaN or Infinity (which strict JSON readers refuse): they become null."""
    import json

    try:  # NB: almost every document has none: one pass in C, the walk only when json refuses
        return json.dumps(data, allow_nan=False, **kwargs)
    except ValueError:
        return json.dumps(null_nonfinite(data)[0], allow_nan=False, **kwargs)


_EXPONENTS: dict[str, Any] = {}


def may_hold_nonfinite(text: str) -> bool:
    """Whether JSON text may hold a NaN or an infinity (NaN, Infinity, or an exponent of 3+ digits such as 1e400,
    which Python reads as inf): substring scans in C (a 300 MB report in about a second), so a reader walks the
    parsed document (:func:`null_nonfinite`) only when it may."""
    import re

    if "NaN" in text or "Infinity" in text:
        return True
    for letter in ("e", "E"):  # NB: a pattern starting with a literal letter scans fast; a class does not
        if letter == "E" and "E" not in text:
            continue
        pattern = _EXPONENTS.get(letter) or _EXPONENTS.setdefault(letter, re.compile(letter + r"\+?\d{3}"))
        if pattern.search(text):
            return True
    return False

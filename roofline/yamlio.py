"""Reading YAML and JSON input files with one-line errors that name the file and the field."""

from __future__ import annotations

import gc
import math
import re
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from roofline.errors import RooflineError

M = TypeVar("M", bound=BaseModel)


#: The limits of every file we read (docs/cli.md, "Input limits"). A YAML file (spec sheet, suite, model config)
#: is hand-written and small; JSON reports and traces can hold 100,000 rows or events.
MAX_YAML_BYTES = 16 * 2**20
MAX_JSON_BYTES = 4 * 2**30
MAX_DEPTH = 100  # nesting of lists and mappings in a YAML file; JSON: as deep as the parser's stack allows
MAX_YAML_VALUES = 1_000_000  # values in a YAML document with every alias expanded (a "billion laughs" file)


def _size(size: int) -> str:
    return f"{size / 2**30:g} GiB" if size >= 2**30 else f"{size / 2**20:g} MiB"


def read_bytes(path: Path, error: type[RooflineError], what: str = "YAML", limit: int = MAX_YAML_BYTES) -> bytes:
    """The bytes of ``path``, refused (one ``error`` line) when missing, unreadable, a directory, a device or over
    ``limit`` (a file's size checked before reading: a huge file is never read; a pipe is read up to the limit)."""
    try:
        mode = Path(path).stat()
        if stat.S_ISCHR(mode.st_mode) or stat.S_ISBLK(mode.st_mode) or stat.S_ISSOCK(mode.st_mode):
            raise error(f"{path}: a device or socket, not a {what} file: give the file itself")
        if mode.st_size > limit and stat.S_ISREG(mode.st_mode):
            raise error(
                f"{path}: {mode.st_size:,} bytes, over the {_size(limit)} a {what} file may have: give the right file"
            )
        with Path(path).open("rb") as handle:
            if stat.S_ISREG(mode.st_mode):
                return handle.read()
            chunks, total = [], 0  # a pipe: read to its end, up to the limit (NB: read(limit) would allocate it)
            while chunk := handle.read(2**20):
                chunks.append(chunk)
                total += len(chunk)
                if total > limit:
                    raise error(f"{path}: over the {_size(limit)} a {what} file may have: give the right file")
        return b"".join(chunks)
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except IsADirectoryError:
        raise error(f"{path}: is a directory, not a {what} file") from None
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror or exc}") from None


def decode_text(data: bytes, path: object, error: type[RooflineError], what: str = "YAML") -> str:
    """UTF-8 text (a leading byte-order mark dropped); one ``error`` line for a binary or non-UTF-8 file."""
    if b"\x00" in data[:8192]:
        raise error(f"{path}: a binary file, not {what} text: give the {what} file itself")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise error(
            f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line}): save the file as UTF-8"
        ) from None


def read_text(path: Path, error: type[RooflineError], what: str = "YAML", limit: int = MAX_YAML_BYTES) -> str:
    """A UTF-8 text file's text (a leading byte-order mark dropped); one-line errors for a missing, unreadable,
    too large, binary or non-UTF-8 file (say where the first bad byte is and how to fix it)."""
    return decode_text(read_bytes(path, error, what, limit), path, error, what)


def _flow_depth(text: str) -> int:
    """How deep ``[`` and ``{`` nest (quotes not parsed: an upper bound); cheap unless the text holds many."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return 0
    depth = deepest = 0
    for char in text:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_DEPTH:
                break  # enough to refuse: never a walk of all of a large file
        elif char in "]}":
            depth = max(depth - 1, 0)
    return deepest


class _InputProblem(Exception):
    """A problem of the document's structure, found while loading it: ``line`` (1-based, 0: unknown) and text."""

    def __init__(self, line: int, text: str) -> None:
        super().__init__(text)
        self.line = line
        self.text = text


def _check_nodes(root: Any) -> None:
    """Refuse a composed YAML document nested deeper than MAX_DEPTH, holding more than MAX_YAML_VALUES values
    once every alias is expanded (each distinct node is visited once: its expanded size is kept), or an alias
    inside its own anchor."""
    import yaml

    sizes: dict[int, int] = {}
    stack: list[tuple[Any, int, bool]] = [(root, 1, False)]
    open_nodes: set[int] = set()
    while stack:
        node, depth, done = stack.pop()
        key = id(node)
        if done:
            open_nodes.discard(key)
            children = _children(node)
            sizes[key] = 1 + sum(sizes[id(child)] for child in children)
            if sizes[key] > MAX_YAML_VALUES:
                raise _InputProblem(
                    node.start_mark.line + 1,
                    f'its aliases expand to more than {MAX_YAML_VALUES:,} values (a "billion laughs" file): '
                    "write the values out, or use fewer aliases of aliases",
                )
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise _InputProblem(node.start_mark.line + 1, "an alias inside its own anchor: remove the loop")
        if depth > MAX_DEPTH:
            raise _InputProblem(node.start_mark.line + 1, f"nested more than {MAX_DEPTH} levels deep")
        if not isinstance(node, (yaml.SequenceNode, yaml.MappingNode)):
            sizes[key] = 1
            continue
        open_nodes.add(key)
        stack.append((node, depth, True))
        stack.extend((child, depth + 1, False) for child in _children(node))


def _children(node: Any) -> list[Any]:
    import yaml

    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _strict_loader(base: Any) -> Any:
    """``base`` (the safe loader) refusing a key given twice in one mapping (YAML says keys are unique; PyYAML
    keeps the last silently: ``m: 8`` then ``m: 1000000000``)."""
    import yaml

    class StrictLoader(base):  # type: ignore[misc, valid-type]
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                seen: dict[Any, int] = {}
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base`: its keys may be overridden
                        continue
                    key = self.construct_object(key_node, deep=True)
                    line = key_node.start_mark.line + 1
                    try:
                        first = seen.get(key)
                    except TypeError:  # an unhashable key: the base loader says so
                        break
                    if first is not None:
                        raise _InputProblem(line, f"key {key!r} given twice (first on line {first}): keep one")
                    seen[key] = line
            return super().construct_mapping(node, deep=deep)

    # YAML 1.2 floats: PyYAML (YAML 1.1) reads 1e7 and 1e-300 (no dot) as text, which strict validation refuses
    StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))
    return StrictLoader


_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")


_LOADERS: dict[str, Any] = {}


def load_yaml(path: Path, error: type[RooflineError]) -> Any:
    """The YAML document in ``path`` (safe loading: plain data only); every problem is one ``error`` naming
    the file (and the line, for invalid YAML): a file over MAX_YAML_BYTES, nested deeper than MAX_DEPTH, whose
    aliases expand to more than MAX_YAML_VALUES values, or with a key given twice in one mapping."""
    import yaml

    loader_class = _LOADERS.get("strict") or _LOADERS.setdefault(
        "strict", _strict_loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    )
    text = read_text(path, error)
    if _flow_depth(text) > MAX_DEPTH:  # libyaml crashes the process on some 10^5 nested brackets
        raise error(f"{path}: invalid YAML: nested more than {MAX_DEPTH} levels deep")
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_nodes(node)
        return loader.construct_document(node)
    except _InputProblem as exc:
        where = f" line {exc.line}:" if exc.line else ""
        raise error(f"{path}:{where} invalid YAML: {exc.text}") from None
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
    finally:
        loader.dispose()


# ------------------------------------------------------------------------------------------------ JSON


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json's object_pairs_hook: the object as a dict, refusing a key given twice (json keeps the last)."""
    data = dict(pairs)
    if len(data) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return data


#: whether what is made while the collector is paused (:func:`paused_gc`) is kept out of every later collection:
#: set by the CLI's own process (roofline.cli.process.set_entry), never for an in-process caller
_FREEZE = [False]


def freeze_parsed(on: bool) -> None:
    """Whether :func:`paused_gc` ends by freezing the heap (``gc.freeze()``): for a process that keeps what it
    parsed until it ends (the CLI's own)."""
    _FREEZE[0] = on


#: what keep_parsed keeps: a list holding itself (a reference cycle: never freed once frozen) and the documents
_KEPT: list[Any] = []


def keep_parsed(data: Any) -> None:
    """In the CLI's own process (:func:`freeze_parsed`): ``data`` (a parsed document) is never freed by Python: a
    frozen reference cycle holds it, which no collection visits and the interpreter's exit does not free; the
    operating system takes the memory back when the process ends. A 100,000-row report is 10 million objects:
    freeing them one by one took 0.3-0.5 s once the command's work was done. Elsewhere: nothing."""
    if _FREEZE[0]:
        if not _KEPT:
            _KEPT.append(_KEPT)
        _KEPT.append(data)
        gc.freeze()


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic garbage collector off while a large document is parsed: json.loads of a 100,000-row report
    (300 MB) makes millions of containers and none of them garbage, and the collections it triggers took 40% of
    the parse (6.4 s against 3.7 s, benchmarks/report_scale.py). In the CLI's own process (:func:`freeze_parsed`)
    what was made is then frozen (``gc.freeze()``, see roofline.cli.process.freeze_heap): else the first
    collection after it walks every object parsed (0.8 s of a 100,000-row report), and each full one again."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if _FREEZE[0]:
            gc.freeze()
        if enabled:
            gc.enable()


def parse_json(
    text: str | bytes,
    source: object,
    error: type[RooflineError],
    label: str = "not valid JSON",
    fix: str = "fix the file",
    constants: list[str] | None = None,
) -> Any:
    """The JSON document in ``text`` (read from ``source``): by the fast decoder where it decides (orjson, when
    installed: :func:`fast_loads`), else by json's C decoder (one pass, no walk of the result); the same document
    either way. One ``error`` line ``SOURCE: LABEL (WHY): FIX`` for invalid JSON (line and column), a key given
    twice in one object (json would keep the last), or nesting deeper than the decoder's stack (its RecursionError
    is caught here: no roofline file nests more than a few levels). ``constants``: told each NaN, Infinity or
    -Infinity read, and ``OVERFLOW`` once where a number may be too large for a float (an exponent of 3+ digits:
    json reads 1e400 as inf), so that a reader walks the document for non-finite values only when it must."""
    data = fast_loads(text)
    if data is not UNDECIDED:
        return data
    return _parse_stdlib(text, source, error, label, fix, constants)


#: what :func:`parse_json` tells ``constants`` when a number may have overflowed to an infinity (1e400)
OVERFLOW = "1e400"


def _parse_stdlib(
    text: str | bytes,
    source: object,
    error: type[RooflineError],
    label: str,
    fix: str,
    constants: list[str] | None,
) -> Any:
    import json

    def constant(name: str) -> float:
        constants.append(name)  # type: ignore[union-attr]
        return float(name)

    try:
        data = json.loads(
            text, object_pairs_hook=_unique_keys, parse_constant=constant if constants is not None else None
        )
    except _DuplicateKey as exc:
        raise error(f"{source}: {label} (key {exc.key!r} given twice in one object): keep one") from None
    except json.JSONDecodeError as exc:
        raise error(
            f"{source}: {label} (invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}): {fix}"
        ) from None
    except RecursionError:
        raise error(f"{source}: {label} (nested thousands of levels deep): {fix}") from None
    except UnicodeDecodeError:
        raise error(f"{source}: {label} (not UTF-8 text): {fix}") from None
    if constants is not None and has_big_exponent(text):
        constants.append(OVERFLOW)
    return data


def parse_json_bytes(
    data: bytes,
    source: object,
    error: type[RooflineError],
    what: str = "JSON",
    label: str = "not valid JSON",
    fix: str = "fix the file",
    constants: list[str] | None = None,
) -> Any:
    """:func:`parse_json` of a file's bytes: the fast decoder on the bytes themselves where it decides (no text
    decoded), else decode_text (binary, not UTF-8: one ``error`` line) and json's decoder."""
    found = fast_loads(data)
    if found is not UNDECIDED:
        return found
    return _parse_stdlib(decode_text(data, source, error, what), source, error, label, fix, constants)


def load_json(
    path: Path,
    error: type[RooflineError],
    what: str = "JSON",
    limit: int = MAX_JSON_BYTES,
    label: str = "not valid JSON",
    fix: str = "fix the file",
) -> Any:
    """The JSON document in ``path``: read_bytes (missing, unreadable, over ``limit``), decode_text (binary, not
    UTF-8), parse_json (invalid, duplicate keys, too deep): every problem one ``error`` line naming the file."""
    return parse_json_bytes(read_bytes(path, error, what, limit), path, error, what, label, fix)


# ------------------------------------------------------------------------------------------------ fast JSON

#: ``ROOFLINE_JSON=stdlib``: json's decoder and encoder only, even where orjson is installed (the `fast` extra)
JSON_ENV = "ROOFLINE_JSON"


class _Undecided:
    def __repr__(self) -> str:
        return "UNDECIDED"


#: what :func:`fast_loads` answers when json's decoder must read the document
UNDECIDED: Any = _Undecided()
_ORJSON: list[Any] = []


def fast_decoder() -> Any | None:
    """The orjson module when it is installed (``pip install 'roofline[fast]'``) and not turned off
    (``ROOFLINE_JSON=stdlib``); else None."""
    import os

    if os.environ.get(JSON_ENV, "").strip().lower() == "stdlib":
        return None
    if not _ORJSON:
        try:
            import orjson
        except ImportError:
            orjson = None
        _ORJSON.append(orjson)
    return _ORJSON[0]


#: digits and the minus sign as 0, the dot kept, every other byte a space: an integer literal of 19 or more digits
#: (orjson reads one past 64 bits as a float, json keeps it an int) becomes a space and nineteen 0s
_DIGITS = bytes(48 if 48 <= b <= 57 or b == 45 else 46 if b == 46 else 32 for b in range(256))
_LONG_INTEGER = b" " + b"0" * 19
_CHUNK_BYTES = 1 << 24  # the bytes scanned at a time (a copy of each, never of the whole file)
_CHUNK_ITEMS = 4096  # the items of a long list re-encoded at a time


def fast_loads(text: str | bytes) -> Any:
    """The JSON document in ``text`` by orjson, exactly as json's decoder (:func:`parse_json`) reads it, or
    UNDECIDED (orjson not installed or turned off, or a document json must read: then json does, with its
    errors). About twice as fast as json on a 280 MB report; what makes it the same document costs a few passes
    in C over the bytes:

    - orjson refuses what json reads differently: NaN, Infinity, a number past a float (1e400), lone surrogates,
      a byte-order mark, text that is not UTF-8, nesting past 1,024 levels: json decides those;
    - an integer literal past 64 bits (orjson reads it as a float): json decides. Such a float is 2**63 or more,
      which orjson writes with a positive exponent (``1.8446744073709552e19``): only where the encoding made for
      the key count below holds an exponent of 16 or more are the bytes scanned for literals of 19 or more digits
      (a float of 1e16 or more, or text like one, in the document: the scan; else none can be there);
    - a key given twice in one object (orjson keeps the last; parse_json refuses it): each key has one colon
      after it, so the document holds as many colons as orjson's compact encoding of what it read only when no
      key was dropped. (An escaped colon, backslash-u003a, counts in one and not the other: json decides.)"""
    orjson = fast_decoder()
    if orjson is None:
        return UNDECIDED
    if isinstance(text, str):
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: json decides
            return UNDECIDED
    elif isinstance(text, bytes):
        raw = text
    else:
        return UNDECIDED
    try:
        data = orjson.loads(raw)
    except (orjson.JSONDecodeError, RecursionError):
        return UNDECIDED
    if b"\\" in raw and (b"\\u003a" in raw or b"\\u003A" in raw):
        return UNDECIDED
    try:
        exponent = _big_exponent(orjson)
        found = [exponent is None]  # whether orjson's encoding holds a float of 1e16 or more (or text like one)
        if raw.count(b":") != _colons(orjson, data, found=found, exponent=exponent):
            return UNDECIDED  # a key given twice: json names it
    except (TypeError, RecursionError):  # orjson's encoder stops at 255 levels (JSONEncodeError, a TypeError)
        return UNDECIDED
    if found[0] and _long_integer(raw):
        return UNDECIDED
    return data


#: an exponent of 16 or more as orjson writes it: "1.8446744073709552e19" (orjson 3.8), "1.8446744073709552e+19"
#: (3.10 on); in its encoding only a float of 1e16 or more or text has one. NB: not one pattern for both: "e" is in
#: every exponent and key, and the shortest pattern for each scans fastest (0.21-0.26 s of the 279 MB report
#: against 0.42 s for the byte scan); text such as a finding's "1e+03 ns" must not match the second
_BIG_EXPONENTS = (re.compile(rb"e[1-9]"), re.compile(rb"e\+(?:1[6-9]|[2-9][0-9]|[1-3][0-9][0-9])"))
_EXPONENT: list[re.Pattern[bytes] | None] = []


def _big_exponent(orjson: Any) -> re.Pattern[bytes] | None:
    """The pattern of :data:`_BIG_EXPONENTS` that finds how this orjson writes every float of magnitude 2**63 or more
    (tried once on ±2**63, 2**64, 1e300 and the largest float): then an encoding it does not match holds no such
    float, so no integer literal past 64 bits was read as one (the long-integer scan of the bytes is skipped).
    None for an orjson that writes them otherwise: the scan always runs."""
    if not _EXPONENT:
        samples = [orjson.dumps(v) for v in (2.0**63, -(2.0**63), 2.0**64, 1e300, -1.7976931348623157e308)]
        found = (p for p in _BIG_EXPONENTS if all(p.search(text) for text in samples))
        _EXPONENT.append(next(found, None))
    return _EXPONENT[0]


def _long_integer(raw: bytes) -> bool:
    """Whether ``raw`` may hold an integer literal of 19 or more digits (digits inside strings count too)."""
    for start in range(0, len(raw), _CHUNK_BYTES):
        window = raw[max(start - len(_LONG_INTEGER), 0) : start + _CHUNK_BYTES].translate(_DIGITS)
        if _LONG_INTEGER in (b" " + window if start == 0 else window):
            return True
    return False


def _colons(orjson: Any, value: Any, depth: int = 0, found: list[bool] | None = None, exponent: Any = None) -> int:
    """The colons of orjson's compact encoding of ``value``: a key's own and those inside strings. The top levels
    and long lists in parts, so that no copy of the whole document is made. ``found``: its item set True where an
    encoded part matches ``exponent`` (:func:`_big_exponent`; once it is True no part is searched)."""
    if isinstance(value, dict) and depth < 2:
        inside = sum(key.count(":") for key in value)
        return len(value) + inside + sum(_colons(orjson, item, depth + 1, found, exponent) for item in value.values())
    if isinstance(value, list) and len(value) > _CHUNK_ITEMS:
        parts = (orjson.dumps(value[i : i + _CHUNK_ITEMS]) for i in range(0, len(value), _CHUNK_ITEMS))
        return sum(_count(part, found, exponent) for part in parts)
    return _count(orjson.dumps(value), found, exponent)


def _count(encoded: bytes, found: list[bool] | None, exponent: Any) -> int:
    if found is not None and not found[0] and exponent.search(encoded):
        found[0] = True
    return encoded.count(b":")


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
        message += _type_fix(kind, value)
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    return f"{loc}: {message}{more}" if loc else f"{message}{more}"


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _type_fix(kind: str, value: Any) -> str:
    """The fix for a value of the wrong type (strict validation): a number given as true/false or as text."""
    if kind in ("int_type", "float_type", "int_from_float", "int_parsing", "float_parsing"):
        if isinstance(value, bool):
            return ": true/false is not a number: write the number"
        if isinstance(value, str):
            return ": write the number without quotes" if _is_number(value) else ": give a number"
        if kind == "int_from_float" or isinstance(value, float):
            return ": write a whole number"
    if kind in ("bool_type", "bool_parsing") and isinstance(value, (str, int, float)):
        return ": write true or false, without quotes"
    if kind == "string_type" and isinstance(value, (int, float)):
        return ": quote it to make it text"
    return ""


def validate(
    model: type[M], data: Any, source: str, error: type[RooflineError], doc: str = "", strict: bool = True
) -> M:
    """``data`` (a file's document) as ``model``, every field checked up front; pydantic's strict mode by default:
    no bool for a number (``m: true`` is not 1), no string for a number (``"8"``), no number for a string. Every
    problem is one ``error`` line ``SOURCE: field.path: message (got VALUE)``."""
    if not isinstance(data, dict):
        raise error(f"{source}: expected a mapping of keys to values at the top level")
    try:
        return model.model_validate(data, strict=strict)
    except ValidationError as exc:
        raise error(f"{source}: {describe_validation_error(exc, doc)}") from None
    except RecursionError:
        raise error(f"{source}: nested too deeply") from None


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
    """``json.dumps`` that never writes NaN or Infinity (which strict JSON readers refuse): they become null.
    Indented (``indent=N``, with ``default`` or not): the same text by :func:`indented_json` (json's indenting
    encoder is pure Python: 5 s for a 100,000-point baseline)."""
    try:  # NB: almost every document has none: one pass, the walk only when json refuses
        return _dumps(data, kwargs)
    except ValueError:
        return _dumps(null_nonfinite(data)[0], kwargs)


def _dumps(data: Any, kwargs: dict[str, Any]) -> str:
    import json

    indent = kwargs.get("indent")
    if indent is None and kwargs.keys() <= {"default"}:  # one line: json's C encoder, made once per default
        default = kwargs.get("default")
        encoder = _ENCODERS.get(default)
        if encoder is None:
            encoder = _ENCODERS[default] = json.JSONEncoder(allow_nan=False, default=default)
        return encoder.encode(data)  # NB: what json.dumps makes (a new encoder per call: 2 us of a row's export)
    if type(indent) is int and kwargs.keys() <= {"indent", "default"}:
        try:
            return indented_json(data, indent, kwargs.get("default"))
        except _Unsupported:
            pass
    return json.dumps(data, allow_nan=False, **kwargs)


_ENCODERS: dict[Any, Any] = {}


class _Unsupported(Exception):
    """What :func:`indented_json` leaves to json: a key that is not text, a cycle."""


def indented_json(data: Any, indent: int, default: Any = None) -> str:
    """``json.dumps(data, indent=indent, default=default, allow_nan=False)``, the same text, faster: lists of
    numbers or strings are written by one join in C, not item by item. ValueError for NaN or an infinity, as json;
    _Unsupported (json then writes it) for a key that is not a string or a document nested too deeply."""
    import json

    parts: list[str] = []
    try:
        _indent(data, " " * indent, "\n", parts, json.encoder.encode_basestring_ascii, default)
    except RecursionError:
        raise _Unsupported from None
    return "".join(parts)


def _scalar(value: Any, encode: Any) -> str | None:
    """A scalar as json writes it (None: not a scalar)."""
    if isinstance(value, str):
        return encode(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if value != value or value in (math.inf, -math.inf):
            raise ValueError(f"Out of range float values are not JSON compliant: {value!r}")
        return float.__repr__(value)
    return None


def _flat_list(items: list[Any] | tuple[Any, ...], encode: Any) -> list[str] | None:
    """A list of floats, of ints or of strings as json writes each item, in C (None: any other list)."""
    kinds = set(map(type, items))
    if kinds == {float}:
        if not all(map(math.isfinite, items)):
            return None  # NB: the item-by-item path raises json's error
        return list(map(float.__repr__, items))
    if kinds == {int}:
        return list(map(int.__repr__, items))
    if kinds == {str}:
        return list(map(encode, items))
    return None


def _indent(value: Any, step: str, newline: str, parts: list[str], encode: Any, default: Any) -> None:
    """json's indented encoding of ``value`` appended to ``parts`` (``newline``: a newline and the current indent)."""
    kind = type(value)
    if kind is dict:
        _indent_dict(value, step, newline, parts, encode, default)
        return
    text = _scalar(value, encode)
    if text is not None:
        parts.append(text)
        return
    if isinstance(value, (list, tuple)):
        if not value:
            parts.append("[]")
            return
        inner = newline + step
        flat = _flat_list(value, encode)
        if flat is not None:
            parts.append("[" + inner + ("," + inner).join(flat) + newline + "]")
            return
        heads = _same_keys_heads(value, step, inner, encode)
        if heads is not None:
            rows = _rows(value, step, inner, encode)
            if rows is not None:  # NB: a baseline's points, a gate's: written column by column
                parts += ["[" + inner, ("," + inner).join(rows), newline + "]"]  # (not copied again)
                return
        parts.append("[")
        for index, item in enumerate(value):
            parts.append("," + inner if index else inner)
            if heads is None:
                _indent(item, step, inner, parts, encode, default)
            else:
                _indent_dict(item, step, inner, parts, encode, default, heads)
        parts.append(newline + "]")
        return
    if isinstance(value, dict):
        _indent_dict(value, step, newline, parts, encode, default)
        return
    if default is None:
        raise _Unsupported  # json says which type it cannot write
    _indent(default(value), step, newline, parts, encode, default)


def _same_keys_heads(items: list[Any] | tuple[Any, ...], step: str, newline: str, encode: Any) -> list[str] | None:
    """For a list of two or more non-empty dicts of the same text keys in the same order (a baseline's points):
    what _indent_dict writes before each value (the brace or comma, the indent, the key and ': '), made once for
    all of them; else None."""
    if len(items) < 2 or not all(type(item) is dict and item for item in items):
        return None
    keys = list(map(tuple, items))
    if keys.count(keys[0]) != len(keys) or not all(type(key) is str for key in keys[0]):
        return None
    inner = newline + step
    return [("," if index else "{") + inner + encode(key) + ": " for index, key in enumerate(keys[0])]


_SCALAR_TEXT: dict[type, Any] = {
    float: float.__repr__,
    int: int.__repr__,
    type(None): lambda value: "null",
    bool: lambda value: "true" if value else "false",
}
_SCALAR_KINDS = {*_SCALAR_TEXT, str}
_NUMBERS_OR_NULL = {float, int, bool, type(None)}


def _rows(items: list[Any] | tuple[Any, ...], step: str, newline: str, encode: Any) -> list[str] | None:
    """Each of ``items`` (non-empty dicts of the same text keys in the same order) as :func:`_indent_dict` writes it
    at ``newline``, the same text, made column by column: each column's values written by one call mapped in C
    (:func:`_column`), then each item by one %-format of them. None when a column holds a value this does not write
    (a NaN, a type json is not given): the items are then written one by one, as before."""
    keys = list(items[0])
    inner = newline + step
    texts = []
    for key in keys:
        text = _column(list(map(itemgetter(key), items)), step, inner, encode)
        if text is None:
            return None
        texts.append(text)
    pieces: list[Any] = []  # each item: its heads and its values' texts, joined (in C)
    for index, (key, text) in enumerate(zip(keys, texts, strict=True)):
        pieces += [repeat(("," if index else "{") + inner + encode(key) + ": "), text]
    pieces.append(repeat(newline + "}"))
    return list(map("".join, zip(*pieces, strict=False)))  # NB: the repeats are endless


def _column(values: Sequence[Any], step: str, newline: str, encode: Any) -> list[str] | None:
    """The text of each value of one column of :func:`_rows` (each value written at ``newline``), or None."""
    kinds = set(map(type, values))
    if kinds == {str}:
        return list(map(encode, values))
    if kinds == {float}:
        return list(map(float.__repr__, values)) if all(map(math.isfinite, values)) else None
    if kinds <= _NUMBERS_OR_NULL:  # NB: a gate's checks' bounds: null or a number, written in C
        joined = "\0".join(map(repr, values))  # a float's or an int's repr never holds None, True or False
        if "inf" in joined or "nan" in joined:
            return None  # NB: the item-by-item path raises json's error
        return joined.replace("None", "null").replace("True", "true").replace("False", "false").split("\0")
    if kinds <= _SCALAR_KINDS:
        if float in kinds and not all(math.isfinite(value) for value in values if type(value) is float):
            return None
        return [encode(value) if type(value) is str else _SCALAR_TEXT[type(value)](value) for value in values]
    if kinds <= {list, tuple}:
        return _list_column(values, step, newline, encode)
    if kinds == {dict} and all(values) and _same_keys(values):
        return _rows(values, step, newline, encode)
    return None


def _same_keys(items: Sequence[dict[Any, Any]]) -> bool:
    """Whether the dicts ``items`` have the same text keys in the same order (compared in C)."""
    shapes = list(map(tuple, items))
    return shapes.count(shapes[0]) == len(shapes) and all(type(key) is str for key in shapes[0])


def _list_column(values: Sequence[Any], step: str, newline: str, encode: Any) -> list[str] | None:
    """:func:`_column` of lists: lists of numbers or text each joined in C; lists of dicts of the same keys (a gate's
    checks) written together by :func:`_rows`; else None."""
    inner = newline + step
    separator = "," + inner
    items = [item for value in values for item in value]
    if items and all(type(item) is dict for item in items):
        if not items[0] or not _same_keys(items):
            return None
        rows = _rows(items, step, inner, encode)
        if rows is None:
            return None
        texts, start = [], 0
        for value in values:
            end = start + len(value)
            texts.append("[" + inner + separator.join(rows[start:end]) + newline + "]" if value else "[]")
            start = end
        return texts
    texts = []
    for value in values:
        if not value:
            texts.append("[]")
            continue
        flat = _flat_list(value, encode)
        if flat is None:
            return None
        texts.append("[" + inner + separator.join(flat) + newline + "]")
    return texts


def _indent_dict(
    value: dict[Any, Any],
    step: str,
    newline: str,
    parts: list[str],
    encode: Any,
    default: Any,
    heads: list[str] | None = None,
) -> None:
    """json's indented encoding of a dict (``heads``: what goes before each value, from _same_keys_heads)."""
    if not value:
        parts.append("{}")
        return
    inner = newline + step
    append = parts.append
    if heads is None:
        for key in value:
            if type(key) is not str:
                raise _Unsupported
        heads = [("," if index else "{") + inner + encode(key) + ": " for index, key in enumerate(value)]
    for head, item in zip(heads, value.values(), strict=True):
        kind = type(item)
        if kind is float and -math.inf < item < math.inf:
            append(head + float.__repr__(item))
        elif kind is str:
            append(head + encode(item))
        elif kind is int:
            append(head + int.__repr__(item))
        else:
            append(head)
            text = _scalar(item, encode)
            if text is None:
                _indent(item, step, inner, parts, encode, default)
            else:
                append(text)
    append(newline + "}")


_EXPONENTS: dict[str, Any] = {}


def may_hold_nonfinite(text: str) -> bool:
    """Whether JSON text may hold a NaN or an infinity (NaN, Infinity, or an exponent of 3+ digits such as 1e400,
    which Python reads as inf): substring scans in C (a 300 MB report in about a second), so a reader walks the
    parsed document (:func:`null_nonfinite`) only when it may."""
    return "NaN" in text or "Infinity" in text or has_big_exponent(text)


def has_big_exponent(text: str | bytes) -> bool:
    """Whether JSON text (or its bytes) holds an exponent of 3+ digits (1e400: Python reads it as inf)."""
    binary = isinstance(text, bytes)
    for letter in ("e", "E"):  # NB: a pattern starting with a literal letter scans fast; a class does not
        if letter == "E" and (b"E" if binary else "E") not in text:
            continue
        key = letter + ("b" if binary else "")
        pattern = _EXPONENTS.get(key)
        if pattern is None:
            source = letter + r"\+?\d{3}"
            pattern = _EXPONENTS.setdefault(key, re.compile(source.encode() if binary else source))
        if pattern.search(text):  # type: ignore[arg-type]
            return True
    return False

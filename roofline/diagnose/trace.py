"""Profiler traces in and out: `roofline diagnose --trace TRACE.json[.gz]` and `--export-trace FILE.json`.

In: a Kineto trace (torch.profiler's ``export_chrome_trace``) recorded with ``record_shapes=True``. Every op the
counting pass would record -- the outermost aten op that the dispatcher does not decompose
(CompositeImplicitAutograd ops such as ``aten::linear`` are decomposed; the counting pass sees ``aten::t`` and
``aten::addmm``) -- is rebuilt from its recorded "Input Dims", "Input type", "Input Strides" and "Concrete Inputs"
as meta tensors and scalars, run on the meta device (shapes only) and costed by the same registry as a live run
(:func:`roofline.costs.aten.op_cost`). Times come from the trace itself: its events become the event dicts of
:mod:`roofline.diagnose.join` (CPU ops, GPU kernels linked to the op that launched them by "External id", launch
calls by "correlation"), joined exactly as a live profile is. A trace of several steps is split by the
profiler's ``ProfilerStep#N`` markers (else roofline's own iteration markers); the median step by duration is
diagnosed. An op whose shapes or arguments the trace lacks is kept, uncounted, with its time.

Out: :func:`annotate` copies a trace and writes into each matched op's and kernel's ``args`` a ``roofline`` object
with the stored values of its placed row (op, FLOPs, bytes, intensity, bound, efficiency): Perfetto and
chrome://tracing show them when the event is selected.

torch is imported inside the functions that need it.
"""

from __future__ import annotations

import ast
import gzip
import io
import json
import re
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from roofline.costs.aten import NO_FORMULA, OpCost
from roofline.diagnose.join import SAME_CALL
from roofline.errors import WorkloadError
from roofline.report.outputs import TRACE_SCHEMA
from roofline.report.records import OpRecord
from roofline.samples import median
from roofline.yamlio import MAX_JSON_BYTES, parse_json, read_bytes

STEP_MARKER = re.compile(r"^ProfilerStep#(\d+)$")
ITERATION_MARKER = "roofline::iteration"  # roofline.diagnose.profile.MARKER (a live run's exported trace)
NO_SHAPES = "the trace has no shapes for this op (record it with record_shapes=True)"
LONG_LIST = (
    "the trace has no shapes for this op's tensor list (torch.profiler leaves out lists of more than 30 tensors)"
)
RECORD_HINT = (
    "record it with torch.profiler.profile(activities=..., record_shapes=True) and prof.export_chrome_trace(PATH)"
)

_OP_CATS = frozenset({"cpu_op", "operator"})
_KERNEL_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
_RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "runtime", "driver"})
_ENGINE = "autograd::engine::evaluate_function: "
_BACKWARD = re.compile(r"^(?:autograd::engine::evaluate_function: .*|\w+Backward\d*)$")

#: the profiler's "Input type" of a tensor argument (C++ type names) -> torch dtype attribute
_TYPE_DTYPES = {
    "float": "float32",
    "double": "float64",
    "c10::Half": "float16",
    "c10::BFloat16": "bfloat16",
    "long int": "int64",
    "long long int": "int64",
    "long": "int64",
    "int": "int32",
    "short int": "int16",
    "short": "int16",
    "signed char": "int8",
    "unsigned char": "uint8",
    "bool": "bool",
    "c10::complex<float>": "complex64",
    "c10::complex<double>": "complex128",
    "c10::Float8_e4m3fn": "float8_e4m3fn",
    "c10::Float8_e5m2": "float8_e5m2",
    "c10::Float8_e4m3fnuz": "float8_e4m3fnuz",
    "c10::Float8_e5m2fnuz": "float8_e5m2fnuz",
}
#: c10::ScalarType's numbering (a dtype argument's "Concrete Inputs" value) -> torch dtype attribute
_SCALAR_TYPES = {
    0: "uint8",
    1: "int8",
    2: "int16",
    3: "int32",
    4: "int64",
    5: "float16",
    6: "float32",
    7: "float64",
    9: "complex64",
    10: "complex128",
    11: "bool",
    15: "bfloat16",
    23: "float8_e5m2",
    24: "float8_e4m3fn",
}
_MEMORY_FORMATS = {0: "contiguous_format", 1: "preserve_format", 2: "channels_last", 3: "channels_last_3d"}
_WRAPPED = {"long int": 1, "long long int": 1, "double": 1.0, "bool": True}  # a wrapped Python number's stand-in
_NON_TENSOR = frozenset({"", "Scalar", "ScalarList", "GenericList", "None", "String", "Device", "Layout"})


# ------------------------------------------------------------------------------------------------ reading


def read_trace(path: Path, option: str = "--trace") -> dict[str, Any]:
    """A trace file (JSON, or gzip-compressed JSON: told by its first bytes, whatever its name) as a dict with a
    ``traceEvents`` list. WorkloadError (exit 2), one line naming the fix, for a missing or unreadable file, a
    truncated .gz, text that is not JSON, or JSON that is not a Chrome trace."""
    shown = f"{option} {path}"
    if not Path(path).exists() and not Path(path).is_symlink():
        raise WorkloadError(f"{shown}: no such file: give the path of the trace torch.profiler exported")
    raw = read_bytes(Path(path), WorkloadError, "trace", MAX_JSON_BYTES)
    if raw[:2] == b"\x1f\x8b":
        try:
            chunks, total = [], 0
            with gzip.GzipFile(fileobj=io.BytesIO(raw)) as unzipped:
                while chunk := unzipped.read(2**24):  # a gzip bomb stops at the limit
                    chunks.append(chunk)
                    total += len(chunk)
                    if total > MAX_JSON_BYTES:
                        raise WorkloadError(
                            f"{shown}: over {MAX_JSON_BYTES:,} bytes once unzipped: give the right file"
                        )
            raw = b"".join(chunks)
        except (EOFError, OSError, zlib.error) as exc:
            raise WorkloadError(
                f"{shown}: the gzip file is truncated or corrupt ({type(exc).__name__}): copy or export it again "
                "(gzip -t checks one)"
            ) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise WorkloadError(
            f"{shown}: not a JSON trace (not UTF-8 text): give the .json or .json.gz file that torch.profiler's "
            "export_chrome_trace wrote"
        ) from None
    del raw
    data = parse_json(
        text,
        shown,
        WorkloadError,
        "not JSON",
        "give the .json or .json.gz file that torch.profiler's export_chrome_trace wrote (a truncated file: "
        "export it again)",
    )
    if isinstance(data, list):  # the Chrome trace's array form
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise WorkloadError(
            f"{shown}: JSON, but not a Chrome trace (no traceEvents list): give the file torch.profiler's "
            "export_chrome_trace wrote"
        )
    return data


# ------------------------------------------------------------------------------------------------ steps


@dataclass
class TraceRun:
    """One step of a trace, ready for the join: records rebuilt from its shapes and the join's event dicts."""

    records: list[OpRecord]
    events: list[dict[str, Any]]  # roofline.diagnose.join's event dicts: one iteration marker, ops, kernels, launches
    device: str  # 'cuda' | 'cpu'
    gpu_names: list[str]  # the trace's deviceProperties names (a GPU trace)
    step: str  # the step diagnosed ('ProfilerStep#7'; '' when the trace has no step markers)
    steps: int  # steps in the trace (1 without markers)
    wall_s: float  # the step's duration (its marker, to the end of its last kernel)
    notes: list[str] = field(default_factory=list)


def _events(trace: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [e for e in trace.get("traceEvents") or [] if isinstance(e, dict) and e.get("ph") == "X"]


def _cat(event: Mapping[str, Any]) -> str:
    return str(event.get("cat", "")).lower()


def _args(event: Mapping[str, Any]) -> dict[str, Any]:
    args = event.get("args")
    return args if isinstance(args, dict) else {}


def _number(value: Any, default: float = 0.0) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def _span(event: Mapping[str, Any]) -> tuple[float, float]:
    start = _number(event.get("ts"))
    return start, start + max(_number(event.get("dur")), 0.0)


def check_kineto(trace: Mapping[str, Any], shown: str) -> None:
    """WorkloadError unless ``trace`` is a torch.profiler trace with shapes (one line naming the fix)."""
    events = _events(trace)
    ops = [e for e in events if _cat(e) in _OP_CATS]
    if not ops:
        cats = sorted({_cat(e) for e in events if _cat(e)})[:4]
        seen = f" (its events: {', '.join(cats)})" if cats else ""
        raise WorkloadError(
            f"{shown}: not a torch.profiler (Kineto) trace: it has no cpu_op events{seen}: {RECORD_HINT}"
        )
    if not any("Input Dims" in _args(e) for e in ops):
        raise WorkloadError(f"{shown}: the trace was recorded without shapes: {RECORD_HINT}")


def split_steps(events: Sequence[Mapping[str, Any]]) -> tuple[list[tuple[str, float, float]], str]:
    """The step markers (name, start, end) in time order: ``ProfilerStep#N`` (torch.profiler's schedule / step()),
    else roofline's own ``roofline::iteration`` markers; [] without either. And which kind ('' none).

    Only the host's markers: on a GPU, Kineto also writes each marker's projection onto the GPU timeline (an event
    of the same name, category ``gpu_user_annotation``, from the step's first kernel to its last), which is not a
    step: the ops inside its window are those the host happened to be running while the GPU worked."""
    host = [e for e in events if is_host_marker(e)]
    steps = [e for e in host if STEP_MARKER.match(str(e.get("name", "")))]
    kind = "ProfilerStep"
    if not steps:
        steps = [e for e in host if e.get("name") == ITERATION_MARKER]
        kind = ITERATION_MARKER if steps else ""
    marked = sorted((str(e.get("name")), *_span(e)) for e in steps)
    return sorted(marked, key=lambda s: s[1]), kind


def is_host_marker(event: Mapping[str, Any]) -> bool:
    """Whether an event can be a host-side step marker: not a GPU event (a ``gpu_user_annotation``, the marker's
    projection on a GPU stream, nor a kernel, memcpy or memset)."""
    cat = _cat(event)
    return not cat.startswith("gpu_") and cat not in _KERNEL_CATS


def _thread_ids(events: Iterable[Mapping[str, Any]]) -> dict[Any, int]:
    ids: dict[Any, int] = {}
    for e in events:
        tid = (e.get("pid"), e.get("tid"))
        if tid not in ids:
            raw = e.get("tid")
            ids[tid] = raw if isinstance(raw, int) and raw not in ids.values() else len(ids) + 1_000_000
    return ids


def load_trace(trace: Mapping[str, Any], shown: str = "--trace") -> TraceRun:
    """A Kineto trace -> the median step's records (rebuilt from shapes) and event dicts. Needs torch (meta
    tensors). WorkloadError when it is not a Kineto trace or has no shapes."""
    check_kineto(trace, shown)
    from roofline.diagnose.join import parse_events
    from roofline.diagnose.profile import facts_from_trace

    events = _events(trace)
    threads = _thread_ids(events)
    ops = [e for e in events if _cat(e) in _OP_CATS]
    kernels = [e for e in events if _cat(e) in _KERNEL_CATS]
    launches = [e for e in events if _cat(e) in _RUNTIME_CATS and "correlation" in _args(e)]
    steps, kind = split_steps(events)
    notes: list[str] = []

    def in_step(step: tuple[str, float, float]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], float]:
        _, start, end = step
        inside = [e for e in ops if start <= _number(e.get("ts")) <= end and not STEP_MARKER.match(str(e["name"]))]
        ids = {_args(e).get("External id") for e in inside} - {None}
        own = [k for k in kernels if _args(k).get("External id") in ids]
        last = max([end, *(_span(k)[1] for k in own)])
        return inside, own, last - start

    if steps:
        spans = [(step, *in_step(step)) for step in steps]
        by_length = sorted(range(len(spans)), key=lambda i: (spans[i][3], i))
        chosen = spans[by_length[(len(spans) - 1) // 2]]
        (name, start, _), step_ops, step_kernels, wall_us = chosen
        if len(spans) > 1:
            lengths = [s[3] for s in spans]
            notes.append(
                f"the trace holds {len(spans)} steps ({kind} markers, {median(lengths):.0f} us median): "
                f"{name}, the median step by duration, is diagnosed"
            )
    else:
        name, step_ops, step_kernels = "", [e for e in ops if not STEP_MARKER.match(str(e["name"]))], kernels
        spans_all = [_span(e) for e in [*step_ops, *step_kernels]]
        start = min(s for s, _ in spans_all)
        wall_us = max(e for _, e in spans_all) - start
        notes.append("the trace has no step markers (ProfilerStep#N): its whole span is diagnosed as one iteration")
    device = "cuda" if kernels else "cpu"
    facts = facts_from_trace(trace) if device == "cuda" else {}
    kernel_corr = {_args(k).get("correlation") for k in step_kernels}
    dicts: list[dict[str, Any]] = [{"kind": "iteration", "start_us": start, "end_us": start + wall_us}]
    raw_args: dict[int, dict[str, Any]] = {}
    synthetic = -1
    from roofline.diagnose.profile import tensor_shapes

    for e in step_ops:
        op_id = _args(e).get("External id")
        if not isinstance(op_id, int) or op_id in raw_args:
            op_id, synthetic = synthetic, synthetic - 1  # an op without an id of its own: one the join never links
        args = _args(e)
        raw_args[op_id] = args
        begin, end = _span(e)
        dicts.append(
            {
                "kind": "op",
                "id": op_id,
                "name": str(e.get("name", "")),
                "start_us": begin,
                "end_us": end,
                "thread": threads[(e.get("pid"), e.get("tid"))],
                "iteration": 0,
                "input_shapes": tensor_shapes(args.get("Input Dims"), args.get("Input type")),
            }
        )
    for k in step_kernels:
        args = _args(k)
        begin, end = _span(k)
        correlation = args.get("correlation")
        dicts.append(
            {
                "kind": "kernel",
                "name": str(k.get("name", "")),
                "start_us": begin,
                "end_us": end,
                "stream": int(_number(args.get("stream"), 0)),
                "external_id": args.get("External id"),
                "correlation": correlation,
                **(facts.get(int(correlation), {}) if isinstance(correlation, int) else {}),
            }
        )
    for launch in launches:
        args = _args(launch)
        if args.get("correlation") in kernel_corr:
            begin, end = _span(launch)
            dicts.append(
                {
                    "kind": "launch",
                    "name": str(launch.get("name", "")),
                    "start_us": begin,
                    "end_us": end,
                    "thread": threads[(launch.get("pid"), launch.get("tid"))],
                    "correlation": int(args["correlation"]),
                }
            )
    parsed = parse_events(dicts)
    records, record_ids = _records(parsed.ops, raw_args)
    shapes = {op_id: r.input_shapes for op_id, r in zip(record_ids, records, strict=True)}
    for event in dicts:  # the join matches by (op, tensor input shapes): the shapes as the records hold them
        if event["kind"] == "op" and event["id"] in shapes:
            event["input_shapes"] = [list(s) for s in shapes[event["id"]]]
    missing = sum(1 for r in records if r.note in (NO_SHAPES, LONG_LIST))
    if missing:
        notes.append(f"{missing} ops in the step have no shapes in the trace: listed as uncounted, with their time")
    gpu_names = [str(d.get("name")) for d in trace.get("deviceProperties") or [] if isinstance(d, dict)]
    return TraceRun(records, dicts, device, gpu_names, name, max(len(steps), 1), wall_us * 1e-6, notes)


# ------------------------------------------------------------------------------------------------ records


def _records(ops: Sequence[Any], raw_args: Mapping[int, Mapping[str, Any]]) -> tuple[list[OpRecord], list[int]]:
    """The ops the counting pass would record (the outermost ops the dispatcher does not decompose), in start
    order, each rebuilt from its recorded arguments; and their ids."""
    by_id = {op.id: op for op in ops}
    inside: dict[int, bool] = {}  # op id -> it or an op above it is a record
    backward: dict[int, bool] = {}
    records: list[OpRecord] = []
    ids: list[int] = []
    cache: dict[str, Any] = {}
    for op in ops:  # start order: parents first
        parent = op.parent if op.parent in by_id else None
        above = inside.get(parent, False) if parent is not None else False
        in_backward = (backward.get(parent, False) if parent is not None else False) or bool(_BACKWARD.match(op.name))
        backward[op.id] = in_backward
        record = not above and is_counted_op(op.name)
        inside[op.id] = above or record
        if record:
            ids.append(op.id)
            phase = "backward" if in_backward else "forward"
            rebuilt = rebuild(len(records), op.name, raw_args.get(op.id, {}), phase, cache)
            spelled = counted_name(op.name, by_id[parent].name if parent is not None else "")
            records.append(rebuilt if spelled == op.name else replace(rebuilt, op=spelled))
    return records, ids


def counted_name(name: str, parent: str) -> str:
    """The name the counting pass (a TorchDispatchMode) gives the call the profiler recorded as ``name`` under
    ``parent``, so that a trace's rows read as a live run's: aten::_reshape_alias is aten::view (reshape takes
    view when a Python dispatch key is set), and the autograd engine's accumulation of two gradients
    (an aten::add_ right under ``autograd::engine::evaluate_function: ...``) is aten::add (out of place under a
    dispatch mode). Each costs the same under either name."""
    if name == "aten::add_" and parent.startswith(_ENGINE):
        return "aten::add"
    return SAME_CALL.get(name, name)


_DECOMPOSED: dict[str, bool] = {}


def _packet(name: str) -> Any:
    """torch.ops.NS.OP for 'NS::OP' (None when torch has no such op)."""
    import torch

    namespace, _, op = name.partition("::")
    if not namespace or not op or "::" in op or " " in name or not op.isidentifier():
        return None
    try:
        return getattr(getattr(torch.ops, namespace), op)
    except (AttributeError, RuntimeError):
        return None


def is_counted_op(name: str) -> bool:
    """Whether the counting pass (a TorchDispatchMode) sees ``name`` itself: an op torch knows that the dispatcher
    does not decompose (a CompositeImplicitAutograd op with no kernel of its own, such as aten::linear, is only
    seen through the ops it calls)."""
    if name in _DECOMPOSED:
        return not _DECOMPOSED[name]
    packet = _packet(name)
    decomposed = True  # not an op torch knows (autograd nodes, annotations): never a record
    if packet is not None:
        import torch

        has = torch._C._dispatch_has_kernel_for_dispatch_key
        keys = ("CPU", "CUDA", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")
        implicit_only = []
        for overload in packet.overloads():
            full = f"{name}.{overload}" if overload != "default" else name
            if any(arg.is_out for arg in getattr(packet, overload)._schema.arguments):
                continue  # NB: out= overloads have kernels of their own even where the op is composite (linear.out)
            try:
                implicit_only.append(has(full, "CompositeImplicitAutograd") and not any(has(full, k) for k in keys))
            except RuntimeError:
                continue
        # NB: decomposed when every overload is (aten::linear, aten::to); an op with an overload of its own
        # (aten::empty.memory_format beside the composite aten::empty.names) is seen by the counting pass
        decomposed = bool(implicit_only) and all(implicit_only)
    _DECOMPOSED[name] = decomposed
    return not decomposed


class _Missing(Exception):
    """An argument the trace does not give."""


def _dtype(torch: Any, name: str) -> Any:
    attr = _TYPE_DTYPES.get(name)
    if attr is None or not hasattr(torch, attr):
        raise _Missing(f"tensor type {name!r} unknown")
    return getattr(torch, attr)


def _meta_tensor(torch: Any, dims: Any, strides: Any, dtype: Any) -> Any:
    shape = [int(d) for d in dims]
    if isinstance(strides, list) and len(strides) == len(shape) and all(isinstance(s, int) for s in strides):
        return torch.empty_strided(shape, [int(s) for s in strides], dtype=dtype, device="meta")
    return torch.empty(shape, dtype=dtype, device="meta")


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _value(torch: Any, arg: Any, kind: str, text: Any) -> Any:
    """One non-tensor argument from its "Concrete Inputs" text (the schema says what it is)."""
    real = str(getattr(arg, "real_type", arg.type))
    optional = real.startswith("Optional[")
    if "Device" in real:
        return "meta"  # NB: shapes only: every tensor is rebuilt on the meta device
    if "Generator" in real:
        return None
    if real.removeprefix("Optional[").startswith("bool") and arg.name == "pin_memory":
        return False if not optional else None
    if text in (None, ""):
        if arg.has_default_value():
            return arg.default_value
        if optional:
            return None
        raise _Missing(f"the trace has no value for argument {arg.name!r}")
    value = _literal(str(text))
    if "ScalarType" in real:
        attr = _SCALAR_TYPES.get(int(value)) if isinstance(value, int) else None
        if attr is None:
            raise _Missing(f"dtype number {value!r} unknown")
        return getattr(torch, attr)
    if "Layout" in real:
        return torch.strided
    if "MemoryFormat" in real:
        attr = _MEMORY_FORMATS.get(int(value)) if isinstance(value, int) else None
        return getattr(torch, attr) if attr else None
    if real.removeprefix("Optional[").startswith("str"):
        return str(text)
    if real.removeprefix("Optional[").startswith("float") and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _compatible(arg: Any, kind: str) -> bool:
    """Whether a profiler argument of type ``kind`` can fill schema argument ``arg``."""
    real = str(getattr(arg, "real_type", arg.type))
    tensor_list = "List[Tensor]" in real or "List[Optional[Tensor]]" in real
    if kind == "TensorList":
        return tensor_list
    if kind == "GenericList":
        return "List[Optional[Tensor]]" in real
    if real in ("Tensor", "Optional[Tensor]"):
        return kind not in _NON_TENSOR or (kind == "" and real.startswith("Optional"))
    if tensor_list:
        return kind == ""
    return kind in _NON_TENSOR


def _beside(tensors: Sequence[tuple[str, Any]], kind: str) -> bool:
    return any(d != [] or k != kind for k, d in tensors)


def _bind(torch: Any, schema: Any, dims: list[Any], types: list[Any], strides: list[Any], concrete: list[Any]) -> Any:
    """(positional args, kwargs) of one overload rebuilt from the recorded arguments; _Missing when they do not
    fit its schema."""
    arguments = list(schema.arguments)
    if len(arguments) != len(types):
        raise _Missing("argument count")
    if not all(_compatible(arg, str(kind)) for arg, kind in zip(arguments, types, strict=True)):
        raise _Missing("argument types")
    first_dtype = next((_dtype(torch, str(k)) for k in types if str(k) in _TYPE_DTYPES), torch.float32)
    tensors = [(str(k), d) for k, d in zip(types, dims, strict=True) if str(k) in _TYPE_DTYPES]
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for i, (arg, kind) in enumerate(zip(arguments, types, strict=True)):
        kind = str(kind)
        stride = strides[i] if i < len(strides) else None
        if kind == "TensorList" or (kind == "GenericList" and isinstance(dims[i], list)):
            stride_list = stride if isinstance(stride, list) else []
            value: Any = [
                _meta_tensor(torch, d, stride_list[j] if j < len(stride_list) else None, first_dtype)
                for j, d in enumerate(dims[i] or [])
            ]
        elif kind in _WRAPPED and dims[i] == [] and i > 0 and _beside(tensors, kind):
            # NB: a Python number in a tensor op (x * 2) reaches the profiler as a 0-dim int64/float64 tensor and
            # the counting pass as a number: a 0-dim int64, float64 or bool after a sized tensor or one of another
            # dtype is taken for one
            value = _WRAPPED[kind]
        elif kind not in _NON_TENSOR:
            value = _meta_tensor(torch, dims[i] or [], stride, _dtype(torch, kind))
        elif kind == "" and "Tensor" in str(arg.type):
            value = None
        else:
            value = _value(torch, arg, kind, concrete[i] if i < len(concrete) else None)
        if arg.kwarg_only:
            kwargs[arg.name] = value
        else:
            args.append(value)
    return args, kwargs


def _rebuild_call(name: str, args: Mapping[str, Any]) -> tuple[Any, list[Any], dict[str, Any], Any]:
    """(OpOverload, args, kwargs, out) of a recorded call, run on meta tensors; _Missing when it cannot be."""
    import torch

    dims, types = args.get("Input Dims"), args.get("Input type")
    if not isinstance(dims, list) or not isinstance(types, list) or len(dims) != len(types):
        raise _Missing(NO_SHAPES)
    strides = args.get("Input Strides") if isinstance(args.get("Input Strides"), list) else []
    concrete = args.get("Concrete Inputs") if isinstance(args.get("Concrete Inputs"), list) else []
    if any(str(k) == "TensorList" and d == [] for k, d in zip(types, dims, strict=True)):
        raise _Missing(LONG_LIST)  # NB: an empty list could not be costed either (stack, cat: non-empty)
    packet = _packet(name)
    if packet is None:
        raise _Missing(f"torch has no op {name}")
    why = "no overload of it fits the recorded arguments"
    overloads = sorted(packet.overloads(), key=lambda o: (o != "default", o))
    for overload in overloads:
        func = getattr(packet, overload)
        try:
            call_args, call_kwargs = _bind(torch, func._schema, dims, types, strides, concrete)
        except _Missing as exc:
            if str(exc) not in ("argument count", "argument types"):
                why = str(exc)
            continue
        except (TypeError, ValueError, RuntimeError) as exc:
            why = f"{type(exc).__name__}: {exc}"
            continue
        try:
            out = func(*call_args, **call_kwargs)
        except Exception as exc:  # NB: no meta kernel, a data-dependent shape: reported, never fatal
            why = f"it does not run on meta tensors ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
            continue
        return func, call_args, call_kwargs, out
    raise _Missing(why)


def rebuild(
    index: int, name: str, args: Mapping[str, Any], phase: str, cache: dict[str, Any] | None = None
) -> OpRecord:
    """The OpRecord of one recorded op call: its cost from the registry (the call rebuilt on meta tensors), or
    uncounted (flops and bytes None) with the reason in its note."""
    from roofline.diagnose.profile import tensor_shapes

    key = json.dumps([name, args.get("Input Dims"), args.get("Input type"), args.get("Input Strides"),
                      args.get("Concrete Inputs")], default=str)  # fmt: skip
    if cache is not None and key in cache:
        return OpRecord(index=index, phase=phase, **cache[key])  # type: ignore[arg-type]
    fields = _rebuilt_fields(name, args)
    if "input_shapes" not in fields:
        types = args.get("Input type") if isinstance(args.get("Input type"), list) else []
        fields["input_shapes"] = tuple(tuple(s) for s in tensor_shapes(args.get("Input Dims"), types))
        fields["input_dtypes"] = tuple(_dtype_name(str(k)) for k in types if str(k) not in _NON_TENSOR | {"TensorList"})
    if cache is not None:
        cache[key] = fields
    return OpRecord(index=index, phase=phase, **fields)  # type: ignore[arg-type]


def _dtype_name(kind: str) -> str:
    from roofline.costs.aten import dtype_name

    attr = _TYPE_DTYPES.get(kind)
    return dtype_name(attr) if attr else ""


def _rebuilt_fields(name: str, args: Mapping[str, Any]) -> dict[str, Any]:
    from roofline.costs.aten import dtype_name, is_strided, op_cost
    from roofline.diagnose.count import tensor_inputs, tensor_layout, tensor_shape, tensors_in

    base = {"op": name, "module": "", "module_type": "", "output_shapes": (), "non_contiguous": False}
    try:
        func, call_args, call_kwargs, out = _rebuild_call(name, args)
    except _Missing as exc:
        note = str(exc) if str(exc) in (NO_SHAPES, LONG_LIST) else f"{NO_FORMULA}: {exc}"
        return {**base, "flops": None, "bytes": None, "dtype": "", "math": "vector", "note": note}
    try:
        cost = op_cost(func, tuple(call_args), call_kwargs, out)
    except Exception as exc:  # NB: as the counting pass: a formula's failure is reported, never fatal
        cost = OpCost(None, None, "", "vector", f"{NO_FORMULA}: {type(exc).__name__}: {exc}")
    inputs = tensor_inputs(func, call_args, call_kwargs)
    return {
        **base,
        "input_shapes": tuple(tensor_shape(t) for t in inputs),
        "input_dtypes": tuple(dtype_name(t.dtype) for t in inputs),
        "output_shapes": tuple(tensor_shape(t) for t in tensors_in(out)),
        "flops": cost.flops,
        "bytes": cost.bytes,
        "dtype": cost.dtype,
        "math": cost.math,
        "non_contiguous": any(is_strided(t, cost.math) for t in inputs),
        "note": cost.note,
        "input_layouts": tuple(tensor_layout(t) for t in inputs),
    }


# ------------------------------------------------------------------------------------------------ out


def point_args(point: Any) -> dict[str, Any]:
    """What an annotated event carries: the stored values of its op's placed row (never recomputed)."""
    return {
        "op": point.op,
        "index": point.index,
        "module": point.module,
        "flops": point.flops,
        "bytes": point.bytes,
        "intensity_flop_per_byte": point.intensity,
        "bound": point.bound,
        "limiter": point.limiter,
        "efficiency": point.efficiency,
        "roof": point.roof,
        "time_s": point.time_s,
    }


def annotate(
    trace: Mapping[str, Any],
    matched_ops: Mapping[int, int],
    op_owners: Mapping[int, int],
    points: Sequence[Any],
    about: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A copy of ``trace`` (a Chrome trace) with ``args.roofline`` on each op the join matched to a placed row
    (``matched_ops``: its External id -> the row's index) and on each kernel an op of that row launched
    (``op_owners``: External id -> index). Pure: the values are the rows' stored ones. The result begins with
    ``"schema": TRACE_SCHEMA``; ``about`` goes under a top-level ``roofline`` key (Perfetto and chrome://tracing
    ignore it)."""
    by_index = {p.index: point_args(p) for p in points}
    events = []
    for event in trace.get("traceEvents") or []:
        if isinstance(event, dict) and event.get("ph") == "X":
            external = _args(event).get("External id")
            cat = _cat(event)
            index = None
            if cat in _OP_CATS:
                index = matched_ops.get(external) if isinstance(external, int) else None
            elif cat in _KERNEL_CATS:
                index = op_owners.get(external) if isinstance(external, int) else None
            if index is not None and index in by_index:
                event = {**event, "args": {**_args(event), "roofline": by_index[index]}}
        events.append(event)
    rest = {k: v for k, v in trace.items() if k not in ("schema", "traceEvents", "roofline")}
    return {"schema": TRACE_SCHEMA, **rest, "roofline": dict(about or {}), "traceEvents": events}


def trace_json(trace: Mapping[str, Any]) -> str:
    """The trace as JSON text (non-finite numbers as null: Perfetto's parser rejects NaN)."""
    return json.dumps(_finite(trace), separators=(",", ":"))


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


__all__ = [
    "TRACE_SCHEMA",
    "TraceRun",
    "annotate",
    "check_kineto",
    "is_counted_op",
    "load_trace",
    "point_args",
    "read_trace",
    "rebuild",
    "split_steps",
    "trace_json",
]

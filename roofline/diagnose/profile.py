"""The torch half of the timing pass: run the model under torch.profiler (no dispatch mode of ours), turn what it
saw into the event dicts of :mod:`roofline.diagnose.join`, and join them to the counted ops.

:func:`torch_profile` runs the iterations under ``torch.profiler.profile`` and converts its FunctionEvent list into
event dicts (:func:`events_from_profiler`); :func:`time_model` drives it all: warm-up, an uninstrumented timed
run, the profiled run, and :func:`roofline.diagnose.join.join`. torch is imported inside the functions that use it.
"""

from __future__ import annotations

import contextlib
import re
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from roofline.costs.aten.custom import HIGHER_ORDER, TRITON, hop_record_name
from roofline.diagnose.join import NO_FACTS, join, parse_events
from roofline.errors import DeviceError, RooflineError, UsageError, UserCodeError, WorkloadError, is_out_of_memory
from roofline.report.records import OpRecord, Timing

MARKER = "roofline::iteration"  # record_function name around each timed iteration
NO_FACTS_PREFIX = "no kernel launch facts"  # how the notes on missing launch facts begin

# profile(step, iters, device) -> (event dicts, seconds the `iters` iterations took end to end)
ProfileFn = Callable[[Callable[[], object], int, str], tuple[list[dict[str, Any]], float]]

# Profiler "dtype" strings of arguments that are not tensors ('' = None, a string, a device...).
NON_TENSOR_DTYPES = frozenset({"", "Scalar", "ScalarList", "TensorList", "GenericList", "None", "String"})


# ------------------------------------------------------------------------------------------------ torch


def tensor_shapes(shapes: Any, dtypes: Any) -> list[list[int]]:
    """Shapes of the tensor arguments among the profiler's per-argument shapes (scalars, None and strings
    dropped by their dtype string; TensorLists flattened)."""
    out: list[list[int]] = []
    if not shapes:
        return out
    typed = len(dtypes) if dtypes else 0
    for position, shape in enumerate(shapes):
        dtype = dtypes[position] if position < typed else None
        if shape and isinstance(shape[0], (list, tuple)):  # a TensorList: one shape per tensor
            out += [list(s) for s in shape]
        elif dtype is None:
            if shape:
                out.append(list(shape))
        elif dtype not in NON_TENSOR_DTYPES:
            out.append(list(shape))
    return out


_KERNEL_ACTIVITIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "concurrent_kernel"})
_RUNTIME_ACTIVITIES = frozenset(
    {"cuda_runtime", "cuda_driver", "privateuse1_runtime", "privateuse1_driver", "mtia_runtime", "xpu_runtime"}
)
_RUNTIME_NAME = re.compile(r"^(cuda|cu|hip)[A-Z]")  # cudaLaunchKernel, cuLaunchKernel, hipLaunchKernel...
#: the record_function markers of higher-order op calls (:func:`hop_markers`): ops of the profile, not annotations
MARKED_OPS = (HIGHER_ORDER, TRITON)
_AUTOGRAD_NODE = re.compile(r"^\w+Backward\d*$")  # AddmmBackward0


def _classify(e: Any, device_type: str, activity: str | None, linked: int, marker: str) -> str | None:
    """'kernel' | 'launch' | 'iteration' | 'op' | None (something else: annotations, kineto's own events).

    torch >= 2.13 names each event's activity type; older versions do not, and then names decide."""
    return _kind(
        e.name,
        device_type,
        activity,
        linked,
        marker,
        annotation=bool(getattr(e, "is_user_annotation", False)),
        is_async=bool(getattr(e, "is_async", False)),
        python_function=bool(getattr(e, "is_python_function", False)),
    )


def _kind(
    name: str,
    device_type: str,
    activity: str | None,
    linked: int,
    marker: str,
    *,
    annotation: bool,
    is_async: bool,
    python_function: bool,
) -> str | None:
    """:func:`_classify` on plain values (a FunctionEvent's or a raw kineto event's)."""
    annotation = annotation or (activity or "").endswith("user_annotation")
    if device_type != "CPU":
        if annotation or name == marker:
            return None
        return "kernel" if activity is None or activity in _KERNEL_ACTIVITIES else None
    if is_async:
        return None
    if name == marker:
        return "iteration"
    if annotation and name.startswith(MARKED_OPS):  # NB: hop_markers' record_function around a higher-order op
        return "op"
    if activity is not None:
        if activity in _RUNTIME_ACTIVITIES or (linked and activity != "cpu_op"):
            return "launch"
        return "op" if activity == "cpu_op" else None
    if _RUNTIME_NAME.match(name):
        return "launch"
    if annotation or python_function:
        return None
    return "op" if "::" in name or _AUTOGRAD_NODE.match(name) else None  # not e.g. 'Activity Buffer Request'


# Kineto's kernel args in the Chrome trace -> our event keys (launch facts; roofline.diagnose.join.launch_facts)
TRACE_FACTS = {
    "grid": "grid",
    "block": "block",
    "registers per thread": "registers_per_thread",
    "shared memory": "shared_memory_bytes",
    "blocks per SM": "blocks_per_sm",
    "warps per SM": "warps_per_sm",
}


def facts_from_trace(trace: Any) -> dict[int, dict[str, Any]]:
    """A Chrome trace (``prof.export_chrome_trace``'s JSON, parsed) -> launch facts of each kernel by correlation
    id. Kineto writes them in a kernel event's "args": "grid", "block", "registers per thread", "shared memory",
    "blocks per SM", "warps per SM", "est. achieved occupancy %" (0..100; some builds: "est. achieved occupancy",
    0..1) and, in newer builds, "occupancy": {"activeBlocksPerMultiprocessor", ...}. Whatever is missing is left
    out; anything not shaped like a trace gives {}."""
    events = trace.get("traceEvents") if isinstance(trace, dict) else trace
    out: dict[int, dict[str, Any]] = {}
    if not isinstance(events, list):
        return out
    for event in events:
        if not isinstance(event, dict) or str(event.get("cat", "")).lower() != "kernel":
            continue
        args = event.get("args")
        if not isinstance(args, dict) or "correlation" not in args:
            continue
        try:
            correlation = int(args["correlation"])
        except (TypeError, ValueError):
            continue
        facts = facts_from_args(args)
        if facts:
            out[correlation] = facts
    return out


def facts_from_args(args: dict[str, Any]) -> dict[str, Any]:
    """A kernel's launch facts from its trace "args" (or a kineto activity's metadata JSON, the same keys)."""
    facts = {ours: args[theirs] for theirs, ours in TRACE_FACTS.items() if theirs in args}
    occupancy = _number(args.get("est. achieved occupancy %"))
    if occupancy is not None:
        facts["occupancy"] = occupancy / 100
    elif (fraction := _number(args.get("est. achieved occupancy"))) is not None:
        facts["occupancy"] = fraction if fraction <= 1 else fraction / 100
    detail = args.get("occupancy")
    if isinstance(detail, dict) and "activeBlocksPerMultiprocessor" in detail:
        facts["active_blocks_per_sm"] = detail["activeBlocksPerMultiprocessor"]
    return facts


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def chrome_trace(prof: Any) -> tuple[Any, str]:
    """A stopped profiler's Chrome trace (written to a temporary file and read back) and '' -- or (None, why not)
    when the export fails. Never raises."""
    import json
    import tempfile
    from pathlib import Path

    try:
        with tempfile.TemporaryDirectory(prefix="roofline-trace-") as folder:
            path = Path(folder) / "trace.json"
            prof.export_chrome_trace(str(path))
            with path.open(encoding="utf-8") as handle:
                return json.load(handle), ""
    except Exception as exc:  # an older torch, a trace that does not parse: never a crash
        return None, f"the profiler's trace could not be read: {type(exc).__name__}"


def trace_facts(prof: Any, trace: Any = None) -> tuple[dict[int, dict[str, Any]], str]:
    """Launch facts by correlation id from a stopped profiler's Chrome trace (``trace``, else exported now) and ''
    -- or ({}, why not) when the export fails. Never raises. (A trace without facts gives {}: the join notes
    that.)"""
    why = ""
    if trace is None:
        trace, why = chrome_trace(prof)
    if trace is None:
        return {}, f"no kernel launch facts ({why})"
    return facts_from_trace(trace), ""


def events_from_profiler(
    function_events: Iterable[Any], marker: str = MARKER, facts: dict[int, dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """torch.profiler's FunctionEvent list (``prof.events()``) -> event dicts.

    A FunctionEvent whose device_type is not CPU is a kernel (or memcpy/memset): ``id`` is its correlation id,
    shared with its launch call, ``device_resource_id`` its stream and, from torch 2.13, ``linked_correlation_id``
    the id of the CPU op that launched it (its 'External id'); ``facts`` (:func:`facts_from_trace`) adds each
    kernel's launch facts by its correlation id. A runtime call (cudaLaunchKernel...) is a CPU
    event with the same ``id`` as its kernel. The ops are the other CPU events (``id`` = their External id; the
    two id spaces overlap). Without the linked id (torch < 2.13), :func:`~roofline.diagnose.join.join` finds the
    launching op as the innermost op around the launch call."""
    out: list[dict[str, Any]] = []
    for e in function_events:
        device_type = str(getattr(e, "device_type", "CPU")).rsplit(".", 1)[-1]
        activity = getattr(e, "activity_type", None)
        linked = int(getattr(e, "linked_correlation_id", 0) or 0)
        kind = _classify(e, device_type, activity, linked, marker)
        if kind is None:
            continue
        event: dict[str, Any] = {"kind": kind, "start_us": float(e.time_range.start), "end_us": float(e.time_range.end)}
        if kind == "kernel":
            event |= {
                "name": e.name,
                "stream": int(getattr(e, "device_resource_id", 0) or 0),
                "external_id": linked or None,
                "correlation": int(e.id),
            }
            event |= (facts or {}).get(int(e.id), {})
        elif kind == "launch":
            event |= {"name": e.name, "thread": int(e.thread), "correlation": int(e.id)}
        elif kind == "op":
            shapes = getattr(e, "structured_input_shapes", None) or getattr(e, "input_shapes", None)
            event |= {
                "id": int(e.id),
                "name": e.name,
                "thread": int(e.thread),
                "input_shapes": tensor_shapes(shapes, getattr(e, "input_dtypes", None)),
            }
        out.append(event)
    return out


#: what torch.profiler's own FunctionEvent list leaves out (torch.autograd.profiler_util._filter_name)
_FILTERED_NAMES = frozenset(
    {
        "[memory]",
        "[OutOfMemory]",
        "profiler::_record_function_enter",
        "profiler::_record_function_enter_new",
        "profiler::_record_function_exit",
        "aten::is_leaf",
        "aten::output_nr",
        "aten::_version",
    }
)


def _metadata_facts(event: Any) -> dict[str, Any]:
    """A raw kernel event's launch facts from its metadata JSON (kineto's kernel args: grid, block, ...); {} when
    it has none or they do not parse."""
    import json

    getter = getattr(event, "metadata_json", None)
    text = getter() if getter is not None else ""
    if not text:
        return {}
    try:
        args = json.loads("{" + text.strip().rstrip(",") + "}")
    except ValueError:
        return {}
    return facts_from_args(args) if isinstance(args, dict) else {}


def events_from_kineto(
    kineto_events: Iterable[Any], trace_start_ns: int, marker: str = MARKER, demangle: Callable[[str], str] = str
) -> tuple[list[dict[str, Any]], bool]:
    """torch.profiler's raw kineto events (``prof.profiler.kineto_results.events()``) -> event dicts, in one pass,
    without torch building its FunctionEvent list and tree (:func:`events_from_profiler` reads that; this gives
    the same dicts, in microseconds from ``trace_start_ns`` as torch does). Kernel names through ``demangle``
    (torch demangles them), each distinct name once; a kernel's launch facts from its metadata JSON where kineto
    gives them there. Returns (events, whether any kernel carried launch facts).

    NB: every value of a raw event is a call into torch's C++ (about 16 per event, tens of thousands of events on
    a many-op model): what an event's class has is asked once per class, a device's name once per device, and a
    CPU op (most events) asks only what its dict holds (for a ``cpu_op`` on the CPU, :func:`_kind` reads neither
    the annotation flags nor the linked id)."""
    out: list[dict[str, Any]] = []
    op_threads: dict[int, int] = {}  # an op's correlation id -> its thread (a launch call takes its op's thread)
    launches: list[tuple[dict[str, Any], int]] = []  # (launch event, the id of the op that made it)
    names: dict[str, str] = {}
    any_facts = False
    cpu: Any = None
    device_types: dict[Any, str] = {}
    classes: dict[type, tuple[bool, ...]] = {}
    for k in kineto_events:
        name = k.name()
        if name in _FILTERED_NAMES:
            continue
        has = classes.get(type(k))
        if has is None:
            has = classes[type(k)] = tuple(
                getattr(k, method, None) is not None
                for method in (
                    "is_hidden_event", "activity_type", "is_user_annotation", "is_python_function",
                    "structured_input_shapes",
                )
            )  # fmt: skip
        hidden, with_activity, with_annotation, with_python, structured = has
        if hidden and k.is_hidden_event():
            continue
        device = k.device_type()
        device_type = device_types.get(device)
        if device_type is None:
            if cpu is None:
                cpu = _cpu_device_type(device)
            device_type = device_types[device] = "CPU" if device == cpu else str(device).rsplit(".", 1)[-1]
        activity = (k.activity_type() or None) if with_activity else None
        thread = k.start_thread_id()
        if device_type == "CPU" and activity == "cpu_op" and name != marker:  # an op, unless async
            if k.is_async() or thread != k.end_thread_id():
                continue
            op_id = int(k.correlation_id())
            thread = int(thread)
            op_threads[op_id] = thread
            shapes = k.structured_input_shapes() if structured else None
            out.append(
                {
                    "kind": "op",
                    "start_us": (k.start_ns() - trace_start_ns) / 1000,
                    "end_us": (k.end_ns() - trace_start_ns) / 1000,
                    "id": op_id,
                    "name": name,
                    "thread": thread,
                    "input_shapes": tensor_shapes(shapes or k.shapes(), k.dtypes()),
                }
            )
            continue
        linked = int(k.linked_correlation_id() or 0)
        is_async = bool(k.is_async()) or thread != k.end_thread_id()
        kind = _kind(
            name,
            device_type,
            activity,
            linked,
            marker,
            annotation=bool(k.is_user_annotation()) if with_annotation else False,
            is_async=is_async,
            python_function=bool(k.is_python_function()) if with_python else False,
        )
        if kind is None:
            continue
        event: dict[str, Any] = {
            "kind": kind,
            "start_us": (k.start_ns() - trace_start_ns) / 1000,
            "end_us": (k.end_ns() - trace_start_ns) / 1000,
        }
        if kind == "kernel":
            shown = names.get(name)
            if shown is None:
                shown = names[name] = demangle(name)
            event |= {
                "name": shown,
                "stream": int(k.device_resource_id() or 0),
                "external_id": linked or None,
                "correlation": int(k.correlation_id()),
            }
            facts = _metadata_facts(k)
            if facts:
                any_facts = True
                event |= facts
        elif kind == "launch":
            event |= {"name": name, "thread": int(thread), "correlation": int(k.correlation_id())}
            if linked:
                launches.append((event, linked))
        elif kind == "op":
            shapes = k.structured_input_shapes() if structured else None
            op_id = int(k.correlation_id())
            thread = int(thread)
            op_threads[op_id] = thread
            event |= {
                "id": op_id,
                "name": name,
                "thread": thread,
                "input_shapes": tensor_shapes(shapes or k.shapes(), k.dtypes()),
            }
        out.append(event)
    for event, op_id in launches:  # as torch does: a launch call on its launching op's thread
        if op_id in op_threads:
            event["thread"] = op_threads[op_id]
    return out, any_facts


def _cpu_device_type(sample: Any) -> Any:
    try:
        from torch._C._autograd import DeviceType

        return DeviceType.CPU
    except Exception:  # no torch: a plain value says CPU by its name
        return sample if str(sample).rsplit(".", 1)[-1] == "CPU" else object()


def _demangler() -> Callable[[str], str]:
    """torch's kernel-name demangler (as its FunctionEvents show names), else names as they are."""
    try:
        import torch

        demangle = torch._C._demangle
    except Exception:
        return str
    return lambda name: demangle(name) if len(name) > 1 else name


def _profiled_events(prof: Any) -> tuple[list[dict[str, Any]], bool]:
    """The profile's event dicts, from the raw kineto events in one pass where this torch has them, else from its
    FunctionEvent list; and whether the kernels carried their launch facts."""
    return _events_of(prof, getattr(prof, "kineto_results", None))


def profiled_events(prof: Any) -> tuple[list[dict[str, Any]], bool]:
    """A stopped ``torch.profiler.profile``'s event dicts and whether its kernels carried launch facts: from the
    raw kineto events of the profiler it wraps (``prof.profiler``) in one pass, as :func:`_profiled_events` reads a
    session's, else from its FunctionEvent list (``prof.events()``)."""
    return _events_of(prof, getattr(getattr(prof, "profiler", None), "kineto_results", None))


def _events_of(prof: Any, results: Any) -> tuple[list[dict[str, Any]], bool]:
    """``results`` (raw kineto results) in one pass where this torch has them, else ``prof.events()``."""
    if results is not None and hasattr(results, "trace_start_ns"):
        try:
            return events_from_kineto(results.events(), int(results.trace_start_ns()), demangle=_demangler())
        except Exception:  # an older or newer torch whose raw events differ: torch's own list below
            pass
    return events_from_profiler(prof.events()), False


class _Session:
    """One profiling session: torch.autograd.profiler.profile (the kineto profiler that torch.profiler.profile
    wraps) where nothing imported torch._inductor, else torch.profiler.profile.

    NB: torch.profiler.profile's start asks ``hasattr(torch, "_inductor")``, which imports inductor and dynamo
    (1.8 to 3.7 s on a CPU here) to read inductor's CUDA-graphs flag; where inductor was never imported, no
    compiled graph of this process uses it, and the profiler below it does the same profile without the import."""

    def __init__(self, cuda: bool) -> None:
        import sys

        self.wrapped = "torch._inductor" in sys.modules
        if self.wrapped:
            from torch.profiler import ProfilerActivity, profile

            activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
            self.prof: Any = profile(activities=activities, record_shapes=True)
        else:
            from torch.autograd.profiler import profile as kineto_profile

            self.prof = kineto_profile(use_kineto=True, use_device="cuda" if cuda else None, record_shapes=True)

    def start(self) -> None:
        if not self.wrapped:
            self.prof.__enter__()
            return
        with warnings.catch_warnings():
            # torch (2.11 seen) warns once that events are not accumulated across profiling cycles: we run one
            warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each cycle.*")
            self.prof.start()

    def stop(self) -> None:
        if self.wrapped:
            self.prof.stop()
        else:
            self.prof.__exit__(None, None, None)

    @property
    def kineto_results(self) -> Any:
        return getattr(self.prof.profiler if self.wrapped else self.prof, "kineto_results", None)

    def export_chrome_trace(self, path: str) -> None:
        self.prof.export_chrome_trace(path)

    def events(self) -> Any:
        return self.prof.events() if self.wrapped else self.prof.function_events


def torch_profile(
    step: Callable[[], object],
    iters: int,
    device: str,
    *,
    keep_trace: bool = False,
    sync: Callable[[], None] | None = None,
) -> tuple[list[dict[str, Any]], float]:
    """Run ``step`` ``iters`` times under torch.profiler (CPU activity, plus CUDA on a GPU; record_shapes), each
    inside a record_function marker, timed end to end (CUDA events around the loop on a GPU, the host clock on
    the CPU). Returns the event dicts and the loop's seconds; ``keep_trace``: the profiler's Chrome trace too, as
    an event ``{"kind": "trace", "trace": dict}`` (or a note when it could not be read). ``sync``: called once the
    profiler runs, before the first iteration (the ranks of a distributed run meet there: starting a profiler
    takes each process its own time)."""
    import os
    from contextlib import nullcontext

    import torch
    from torch.autograd.profiler import record_function

    os.environ.setdefault("KINETO_LOG_LEVEL", "6")  # kineto's 'profiler_start/stop' lines on stderr, unless asked
    cuda = device.startswith("cuda")
    on_device = torch.cuda.device(torch.device(device)) if cuda else nullcontext()
    prof = _Session(cuda)
    with on_device:
        prof.start()
        try:
            if sync is not None:
                sync()
            if cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize()
                start.record()
            else:
                t0 = time.perf_counter()
            with hop_markers():
                for _ in range(iters):
                    with record_function(MARKER):
                        step()
            if cuda:
                end.record()
                end.synchronize()
                loop_s = start.elapsed_time(end) * 1e-3
            else:
                loop_s = time.perf_counter() - t0
        finally:
            prof.stop()
    reading = time.perf_counter()
    note = ""
    trace, why = chrome_trace(prof) if keep_trace else (None, "")
    events, with_facts = _profiled_events(prof)
    if cuda and not with_facts and any(e["kind"] == "kernel" for e in events):
        # NB: where the raw events carry no launch facts, the Chrome trace does (exported only then: it is slow)
        facts, note = trace_facts(prof, trace)
        for event in events:
            if event["kind"] == "kernel":
                event |= facts.get(event["correlation"], {})
    if note:
        events.append({"kind": "note", "text": f"{note}: {NO_FACTS}"})
    if keep_trace:
        events.append({"kind": "trace", "trace": trace} if trace is not None else {"kind": "note", "text": why})
    events.append({"kind": "stage", "name": "events", "seconds": time.perf_counter() - reading})
    return events, loop_s


@contextlib.contextmanager
def hop_markers() -> Iterator[None]:
    """Mark every higher-order op call (flex_attention, a Triton kernel wrapper, ...) in the profile with a
    record_function named as the counting pass records it (:func:`roofline.costs.aten.custom.hop_record_name`), so
    that the join finds it and gives it the time of the ops and kernels it runs.

    NB: the profiler has no event of its own for a higher-order op (its ops run inside 'Torch-Compiled Region' or
    an autograd Function); the wrapper is set on ``HigherOrderOperator.__call__`` for the profiled iterations only
    and does nothing while Dynamo traces."""
    import torch
    from torch.autograd.profiler import record_function

    hop = getattr(getattr(torch, "_ops", None), "HigherOrderOperator", None)
    original = hop.__dict__.get("__call__") if hop is not None else None
    if original is None:
        yield
        return

    def marked(self: Any, /, *args: Any, **kwargs: Any) -> Any:
        if torch.compiler.is_compiling():
            return original(self, *args, **kwargs)
        with record_function(hop_record_name(str(getattr(self, "_name", "")), kwargs)):
            return original(self, *args, **kwargs)

    hop.__call__ = marked
    try:
        yield
    finally:
        hop.__call__ = original


# ------------------------------------------------------------------------------------------------ driver


def out_of_memory_error(where: str) -> DeviceError:
    return DeviceError(
        f"out of memory {where}: use less memory with --dtype bf16 (half the bytes of fp32), smaller inputs "
        "in get_inputs() (a smaller batch or sequence length), or --mode inference (no activations kept for "
        "the backward pass)"
    )


def _step(model: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any], mode: str) -> Callable[[], object]:
    from roofline.diagnose.execute import run_once

    zero_grad = getattr(model, "zero_grad", None) if mode == "training" else None
    leaves = grad_leaves((inputs, kwargs)) if mode == "training" else []

    def step() -> object:
        # every iteration as the first (and the counting pass): no grads yet, the inputs' included (NB: else each
        # iteration's backward adds into an input's .grad, an add_ the counting pass never saw)
        if zero_grad is not None:
            zero_grad(set_to_none=True)
        for leaf in leaves:
            leaf.grad = None
        return run_once(model, inputs, kwargs, mode)  # type: ignore[arg-type]

    return step


def grad_leaves(value: Any, depth: int = 4) -> list[Any]:
    """The leaf tensors that require grad in ``value`` (tensors in tuples, lists and dict values, ``depth`` deep)."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value] if value.requires_grad and value.is_leaf else []
    if depth <= 0:
        return []
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    return [leaf for item in items for leaf in grad_leaves(item, depth - 1)]


@dataclass(frozen=True)
class Budget:
    """How ``--warmup auto`` and ``--iters auto`` (the defaults) size the timing pass from a first estimate.

    Warm-up: calls, each synchronised and timed, until ``warmup_s`` has passed or ``warmup_calls`` were made (at
    least one). The counting pass ran the model once before them (the lazy initialisation: cuBLAS handles,
    kernel loading, allocator growth), so they only settle clocks and caches; it is slower than a plain call (a
    dispatch mode records every op), so it is not the estimate. The last warm-up call is. Timed and profiled
    iterations (the same number): ``iters_s`` over the estimate, and at most ``max_ops`` counted ops in the
    profile (the profiler's events cost host time per op), within [``min_iters``, ``max_iters``]. With no
    warm-up call (``--warmup 0``), ``upper_s`` (the counting pass's time: an upper bound, so it sizes fewer
    iterations, never more) is the estimate."""

    warmup_s: float = 0.2
    warmup_calls: int = 3
    iters_s: float = 0.5
    min_iters: int = 1
    max_iters: int = 10
    max_ops: int = 4000
    upper_s: float = 0.0


def auto_iters(estimate_s: float, ops: int, budget: Budget) -> int:
    """Profiled iterations for one iteration of ``estimate_s`` seconds and ``ops`` counted ops (see Budget)."""
    n = budget.max_iters
    if estimate_s > 0:
        n = min(n, int(budget.iters_s / estimate_s))
    if ops > 0:
        n = min(n, budget.max_ops // ops)
    return max(budget.min_iters, n)


def time_model(
    model: Any,
    inputs: tuple[Any, ...],
    kwargs: dict[str, Any],
    records: Sequence[OpRecord],
    *,
    device: str,
    mode: str = "inference",
    warmup: int | None = None,
    iters: int | None = None,
    budget: Budget | None = None,
    profile: ProfileFn | None = None,
    keep_trace: bool = False,
    compiled: bool = False,
    weigh: Callable[[OpRecord], float] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Timing:
    """Warm up, time ``iters`` uninstrumented iterations end to end (-> ``wall_s``), then run ``iters`` more under
    the profiler (``profile``, default :func:`torch_profile`) and join them to ``records``. ``warmup`` / ``iters``
    None (auto): sized by ``budget`` (:class:`Budget`) from the warm-up calls' time; a number: exactly that.
    The profiler's per-op overhead slows the iterations (1.7x on a 12-layer GPT on an H100, 6x on a tiny MLP) but
    not the kernels: kernel times and busy time come from the profile, the wall time from the plain run, and
    the GPU idle time is capped at wall - busy. ``Timing.stage_s`` holds the seconds (by ``clock``) of the
    warm-up, the timed and the profiled iterations and of reading the profile ('events': the profiler's events
    turned into ours, parsed and joined); ``Timing.warmup_calls`` the warm-up calls made.

    A ``compiled`` model (torch.compile) is timed as compiled: at least one warm-up call, the first, which
    compiles it, timed apart (-> ``compile_s``, by ``clock``; synchronised on a GPU); its fused kernels are
    attributed to the counted ops by name (``weigh``: an op's share of a kernel, see
    :func:`roofline.diagnose.join.attribute_fused`).

    ``keep_trace`` (--export-trace): the profiler's Chrome trace is kept in ``Timing.trace`` (the profile
    function's ``{"kind": "trace"}`` event; the default one is asked for it).

    WorkloadError when the counting pass saw no ops; DeviceError (naming what reduces memory) on out of memory;
    UserCodeError from the user's model passes through."""
    if not records:
        raise WorkloadError("the model ran no tensor operations")
    if iters is not None and iters < 1:
        raise UsageError(f"--iters {iters}: at least 1")
    if warmup is not None and warmup < 0:
        raise UsageError(f"--warmup {warmup}: at least 0")
    cuda = str(device).startswith("cuda")
    step = _step(model, inputs, kwargs, mode)
    before = None
    kernel_profile = contextlib.nullcontext()
    if compiled:
        from roofline.diagnose import dynamo

        before = dynamo.snapshot()
        if not cuda:
            kernel_profile = cpu_kernel_profile()
    try:
        with kernel_profile:
            runs = _timed_runs(
                step,
                device=str(device),
                warmup=warmup,
                iters=iters,
                budget=budget or Budget(),
                ops=len(records),
                compiled=compiled,
                profile=profile,
                clock=clock,
                keep_trace=keep_trace,
            )
    except UserCodeError as exc:
        if exc.__context__ is not None and is_out_of_memory(exc.__context__):
            raise out_of_memory_error(f"running the model on {device}") from None
        raise
    except RooflineError:
        raise
    except Exception as exc:
        if is_out_of_memory(exc):
            raise out_of_memory_error(f"running the model on {device}") from None
        raise
    finally:
        zero_grad = getattr(model, "zero_grad", None) if mode == "training" else None
        if zero_grad is not None:
            zero_grad(set_to_none=True)
    iters, events, plain_s, profiled_s, compile_s = (
        runs.iters,
        runs.events,
        runs.plain_s,
        runs.profiled_s,
        runs.compile_s,
    )
    begin = clock()
    trace = next((e.get("trace") for e in events if e.get("kind") == "trace"), None)
    parsed = parse_events([e for e in events if e.get("kind") not in ("trace", "stage")])
    wall_s = plain_s / iters
    timing = join(
        records,
        parsed.ops,
        parsed.kernels,
        iters,
        launches=parsed.launches,
        device="cuda" if cuda else "cpu",
        wall_s=wall_s,
        weigh=weigh,
        compiled=compiled,
    )
    timing.trace = trace
    timing.warmup_calls = runs.warmup_calls
    reading_s = sum(float(e.get("seconds", 0.0)) for e in events if e.get("kind") == "stage")
    timing.stage_s = {
        "warmup": runs.warmup_s,
        "timed": runs.timed_s,
        "profiled": max(runs.profile_call_s - reading_s, 0.0),
        "events": reading_s + clock() - begin,
    }
    if compiled:
        from roofline.diagnose import dynamo
        from roofline.units import format_time

        timing.compiled, timing.compile_s = True, compile_s
        if before is not None:
            facts = dynamo.facts_since(before)
            timing.graphs, timing.graph_breaks, timing.recompiles = facts.graphs, facts.graph_breaks, facts.recompiles
        timing.notes.append(
            f"compiled model (torch.compile): timed as compiled; its first call, compilation included, took "
            f"{format_time(compile_s)} (not in the timings); FLOPs and bytes counted on its original computation"
        )
    if not cuda:  # what the CPU has to tell an unfilled CPU from a slow one (roofline.findings.bounds)
        import torch

        timing.threads = int(torch.get_num_threads())
        timing.cores = cpu_cores()
    if cuda and timing.gpu_busy_s > 0:
        # The profiler's per-op overhead delays launches and so stretches the gaps between kernels: the idle time
        # is at most what the uninstrumented iteration leaves beside the kernels.
        timing.gpu_idle_s = min(timing.gpu_idle_s, max(wall_s - timing.gpu_busy_s, 0.0))
    if profiled_s > 1.1 * plain_s > 0:
        from roofline.units import format_time

        what = "GPU idle time is bounded by the uninstrumented run" if cuda else "per-op CPU times include it"
        timing.notes.append(
            f"the profiler slowed each iteration from {format_time(wall_s)} to {format_time(profiled_s / iters)} "
            f"(its per-op overhead): {what}"
        )
    if any(note.startswith(NO_FACTS_PREFIX) for note in parsed.notes):  # the profile knows why: its note only
        timing.notes = [note for note in timing.notes if not note.startswith(NO_FACTS_PREFIX)]
    timing.notes += [note for note in parsed.notes if note not in timing.notes]
    if parsed.iterations and parsed.iterations != iters:
        timing.notes.append(f"the profile holds {parsed.iterations} iterations, {iters} were timed")
    return timing


@dataclass
class _Runs:
    """What :func:`_timed_runs` ran: counts, the profile's events, loop times (device clock) and stage seconds."""

    iters: int
    warmup_calls: int
    events: list[dict[str, Any]]
    plain_s: float  # the uninstrumented loop (CUDA events on a GPU)
    profiled_s: float  # the profiled loop, as the profile function timed it
    compile_s: float = 0.0
    warmup_s: float = 0.0  # host seconds (``clock``) of the warm-up, compilation included
    timed_s: float = 0.0  # host seconds of the uninstrumented loop
    profile_call_s: float = 0.0  # host seconds of the profile function (its loop and its reading of the events)


def _timed_runs(
    step: Callable[[], object],
    *,
    device: str,
    warmup: int | None,
    iters: int | None,
    budget: Budget,
    ops: int,
    compiled: bool,
    profile: ProfileFn | None,
    clock: Callable[[], float],
    keep_trace: bool = False,
) -> _Runs:
    """Warm-up (sized by ``budget`` when ``warmup`` is None), the uninstrumented loop and the profiled loop of
    ``iters`` iterations (sized from the last warm-up call when None)."""
    compile_s = 0.0
    calls = 0
    estimate = 0.0
    if compiled:
        compile_s = _timed_call(step, device, clock)
        calls = 1
    begin = clock()
    if warmup is None:
        # NB: a compiled model's compiling call is no warm-up and no estimate (it took seconds): warm-up calls
        # after it, at least one, size the iterations as for an eager model
        warm = 0
        while warm < max(budget.warmup_calls, 1) and (warm == 0 or clock() - begin < budget.warmup_s):
            estimate = _timed_call(step, device, clock)
            warm += 1
        calls += warm
    else:
        wanted = max(warmup - calls, 0) if compiled else warmup
        for index in range(wanted):
            if iters is None and index == wanted - 1:
                estimate = _timed_call(step, device, clock)  # the estimate: only where iterations are sized
            else:
                step()
        calls += wanted
    warmup_s = clock() - begin
    if iters is None:
        iters = auto_iters(estimate if estimate > 0 else budget.upper_s, ops, budget)
    begin = clock()
    plain_s = time_loop(step, iters, device)
    timed_s = clock() - begin
    begin = clock()
    if profile is None and keep_trace:
        events, profiled_s = torch_profile(step, iters, device, keep_trace=True)
    else:
        events, profiled_s = (profile or torch_profile)(step, iters, device)
    return _Runs(
        iters=iters,
        warmup_calls=calls,
        events=events,
        plain_s=plain_s,
        profiled_s=profiled_s,
        compile_s=compile_s,
        warmup_s=warmup_s,
        timed_s=timed_s,
        profile_call_s=clock() - begin,
    )


def _timed_call(step: Callable[[], object], device: str, clock: Callable[[], float]) -> float:
    """Seconds one call of ``step`` takes, synchronised (host clock)."""
    begin = clock()
    step()
    synchronize(device)
    return clock() - begin


def cpu_kernel_profile() -> contextlib.AbstractContextManager[object]:
    """inductor's generated CPU kernels profiled by name (cpp.enable_kernel_profile) while a compiled model is
    compiled and timed on the CPU, so that join can attribute their time; a no-op where the option is missing."""
    try:
        import torch._inductor.config as inductor_config
    except Exception:
        return contextlib.nullcontext()
    cpp = getattr(inductor_config, "cpp", None)
    if cpp is None or not hasattr(cpp, "enable_kernel_profile"):
        return contextlib.nullcontext()
    return inductor_config.patch({"cpp.enable_kernel_profile": True})


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize(torch.device(device))


def time_loop(step: Callable[[], object], iters: int, device: str) -> float:
    """Seconds that ``iters`` back-to-back calls of ``step`` take, uninstrumented (CUDA events around the loop on
    a GPU, the host clock on the CPU)."""
    if not device.startswith("cuda"):
        start = time.perf_counter()
        for _ in range(iters):
            step()
        return time.perf_counter() - start
    import torch

    with torch.cuda.device(torch.device(device)):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        begin.record()
        for _ in range(iters):
            step()
        end.record()
        end.synchronize()
        return begin.elapsed_time(end) * 1e-3


__all__ = [
    "MARKER",
    "Budget",
    "ProfileFn",
    "auto_iters",
    "chrome_trace",
    "events_from_kineto",
    "events_from_profiler",
    "facts_from_trace",
    "out_of_memory_error",
    "profiled_events",
    "time_model",
    "torch_profile",
    "trace_facts",
]


def cpu_cores() -> int:
    """The CPUs this process may run on (its affinity where the OS tells it), else os.cpu_count()."""
    import os

    getter = getattr(os, "sched_getaffinity", None)
    if getter is not None:
        try:
            return len(getter(0))
        except OSError:
            pass
    return os.cpu_count() or 0

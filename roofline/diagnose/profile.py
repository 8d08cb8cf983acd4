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
from collections.abc import Callable, Iterable, Sequence
from typing import Any

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


def _tensor_shapes(shapes: Any, dtypes: Any) -> list[list[int]]:
    """Shapes of the tensor arguments among the profiler's per-argument shapes (scalars, None and strings
    dropped by their dtype string; TensorLists flattened)."""
    out: list[list[int]] = []
    for position, shape in enumerate(shapes or ()):
        dtype = dtypes[position] if dtypes and position < len(dtypes) else None
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
_AUTOGRAD_NODE = re.compile(r"^\w+Backward\d*$")  # AddmmBackward0


def _classify(e: Any, device_type: str, activity: str | None, linked: int, marker: str) -> str | None:
    """'kernel' | 'launch' | 'iteration' | 'op' | None (something else: annotations, kineto's own events).

    torch >= 2.13 names each event's activity type; older versions do not, and then names decide."""
    annotation = bool(getattr(e, "is_user_annotation", False)) or (activity or "").endswith("user_annotation")
    if device_type != "CPU":
        if annotation or e.name == marker:
            return None
        return "kernel" if activity is None or activity in _KERNEL_ACTIVITIES else None
    if getattr(e, "is_async", False):
        return None
    if e.name == marker:
        return "iteration"
    if activity is not None:
        if activity in _RUNTIME_ACTIVITIES or (linked and activity != "cpu_op"):
            return "launch"
        return "op" if activity == "cpu_op" else None
    if _RUNTIME_NAME.match(e.name):
        return "launch"
    if annotation or getattr(e, "is_python_function", False):
        return None
    return "op" if "::" in e.name or _AUTOGRAD_NODE.match(e.name) else None  # not e.g. 'Activity Buffer Request'


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
        facts = {ours: args[theirs] for theirs, ours in TRACE_FACTS.items() if theirs in args}
        occupancy = _number(args.get("est. achieved occupancy %"))
        if occupancy is not None:
            facts["occupancy"] = occupancy / 100
        elif (fraction := _number(args.get("est. achieved occupancy"))) is not None:
            facts["occupancy"] = fraction if fraction <= 1 else fraction / 100
        detail = args.get("occupancy")
        if isinstance(detail, dict) and "activeBlocksPerMultiprocessor" in detail:
            facts["active_blocks_per_sm"] = detail["activeBlocksPerMultiprocessor"]
        if facts:
            out[correlation] = facts
    return out


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
                "input_shapes": _tensor_shapes(shapes, getattr(e, "input_dtypes", None)),
            }
        out.append(event)
    return out


def torch_profile(
    step: Callable[[], object], iters: int, device: str, *, keep_trace: bool = False
) -> tuple[list[dict[str, Any]], float]:
    """Run ``step`` ``iters`` times under torch.profiler (CPU activity, plus CUDA on a GPU; record_shapes), each
    inside a record_function marker, timed end to end (CUDA events around the loop on a GPU, the host clock on
    the CPU). Returns the event dicts and the loop's seconds; ``keep_trace``: the profiler's Chrome trace too, as
    an event ``{"kind": "trace", "trace": dict}`` (or a note when it could not be read)."""
    import os
    from contextlib import nullcontext

    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    os.environ.setdefault("KINETO_LOG_LEVEL", "6")  # kineto's 'profiler_start/stop' lines on stderr, unless asked
    cuda = device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    on_device = torch.cuda.device(torch.device(device)) if cuda else nullcontext()
    prof = profile(activities=activities, record_shapes=True)
    with on_device:
        with warnings.catch_warnings():
            # torch (2.11 seen) warns once that events are not accumulated across profiling cycles: we run one
            warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each cycle.*")
            prof.start()
        try:
            if cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize()
                start.record()
            else:
                t0 = time.perf_counter()
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
    facts: dict[int, dict[str, Any]] = {}
    note = ""
    trace, why = chrome_trace(prof) if keep_trace else (None, "")
    if cuda:
        facts, note = trace_facts(prof, trace)
    events = events_from_profiler(prof.events(), facts=facts)
    if note:
        events.append({"kind": "note", "text": f"{note}: {NO_FACTS}"})
    if keep_trace:
        events.append({"kind": "trace", "trace": trace} if trace is not None else {"kind": "note", "text": why})
    return events, loop_s


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

    def step() -> object:
        if zero_grad is not None:
            zero_grad(set_to_none=True)  # every iteration as the first (and the counting pass): no grads yet
        return run_once(model, inputs, kwargs, mode)  # type: ignore[arg-type]

    return step


def time_model(
    model: Any,
    inputs: tuple[Any, ...],
    kwargs: dict[str, Any],
    records: Sequence[OpRecord],
    *,
    device: str,
    mode: str = "inference",
    warmup: int = 3,
    iters: int = 10,
    profile: ProfileFn | None = None,
    keep_trace: bool = False,
    compiled: bool = False,
    weigh: Callable[[OpRecord], float] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Timing:
    """Warm up ``warmup`` iterations, time ``iters`` uninstrumented ones end to end (-> ``wall_s``), then run
    ``iters`` more under the profiler (``profile``, default :func:`torch_profile`) and join them to ``records``.
    The profiler's per-op overhead slows the iterations (1.7x on a 12-layer GPT on an H100, 6x on a tiny MLP) but
    not the kernels: kernel times and busy time come from the profile, the wall time from the plain run, and
    the GPU idle time is capped at wall - busy.

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
    if iters < 1:
        raise UsageError(f"--iters {iters}: at least 1")
    if warmup < 0:
        raise UsageError(f"--warmup {warmup}: at least 0")
    cuda = str(device).startswith("cuda")
    step = _step(model, inputs, kwargs, mode)
    compile_s = 0.0
    before = None
    kernel_profile = contextlib.nullcontext()
    if compiled:
        from roofline.diagnose import dynamo

        before = dynamo.snapshot()
        if not cuda:
            kernel_profile = _cpu_kernel_profile()
    try:
        with kernel_profile:
            compile_s, plain_s, events, profiled_s = _timed_runs(
                step,
                device=str(device),
                warmup=warmup,
                iters=iters,
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
    trace = next((e.get("trace") for e in events if e.get("kind") == "trace"), None)
    parsed = parse_events([e for e in events if e.get("kind") != "trace"])
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
        timing.cores = _cores()
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


def _timed_runs(
    step: Callable[[], object],
    *,
    device: str,
    warmup: int,
    iters: int,
    compiled: bool,
    profile: ProfileFn | None,
    clock: Callable[[], float],
    keep_trace: bool = False,
) -> tuple[float, float, list[dict[str, Any]], float]:
    """(compile seconds, the plain loop's seconds, the profile's events, the profiled loop's seconds)."""
    compile_s = 0.0
    if compiled:
        begin = clock()
        step()
        _synchronize(device)
        compile_s = clock() - begin
    for _ in range(warmup - 1 if compiled and warmup else warmup):
        step()
    plain_s = _time_loop(step, iters, device)
    if profile is None and keep_trace:
        events, profiled_s = torch_profile(step, iters, device, keep_trace=True)
    else:
        events, profiled_s = (profile or torch_profile)(step, iters, device)
    return compile_s, plain_s, events, profiled_s


def _cpu_kernel_profile() -> contextlib.AbstractContextManager[object]:
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


def _synchronize(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize(torch.device(device))


def _time_loop(step: Callable[[], object], iters: int, device: str) -> float:
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
    "ProfileFn",
    "chrome_trace",
    "events_from_profiler",
    "facts_from_trace",
    "out_of_memory_error",
    "time_model",
    "torch_profile",
    "trace_facts",
]


def _cores() -> int:
    """The CPUs this process may run on (its affinity where the OS tells it), else os.cpu_count()."""
    import os

    getter = getattr(os, "sched_getaffinity", None)
    if getter is not None:
        try:
            return len(getter(0))
        except OSError:
            pass
    return os.cpu_count() or 0

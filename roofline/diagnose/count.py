"""The counting pass: run the model once under a TorchDispatchMode and record every aten op it executes.

Each op becomes an :class:`~roofline.report.records.OpRecord` with the nn.Module path that issued it, the phase
(forward or backward), its tensor input and output shapes, canonical dtypes, whether an input is strided, and its
analytic cost from :mod:`roofline.costs.aten`.

Module paths. Forward: per-module pre/post hooks keep a stack of module paths (names from
``model.named_modules()``; '' is the model itself). Backward: ops run inside autograd nodes, not inside module
calls, so when each module's forward returns, the autograd nodes it created (reachable from its outputs without
crossing its inputs) are tagged with its path; an op in backward is attributed to the module of the node that
runs it (``torch._C._current_autograd_node()``). Nodes that no module created (the loss that run_once sums) are
attributed to the model ('').

Phase: 'backward' for an op executed while the autograd engine runs a node (``_current_autograd_node()`` is not
None) or after run_once called the loss's backward (the engine's final callbacks run no node: FSDP's last
reduce-scatter), 'forward' otherwise. So the loss reduction run_once adds after the model returns counts as forward work
of the model (module ''), and every gradient op (AccumulateGrad's copies and adds included) as backward. Where
torch has no ``_current_autograd_node`` the phase is 'backward' for every op after the model's forward returned
in training mode.

Dataflow: per tensor input, the index of the op of this iteration that produced it (``input_producers``; None
for model inputs, parameters, buffers, constants and tensors from before the iteration) and whether it is a
parameter or buffer of the model (``input_params``). Tensors are known by their storage (device, data pointer):
an op's fresh outputs (no alias in its schema) and in-place outputs (a write alias: a new version) map their
storage to the op; a view's output (a read alias) keeps the producer of the tensor it views, so a slice of a
produced tensor maps to its producer. A storage freed and reused by the allocator is remapped by the op that
allocates the new tensor. Parameters and buffers: their storages, collected before the run, so views of a
weight (``weight.t()``) count as the weight. ``input_layouts`` says per input whether it is 'contiguous',
'channels_last' (4-D, NHWC strides) or 'strided'.

Source lines: each op's file and line in the user's code (roofline.diagnose.source: the innermost user frame in
forward, the forward op's line in backward).

Hooks and the mode are removed in all cases (try/finally), also when the user's model raises; run_once turns
that exception into a UserCodeError, which propagates.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from roofline.costs.aten import NO_FORMULA, OP_COSTS, OpCost, dtype_name, flex_attention_cost, is_strided, op_cost
from roofline.costs.aten.custom import (
    HIGHER_ORDER,
    TRITON,
    compulsory_bytes,
    hop_record_name,
    load_plugins,
    registered,
    tensors_dtype,
    torch_registry_flops,
    triton_kernel,
    triton_kernel_name,
)
from roofline.diagnose.execute import Mode, run_once
from roofline.diagnose.source import Sources
from roofline.report.records import OpRecord, Phase

# NB: metadata queries (size, stride, is_contiguous, ...) reach a dispatch mode only for tensor subclasses; they
# launch nothing and the profiler does not show them, so they are not recorded.
_SKIPPED_NAMES = (
    "aten::sym_is_contiguous aten::is_contiguous aten::is_strides_like_format aten::is_non_overlapping_and_dense "
    "aten::size aten::sym_size aten::stride aten::sym_stride aten::storage_offset aten::sym_storage_offset "
    "aten::numel aten::sym_numel aten::dim prim::layout prim::device "
    # record_function's markers (torch.optim's "Optimizer.step#SGD.step", a user's own): annotations in the
    # profile, not ops; they launch nothing
    "profiler::_record_function_enter profiler::_record_function_enter_new profiler::_record_function_exit"
)
_SKIPPED = frozenset(_SKIPPED_NAMES.split())


def tensors_in(value: Any) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in tensors_in(item)]
    return []


class _ModuleTracker:
    """Which module is running: a stack of paths in forward, autograd nodes tagged with paths for backward."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.root_type = type(model).__name__ if model is not None else ""
        self.types: dict[str, str] = {"": self.root_type}
        self.stack: list[tuple[str, set[int]]] = []  # (path, ids of the autograd nodes of its inputs)
        self.node_paths: dict[int, str] = {}  # id(autograd node) -> path of the module that created it
        self._alive: list[Any] = []  # the nodes tagged, kept alive so that their ids stay theirs
        self.handles: list[Any] = []
        self.forward_done = False
        self.backward_begun = False  # the loss's backward was called (run_once): ops with no autograd node then
        # are the engine's callbacks (FSDP's final reduce-scatter), still backward work

    # ----------------------------------------------------------------------------------------- hooks

    def install(self) -> None:
        import torch

        if not isinstance(self.model, torch.nn.Module):
            return
        for name, module in self.model.named_modules():
            self.types[name] = type(module).__name__
            self.handles.append(module.register_forward_pre_hook(self._pre(name), with_kwargs=True))
            try:
                handle = module.register_forward_hook(self._post(name), with_kwargs=True, always_call=True)
            except TypeError:  # torch without always_call
                handle = module.register_forward_hook(self._post(name), with_kwargs=True)
            self.handles.append(handle)

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles.clear()

    def _pre(self, name: str) -> Any:
        def hook(module: Any, args: Any, kwargs: Any) -> None:
            boundary: set[int] = set()
            for t in tensors_in((args, kwargs)):
                node = t.grad_fn
                if node is not None:
                    boundary.add(id(node))
                    self._alive.append(node)
            self.stack.append((name, boundary))

        return hook

    def _post(self, name: str) -> Any:
        def hook(module: Any, args: Any, kwargs: Any, output: Any) -> None:
            # pop up to and including this module's frame (a frame left by a callee that raised goes too)
            boundary: set[int] = set()
            while self.stack:
                path, boundary = self.stack.pop()
                if path == name:
                    break
            self._tag(output, name, boundary)
            if name == "" and not self.stack:
                self.forward_done = True

        return hook

    def _tag(self, output: Any, path: str, boundary: set[int]) -> None:
        """Tag the autograd nodes created inside this module call: reachable from its outputs without crossing its
        inputs' nodes. A node a submodule already tagged keeps its tag (inner modules return first), but the walk
        goes on through it: the ops between two submodules (a GELU call between two Linears) belong to this one."""
        todo = [t.grad_fn for t in tensors_in(output) if t.grad_fn is not None]
        seen: set[int] = set()
        while todo:
            node = todo.pop()
            key = id(node)
            if key in seen or key in boundary:
                continue
            seen.add(key)
            if key not in self.node_paths:
                self.node_paths[key] = path
                self._alive.append(node)
            todo.extend(fn for fn, _ in node.next_functions if fn is not None)

    # ------------------------------------------------------------------------------------------ where

    def current(self, node: Any) -> str:
        if self.stack:  # forward, or a forward recomputed in backward (activation checkpointing)
            return self.stack[-1][0]
        if node is not None:
            return self.node_paths.get(id(node), "")
        return ""


def _current_node() -> Any:
    import torch

    getter = getattr(torch._C, "_current_autograd_node", None)
    return getter() if getter is not None else None


class _Recorder:
    """Builds the TorchDispatchMode lazily (the class needs torch)."""

    def __init__(self, tracker: _ModuleTracker, mode: Mode, params: set[tuple[str, int]] | None = None) -> None:
        self.tracker = tracker
        self.training = mode == "training"
        self.records: list[OpRecord] = []
        self.params: set[tuple[str, int]] = params or set()  # storage keys of the model's parameters and buffers
        self.producers: dict[tuple[str, int], int] = {}  # storage key -> index of the op that produced it
        self.storages: dict[tuple[str, int], int] = {}  # storage key -> its number, in order of first use
        self.next_id = 0
        self.sources = Sources()  # each op's file and line in the user's code (roofline.diagnose.source)

    def mode(self) -> Any:
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode

        recorder = self
        has_node_api = hasattr(torch._C, "_current_autograd_node")

        class RecordingMode(TorchDispatchMode):
            @classmethod
            def _should_skip_dynamo(cls) -> bool:
                # NB: torch wraps a mode's __torch_dispatch__ in torch._dynamo.disable, which imports torch._dynamo
                # at the first op (1.8 s on a CPU here): needless where nothing imported dynamo (no compiled model
                # in this process; ours calls no torch.compile). Where it is imported, torch's own choice holds.
                if "torch._dynamo" not in sys.modules:
                    return False
                skip = getattr(super(), "_should_skip_dynamo", None)
                return bool(skip()) if skip is not None else False

            # NB: higher-order ops (flex_attention, cond, while_loop, invoke_subgraph, auto_functionalized, the
            # Triton kernel wrapper) reach __torch_dispatch__ too (else torch raises 'no rule registered')
            supports_higher_order_operators = True

            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                kwargs = kwargs or {}
                if isinstance(func, torch._ops.HigherOrderOperator):
                    return recorder.higher_order(self, func, tuple(args), kwargs, has_node_api)
                if _decomposable(func):
                    # NB: a composite op (matmul) reaches the mode undecomposed below autograd (inside a
                    # higher-order op's subgraph, under inference_mode): its decomposition runs under the mode,
                    # so the ops that do the work (mm) are recorded
                    with self:
                        out = func.decompose(*args, **kwargs)
                    if out is not NotImplemented:
                        return out
                out = func(*args, **kwargs)
                recorder.record(func, args, kwargs, out, has_node_api)
                return out

        return RecordingMode()

    def higher_order(self, mode: Any, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], node_api: bool) -> Any:
        """Run a higher-order op (the mode is off here) and record it: flex_attention and a Triton kernel as one
        costed op; cond, while_loop, invoke_subgraph, auto_functionalized by the ops they run (their subgraphs
        run under the mode); any other, or one whose inner ops torch hides, as one uncounted op."""
        name = str(getattr(func, "_name", "") or func.name())
        if name in _HOP_COSTED:
            out = func(*args, **kwargs)
            self.record(func, args, kwargs, out, node_api, name=hop_record_name(name, kwargs),
                        cost=_hop_cost(name, args, kwargs, out))  # fmt: skip
            return out
        start = len(self.records)
        out = run_inside(mode, func, args, kwargs)
        if len(self.records) == start:  # NB: torch ran it without showing us its ops: one uncounted record
            note = f"{NO_FORMULA}: higher-order op {name}; its inner ops were not visible to the counting pass"
            self.record(func, args, kwargs, out, node_api, name=f"{HIGHER_ORDER}{name}",
                        cost=OpCost(None, None, "", "vector", note))  # fmt: skip
        return out

    def record(
        self,
        func: Any,
        args: Any,
        kwargs: dict[str, Any],
        out: Any,
        has_node_api: bool,
        *,
        name: str | None = None,
        cost: OpCost | None = None,
    ) -> None:
        schema = getattr(func, "_schema", None)
        if name is None:
            name = schema.name if schema is not None else str(func)
        if name in _SKIPPED:
            return
        node = _current_node() if has_node_api else None
        if has_node_api:
            phase: Phase = "backward" if node is not None or self.tracker.backward_begun else "forward"
        else:
            phase = "backward" if self.training and self.tracker.forward_done else "forward"
        path = self.tracker.current(node)
        source = self.sources.of(node, bool(self.tracker.stack))
        if cost is None:
            try:
                cost = op_cost(func, args, kwargs, out)
            except Exception as exc:  # NB: never stop the user's model over a cost formula
                cost = OpCost(None, None, "", "vector", f"{NO_FORMULA}: {type(exc).__name__}: {exc}")
        try:
            inputs = tensor_inputs(func, args, kwargs)
            input_shapes = tuple(tensor_shape(t) for t in inputs)
            input_dtypes = tuple(dtype_name(t.dtype) for t in inputs)
            output_shapes = tuple(tensor_shape(t) for t in tensors_in(out))
            non_contiguous = any(is_strided(t, cost.math) for t in inputs)
        except Exception as exc:  # NB: an unusual tensor (symbolic shapes): recorded, uncounted, never fatal
            inputs = []
            input_shapes, input_dtypes, output_shapes, non_contiguous = (), (), (), False
            cost = OpCost(None, None, cost.dtype, cost.math, f"{NO_FORMULA}: {type(exc).__name__}: {exc}")
        index = len(self.records)
        keys = [_storage_key(t) for t in inputs]  # NB: once per input (a call into torch each)
        producers, params, layouts = self.dataflow(inputs, keys)
        ids = tuple(self.storage_id(key) for key in keys)
        if self.training and phase == "forward":
            self.sources.produced(inputs, producers, self.records)
        self.produced(index, schema, out)
        self.records.append(
            OpRecord(
                index=index,
                op=name,
                module=path,
                module_type=self.tracker.types.get(path, ""),
                phase=phase,
                input_shapes=input_shapes,
                input_dtypes=input_dtypes,
                output_shapes=output_shapes,
                flops=cost.flops,
                bytes=cost.bytes,
                dtype=cost.dtype,
                math=cost.math,
                non_contiguous=non_contiguous,
                note=cost.note,
                input_producers=producers,
                input_params=params,
                input_layouts=layouts,
                input_ids=ids,
                source=source,
            )
        )

    def storage_id(self, key: tuple[str, int] | None) -> int | None:
        """The number of a storage (a tensor's :func:`_storage_key`), in order of first use; None for none."""
        if key is None:
            return None
        if key not in self.storages:
            self.storages[key] = self.next_id
            self.next_id += 1
        return self.storages[key]

    def dataflow(
        self, inputs: list[Any], keys: list[tuple[str, int] | None]
    ) -> tuple[tuple[int | None, ...], tuple[bool, ...], tuple[str, ...]]:
        """Per tensor input (``keys``: their :func:`_storage_key`): the op that produced it, whether it is a
        parameter/buffer, its layout."""
        producers: list[int | None] = []
        params: list[bool] = []
        layouts: list[str] = []
        for t, key in zip(inputs, keys, strict=True):
            producers.append(self.producers.get(key) if key is not None else None)
            params.append(key is not None and key in self.params)
            layouts.append(tensor_layout(t))
        return tuple(producers), tuple(params), tuple(layouts)

    def produced(self, index: int, schema: Any, out: Any) -> None:
        """Map the storages of the op's outputs to it: fresh and in-place outputs; views keep their producer."""
        outputs = tensors_in(out)
        returns = list(getattr(schema, "returns", None) or [])
        if len(returns) == 1 and len(outputs) > 1:  # Tensor(a)[]: one return for the whole list
            returns = returns * len(outputs)
        for i, t in enumerate(outputs):
            alias = getattr(returns[i], "alias_info", None) if i < len(returns) else None
            if alias is not None and not getattr(alias, "is_write", False):
                continue  # a view: the tensor it views keeps its producer
            key = _storage_key(t)
            if key is not None and key not in self.params:
                self.producers[key] = index
                if alias is None:  # a fresh output (maybe in memory the allocator reused): a new tensor
                    self.storages[key] = self.next_id
                    self.next_id += 1


# NB: higher-order ops costed as one op: flex attention (the attention formula over its block mask's density)
# and the Triton kernel wrappers (a cost registered for the kernel, or torch's flop registry)
_HOP_COSTED = frozenset(
    {"flex_attention", "flex_attention_backward", "triton_kernel_wrapper_mutation", "triton_kernel_wrapper_functional"}
)
# NB: whose dense implementation calls the callables among their arguments (cond's branches, while_loop's cond and
# body, invoke_subgraph's subgraph): they run under the mode, so their ops are recorded
_SUBGRAPH_ARGS = frozenset({"cond", "while_loop", "while_loop_stack_output", "invoke_subgraph", "map_impl", "scan"})
# NB: whose dense implementation calls other ops (auto_functionalized: the clones and the mutable op): run under
# the mode
_RUN_UNDER_MODE = frozenset({"auto_functionalized", "auto_functionalized_v2"})


def _decomposable(func: Any) -> bool:
    """Whether ``func`` is a composite op (a CompositeImplicitAutograd kernel) that we have no cost for."""
    import torch

    schema = getattr(func, "_schema", None)
    if schema is None or schema.name in OP_COSTS or registered(schema.name) is not None:
        return False
    try:
        return bool(torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), "CompositeImplicitAutograd"))
    except (AttributeError, RuntimeError):
        return False


def run_inside(mode: Any, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run higher-order op ``func`` (the dispatch mode popped) so that the ops it runs reach ``mode``: the
    callables among its arguments (subgraphs) run with the mode on; auto_functionalized's dense kernel runs
    under it; any other runs as it is (its ops unseen)."""
    from torch._C import DispatchKey

    name = str(getattr(func, "_name", ""))
    if name in _RUN_UNDER_MODE:
        dense = func.py_kernels.get(DispatchKey.CompositeExplicitAutograd)
        if dense is not None:
            with mode:
                return dense(*args, **kwargs)
    if name in _SUBGRAPH_ARGS:
        return func(*[_under(mode, a) for a in args], **{k: _under(mode, v) for k, v in kwargs.items()})
    return func(*args, **kwargs)


def _under(mode: Any, value: Any) -> Any:
    """A callable argument of a higher-order op, wrapped to run with ``mode`` on; anything else as it is."""
    import torch

    if not callable(value) or isinstance(value, torch.Tensor):
        return value

    def run(*args: Any, **kwargs: Any) -> Any:
        with mode:
            return value(*args, **kwargs)

    if getattr(value, "_boxed_call", False):
        run._boxed_call = True  # type: ignore[attr-defined]
    return run


def _hop_cost(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> OpCost:
    """The cost of a costed higher-order op; an uncounted cost with the reason when it cannot be had."""
    try:
        if name.startswith("flex_attention"):
            return flex_attention_cost(args, out, backward=name.endswith("backward"))
        kernel_args = kwargs.get("kwargs") or {}
        given = registered(f"{TRITON}{triton_kernel_name(kwargs)}")
        if given is not None:
            return given.cost((), kernel_args, out)
        flops = torch_registry_flops(triton_kernel(kwargs), args, kwargs, out)
        if flops is not None:
            note = "FLOPs from torch's flop registry; bytes: each tensor argument read once (assumed)"
            return OpCost(flops, compulsory_bytes(kernel_args, out), tensors_dtype(kernel_args), "tensor", note)
        note = (f"{NO_FORMULA}: Triton kernel {triton_kernel_name(kwargs)}; give its cost with "
                "roofline.register_cost(kernel, flops=..., bytes=...)")  # fmt: skip
        return OpCost(None, None, tensors_dtype(kernel_args), "vector", note)
    except Exception as exc:  # NB: never stop the user's model over a cost
        return OpCost(None, None, "", "vector", f"{NO_FORMULA}: {name}: {type(exc).__name__}: {exc}")


def _storage_key(t: Any) -> tuple[str, int] | None:
    """Which memory a tensor lives in: (device, storage data pointer); None for empty or storage-less tensors."""
    try:
        ptr = int(t.untyped_storage().data_ptr())
    except Exception:  # NB: tensor subclasses, sparse or meta tensors: no storage to follow
        return None
    return (str(t.device), ptr) if ptr else None


def tensor_layout(t: Any) -> str:
    import torch

    try:
        if t.is_contiguous():
            return "contiguous"
        if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last):
            return "channels_last"
    except Exception:  # NB: symbolic shapes
        return ""
    return "strided"


def _param_keys(model: Any) -> set[tuple[str, int]]:
    import torch

    if not isinstance(model, torch.nn.Module):
        return set()
    keys = (_storage_key(t) for t in [*model.parameters(), *model.buffers()])
    return {k for k in keys if k is not None}


def tensor_shape(t: Any) -> tuple[int, ...]:
    if getattr(t, "is_nested", False):  # NB: a nested (jagged) tensor has no single shape: a ragged dim is -1
        sizes = t._nested_tensor_size().tolist()
        return (len(sizes), *(int(col[0]) if len(set(col)) == 1 else -1 for col in zip(*sizes, strict=True)))
    return tuple(map(int, t.shape))


def tensor_inputs(func: Any, args: Any, kwargs: dict[str, Any]) -> list[Any]:
    """Tensor arguments in schema order (positional, then keyword), lists flattened."""
    tensors = tensors_in(list(args))
    schema = getattr(func, "_schema", None)
    if schema is not None:
        for arg in schema.arguments:
            if arg.name in kwargs:
                tensors += tensors_in(kwargs[arg.name])
    else:
        tensors += tensors_in(kwargs)
    return tensors


def count_ops(
    model: Any,
    inputs: tuple[Any, ...],
    kwargs: dict[str, Any] | None = None,
    *,
    mode: Mode = "inference",
) -> list[OpRecord]:
    """Run ``model(*inputs, **kwargs)`` once through :func:`roofline.diagnose.execute.run_once` (inference: a
    forward under no_grad; training: forward + backward of the summed outputs) and return every aten op it
    executed, in order, with its module, phase, shapes, dtypes, cost and dataflow (the op that produced each tensor
    input, whether it is a parameter or buffer, its layout).

    An exception from the model propagates as run_once raises it (a UserCodeError); the hooks and the dispatch
    mode are removed in every case.

    A torch.compile'd model is counted on its original computation (roofline.diagnose.loader.uncompiled: the same
    math, every aten op seen), its module paths without ``_orig_mod``."""
    from roofline.diagnose.loader import uncompiled

    with uncompiled(model) as original, counting(original, mode) as counted:
        run_once(original, tuple(inputs), dict(kwargs or {}), mode, before_backward=counted.backward_begins)
    return counted.records


class Counting:
    """What :func:`counting` yields: the ops recorded so far, and the devices their tensors were on."""

    def __init__(self, recorder: _Recorder) -> None:
        self._recorder = recorder

    @property
    def records(self) -> list[OpRecord]:
        return self._recorder.records

    def backward_begins(self) -> None:
        """The loss's backward starts now: every op from here on is backward work."""
        self._recorder.tracker.backward_begun = True

    def devices(self) -> list[str]:
        """The devices of the tensors the recorded ops read or wrote ('cpu', 'cuda:0'), in order of first use."""
        return list(dict.fromkeys(device for device, _ in self._recorder.storages))


@contextmanager
def counting(model: Any = None, mode: Mode = "training") -> Iterator[Counting]:
    """Record every aten op run inside the block (the counting pass around any code: a step of a training loop,
    roofline.diagnose.region). ``model``: an nn.Module whose module paths and parameters the records name (None:
    every op in module ''). Yields a :class:`Counting` whose records fill as the block runs (count_ops' value);
    the hooks and the dispatch mode are removed in all cases."""
    load_plugins()  # NB: the roofline.costs entry points, once per process; a failure is one line, never fatal
    tracker = _ModuleTracker(model)
    recorder = _Recorder(tracker, mode, _param_keys(model))
    try:
        tracker.install()
        with recorder.mode(), _eager_flex_attention():
            yield Counting(recorder)
    finally:
        tracker.remove()
        recorder.sources.clear()
        tracker.node_paths.clear()
        tracker._alive.clear()


@contextmanager
def _eager_flex_attention() -> Iterator[None]:
    """Let flex_attention run eagerly under the counting mode.

    NB: called outside torch.compile, flex_attention compiles its own call (backend 'eager', fullgraph), and
    Dynamo refuses to trace under a user dispatch mode ('no compiled frames'). torch's debug switch
    ``_FLEX_ATTENTION_DISABLE_COMPILE_DEBUG`` runs the higher-order op directly instead (the same op reaches the
    mode); it is set only while counting, restored after, and only where flex_attention was imported."""
    module = sys.modules.get("torch.nn.attention.flex_attention")
    flag = "_FLEX_ATTENTION_DISABLE_COMPILE_DEBUG"
    if module is None or not hasattr(module, flag):
        yield
        return
    before = getattr(module, flag)
    setattr(module, flag, True)
    try:
        yield
    finally:
        setattr(module, flag, before)


def uncovered(records: Iterable[OpRecord]) -> list[OpRecord]:
    """The records with no cost (flops or bytes None), in order: what a report lists as uncounted."""
    return [r for r in records if not r.counted]


def uncovered_summary(records: Iterable[OpRecord]) -> dict[str, int]:
    """Uncounted op name -> how many calls, most frequent first."""
    counts: dict[str, int] = {}
    for r in uncovered(records):
        counts[r.op] = counts.get(r.op, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


__all__ = ["Counting", "count_ops", "counting", "uncovered", "uncovered_summary"]

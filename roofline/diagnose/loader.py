"""Loading the user's model file: run it like a script in its own namespace, find the model and its inputs.

Accepted conventions, tried in this order:
  1. ``--entry NAME``: a function ``NAME()`` returning ``(model, inputs)``;
  2. ``class Model(nn.Module)`` with ``get_inputs()`` and ``get_init_inputs()`` (KernelBench style):
     ``Model(*get_init_inputs())`` called on ``get_inputs()``;
  3. a module-level ``model`` with ``example_inputs`` (or ``get_inputs()``).

Inputs may be a tuple/list of positional arguments, a dict of keyword arguments, or a single tensor. The model
and every tensor in the inputs (nested in tuples, lists and dicts) are moved to the device; ``dtype`` casts the
model and the floating inputs (integer inputs, e.g. token ids, are left alone). torch is imported lazily.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roofline.errors import UsageError, UserCodeError, WorkloadError
from roofline.roofs import torch_device as resolve_device  # 'cpu' | 'cuda' | 'cuda:N' (tests patch it here)

RUN_NAME = "__roofline_model__"  # the file's __name__: its `if __name__ == "__main__":` block does not run

CONVENTIONS = (
    "--entry NAME: a function NAME() returning (model, inputs)",
    "class Model(nn.Module) with get_inputs() and get_init_inputs()",
    "a module-level `model` with `example_inputs` (or get_inputs())",
)

DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


@dataclass
class LoadedModel:
    """The model on its device, ready to be called as ``model(*inputs, **kwargs)``."""

    model: Any
    inputs: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    convention: str = ""  # 'entry' | 'class-model' | 'model-variable'
    path: Path = Path()
    compiled: bool = False  # torch.compile'd: an OptimizedModule, a compiled function or module.compile() inside


def conventions_text() -> str:
    return "; ".join(f"({i}) {text}" for i, text in enumerate(CONVENTIONS, 1))


def load_model(
    path: str | os.PathLike[str],
    *,
    entry: str | None = None,
    device: str | None = "cpu",
    dtype: str | None = None,
    argv: Sequence[str] | None = None,
    mode: str = "inference",
) -> LoadedModel:
    """Run ``path`` as a script (``__name__`` is not ``'__main__'``), find its model and inputs by convention,
    move them to ``device`` ('cpu', 'cuda', 'cuda:N'; None: CUDA when available), cast to ``dtype``
    (fp32|bf16|fp16) and put the model in eval() (``mode='inference'``) or train() mode.

    Errors: WorkloadError (missing file, no convention, bad --entry), UserCodeError (the file raised: the
    user's traceback), DeviceError (CUDA asked for but absent; out of memory moving the model), UsageError
    (unknown dtype, device or mode)."""
    file = _check_file(path)
    _check_dtype(dtype)
    if mode not in ("inference", "training"):
        raise UsageError(f"--mode {mode!r}: use inference or training")
    torch_device = resolve_device(device)
    import torch  # noqa: F401  (before the user's file runs: without torch, say which extra, not their traceback)

    with _script_context(file, argv or ()):
        namespace = _run_file(file)
        model, raw_inputs, convention = _find_model(namespace, file, entry, torch_device)
    _check_model(model, file, convention)
    return prepare(model, raw_inputs, device=torch_device, dtype=dtype, mode=mode, convention=convention, path=file)


def prepare(
    model: Any,
    raw_inputs: Any,
    *,
    kwargs: dict[str, Any] | None = None,
    device: str,
    dtype: str | None = None,
    mode: str = "inference",
    convention: str = "",
    path: Path = Path(),
) -> LoadedModel:
    """``model`` and its inputs (a tuple/list of positional arguments, a dict of keyword arguments or one value)
    on ``device`` (a resolved torch device: 'cpu', 'cuda', 'cuda:N'), cast to ``dtype`` (fp32|bf16|fp16: the
    floating parameters, buffers and inputs), the model in eval() (``mode='inference'``) or train() mode.
    ``kwargs``: keyword arguments besides those ``raw_inputs`` gives.

    NB: nn.Module.to() and train() change the module in place (a model file's or the in-process API's caller's
    own object). Errors: UsageError (unknown dtype or mode), DeviceError (out of memory moving the model)."""
    torch_dtype_name = _check_dtype(dtype)
    if mode not in ("inference", "training"):
        raise UsageError(f"--mode {mode!r}: use inference or training")
    import torch

    inputs, given = _split_inputs(raw_inputs)
    kwargs = {**given, **(kwargs or {})}
    cast = getattr(torch, torch_dtype_name) if torch_dtype_name else None
    try:
        if isinstance(model, torch.nn.Module):
            model = model.to(device)
            if cast is not None:
                model = model.to(cast)  # casts floating parameters and buffers only
            model.train(mode == "training")
        inputs = tuple(_move(x, device, cast) for x in inputs)
        kwargs = {key: _move(value, device, cast) for key, value in kwargs.items()}
    except Exception as exc:
        from roofline.diagnose.profile import out_of_memory_error
        from roofline.errors import is_out_of_memory

        if is_out_of_memory(exc):
            raise out_of_memory_error(f"moving the model and inputs to {device}") from None
        raise
    return LoadedModel(
        model=model, inputs=inputs, kwargs=kwargs, convention=convention, path=path, compiled=is_compiled(model)
    )


# ------------------------------------------------------------------------------------------------ compiled models


def _is_optimized(value: Any) -> bool:
    """A torch._dynamo OptimizedModule (what ``torch.compile(module)`` returns): it wraps ``_orig_mod``."""
    import torch

    return isinstance(value, torch.nn.Module) and isinstance(getattr(value, "_orig_mod", None), torch.nn.Module)


def is_compiled(model: Any) -> bool:
    """Whether ``model`` runs through torch.compile: an OptimizedModule (``torch.compile(model)``), a compiled
    function (``torch.compile(fn)``: it keeps ``_torchdynamo_orig_callable``), or an nn.Module the file compiled
    itself, in place (``model.compile()``) or in a submodule (``self.block = torch.compile(block)``)."""
    import torch

    if _is_optimized(model) or callable(getattr(model, "_torchdynamo_orig_callable", None)):
        return True
    if isinstance(model, torch.nn.Module):
        return any(
            _is_optimized(module) or getattr(module, "_compiled_call_impl", None) is not None
            for module in model.modules()
        )
    return False


@contextmanager
def uncompiled(model: Any) -> Iterator[Any]:
    """The original computation of a compiled ``model`` (the math is the same; every aten op runs eagerly, so a
    dispatch mode sees them all): an OptimizedModule's ``_orig_mod``, a compiled function's original; inside an
    nn.Module, compiled submodules swapped for their originals and ``module.compile()``'s compiled call switched
    off. Everything is put back on exit. (NB: running a compiled model under a dispatch mode instead, even with
    dynamo disabled, leaves it running eagerly afterwards: the timing pass would time eager code.)"""
    import torch

    original = model
    while True:
        if _is_optimized(original):
            original = original._orig_mod
        elif callable(getattr(original, "_torchdynamo_orig_callable", None)) and not isinstance(
            original, torch.nn.Module
        ):
            original = original._torchdynamo_orig_callable
        else:
            break
    swapped: list[tuple[Any, str, Any]] = []  # (parent, name, the compiled child)
    switched: list[tuple[Any, Any]] = []  # (module, its compiled call)
    try:
        if isinstance(original, torch.nn.Module):
            stack = [original]
            while stack:
                module = stack.pop()
                if getattr(module, "_compiled_call_impl", None) is not None:
                    switched.append((module, module._compiled_call_impl))
                    module._compiled_call_impl = None
                for name, child in list(module._modules.items()):
                    if child is None:
                        continue
                    plain = child
                    while _is_optimized(plain):
                        plain = plain._orig_mod
                    if plain is not child:
                        swapped.append((module, name, child))
                        module._modules[name] = plain
                    stack.append(plain)
        yield original
    finally:
        for parent, name, child in reversed(swapped):
            parent._modules[name] = child
        for module, call in reversed(switched):
            module._compiled_call_impl = call


# ------------------------------------------------------------------------------------------------ checks


def _check_file(path: str | os.PathLike[str]) -> Path:
    file = Path(path).expanduser()
    if not file.exists():
        raise WorkloadError(f"model file {str(path)!r} not found")
    if not file.is_file():
        raise WorkloadError(f"model file {str(path)!r} is not a file")
    if file.suffix != ".py":
        raise WorkloadError(f"model file {str(path)!r} is not a Python file (.py)")
    return file.resolve()


def _check_dtype(dtype: str | None) -> str | None:
    if dtype is None:
        return None
    from roofline.dtypes import canonical

    try:
        name = canonical(dtype)
    except UsageError:
        name = ""
    if name not in DTYPES:
        raise UsageError(f"--dtype {dtype!r}: use one of {', '.join(DTYPES)}")
    return DTYPES[name]


# ------------------------------------------------------------------------------------------------ running


@contextmanager
def _script_context(file: Path, argv: Sequence[str]) -> Iterator[None]:
    """sys.argv and sys.path[0] as for ``python FILE ARGV...``; both restored afterwards."""
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [str(file), *argv]
    sys.path.insert(0, str(file.parent))
    try:
        yield
    finally:
        sys.argv = saved_argv
        sys.path[:] = saved_path


def _traceback_from(exc: BaseException, file: Path) -> str:
    """The user's traceback: from the first frame in their file (runpy and our frames dropped)."""
    from roofline.diagnose.execute import user_traceback

    tb = exc.__traceback__
    while tb is not None and not _same_file(tb.tb_frame.f_code.co_filename, file):
        tb = tb.tb_next
    if tb is None:  # no frame of theirs (a SyntaxError, which names its file and line itself): drop ours
        tb = exc.__traceback__
        while tb is not None and _is_ours(tb.tb_frame.f_code.co_filename):
            tb = tb.tb_next
    return user_traceback(exc.with_traceback(tb), str(file))


def _same_file(filename: str, file: Path) -> bool:
    try:
        return Path(filename).resolve() == file
    except (OSError, ValueError):
        return False


def _is_ours(filename: str) -> bool:
    name = filename.replace("\\", "/")
    return "/roofline/" in name or name.endswith("runpy.py") or name == "<frozen runpy>"


def _call_user(what: str, fn: Callable[[], Any], file: Path) -> Any:
    """``fn()`` inside the user-code boundary (roofline.diagnose.execute.user_code): an exception, SystemExit or
    os._exit() becomes a UserCodeError naming ``what``, with the user's traceback from their file."""
    from roofline.diagnose.execute import user_code

    with user_code(what, trace=lambda exc: _traceback_from(exc, file)):
        return fn()


def _build(what: str, fn: Callable[[], Any], file: Path, device: str) -> Any:
    """``fn()`` -- the file's Model(...), get_inputs(), get_init_inputs() or --entry function -- with ``device``
    (a CUDA device) as torch's default device, so that parameters and inputs are made where they will run instead
    of on the CPU and copied (on an H100 the load stage of two files that make large random inputs took 5.8
    and 6.7 s of a diagnose). Code of the file that cannot run so (a CPU random generator, .numpy()) is run again
    as before, on the CPU: its error, if it fails there too, is the one shown. On the CPU: ``fn()`` as it is."""
    if device.startswith("cuda"):
        try:
            return _call_user(what, lambda: _on_default_device(device, fn), file)
        except UserCodeError:
            pass  # NB: again without the default device (a second run of the file's function)
    return _call_user(what, fn, file)


def _on_default_device(device: str, fn: Callable[[], Any]) -> Any:
    import torch

    with torch.device(device):
        return fn()


def _run_file(file: Path) -> dict[str, Any]:
    import runpy

    return _call_user(file.name, lambda: runpy.run_path(str(file), run_name=RUN_NAME), file)


# ------------------------------------------------------------------------------------------------ conventions


def _find_model(namespace: dict[str, Any], file: Path, entry: str | None, device: str = "cpu") -> tuple[Any, Any, str]:
    name = file.name
    if entry is not None:
        fn = namespace.get(entry)
        if fn is None:
            found = sorted(k for k, v in namespace.items() if callable(v) and not k.startswith("_"))
            listing = f" (its functions and classes: {', '.join(found[:12])})" if found else ""
            raise WorkloadError(f"--entry {entry}: {name} defines no {entry!r}{listing}")
        if not callable(fn):
            raise WorkloadError(f"--entry {entry}: {entry!r} in {name} is a {type(fn).__name__}, not a function")
        result = _build(f"{entry}() in {name}", fn, file, device)
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            raise WorkloadError(
                f"--entry {entry}: {entry}() in {name} must return (model, inputs), got {_describe(result)}"
            )
        return result[0], result[1], "entry"

    model_class, get_inputs = namespace.get("Model"), namespace.get("get_inputs")
    # NB: a file that defines class Model and also compiles an instance (model = torch.compile(Model())) runs the
    # compiled one: that is the model the file's author times
    compiled_variable = "model" in namespace and is_compiled(namespace["model"])
    if isinstance(model_class, type) and callable(get_inputs) and not compiled_variable:
        get_init = namespace.get("get_init_inputs")
        init = _build(f"get_init_inputs() in {name}", get_init, file, device) if callable(get_init) else ()
        args, kwargs = _split_inputs(() if init is None else init)
        model = _build(f"Model(*get_init_inputs()) in {name}", lambda: model_class(*args, **kwargs), file, device)
        inputs = _build(f"get_inputs() in {name}", get_inputs, file, device)
        return model, inputs, "class-model"

    if "model" in namespace:
        if "example_inputs" in namespace:
            return namespace["model"], namespace["example_inputs"], "model-variable"
        if callable(get_inputs):
            return namespace["model"], _build(f"get_inputs() in {name}", get_inputs, file, device), "model-variable"
        raise WorkloadError(
            f"{name} defines `model` but neither `example_inputs` nor get_inputs(): accepted conventions: "
            f"{conventions_text()}"
        )

    hint = ""
    if isinstance(model_class, type):
        hint = " (it defines class Model but no get_inputs())"
    elif callable(get_inputs):
        hint = " (it defines get_inputs() but neither class Model nor `model`)"
    raise WorkloadError(f"{name} has no model to run{hint}: accepted conventions: {conventions_text()}")


def _check_model(model: Any, file: Path, convention: str) -> None:
    if not callable(model):
        raise WorkloadError(
            f"{file.name}: the model ({convention}) is a {type(model).__name__}, not an nn.Module or callable"
        )


def _describe(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    return f"a {type(value).__name__}"


def _split_inputs(raw: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Positional args (tuple/list, or one value) or keyword args (a dict with string keys)."""
    if isinstance(raw, dict) and all(isinstance(key, str) for key in raw):
        return (), dict(raw)
    if isinstance(raw, (tuple, list)) and not hasattr(raw, "_fields"):
        return tuple(raw), {}
    return (raw,), {}


def _move(value: Any, device: str, dtype: Any) -> Any:
    """``value`` with every tensor in it on ``device``; floating tensors cast to ``dtype`` when given."""
    import torch

    if isinstance(value, torch.Tensor):
        if dtype is not None and value.is_floating_point():
            return value.to(device=device, dtype=dtype)
        return value.to(device)
    if isinstance(value, dict):
        moved = {key: _move(item, device, dtype) for key, item in value.items()}
        try:
            return moved if type(value) is dict else type(value)(moved)
        except TypeError:  # a dict subclass that cannot be built from a dict (defaultdict): a plain dict
            return moved
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # namedtuple
        return type(value)(*(_move(item, device, dtype) for item in value))
    if isinstance(value, (tuple, list)):
        return type(value)(_move(item, device, dtype) for item in value)
    return value


__all__ = [
    "CONVENTIONS",
    "RUN_NAME",
    "LoadedModel",
    "conventions_text",
    "is_compiled",
    "load_model",
    "prepare",
    "resolve_device",
    "uncompiled",
]

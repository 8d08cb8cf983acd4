"""Runners: one real torch op per workload kind, ready to be timed.

``build(kind, params, torch=..., device=...)`` allocates the inputs once on the device (random data, never
zeros: tensor cores run faster on zeros), and returns a :class:`Bench` whose ``fn`` is the zero-argument
call to time. ``Bench.prepare()`` poisons the preallocated outputs with NaN (where the op has an ``out=``
form), runs the op once and checks that the output was written, is finite and is not all zero;
``Bench.check()`` repeats the check after timing. A failed check raises :class:`OutputCheckError` naming
the op; an op that cannot run on this device or dtype raises :class:`UnsupportedOpError`.

What runs, per kind (the cost model of the same kind counts its FLOPs and bytes):
  gemm         torch.matmul (batch 1) / torch.bmm into a preallocated C; fp8 via torch._scaled_mm (CUDA,
               compute capability 8.9+); int8 via torch._int_mm (int32 C); fp32 honours --tf32.
  attention    fused: torch.nn.functional.scaled_dot_product_attention (is_causal; GQA via enable_gqa);
               naive: baddbmm(Q, K^T, alpha=1/sqrt(d)) -> [masked_fill_ when causal] -> softmax -> bmm(P, V).
  elementwise  a table mapping every op of roofline.costs.elementwise to its torch call (``ELEMENTWISE``).
  norm         F.layer_norm, F.rms_norm (a manual fallback on old torch), softmax over the last dim.
  conv2d       F.conv2d (NCHW).
torch is never imported here: the caller passes the module in.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from roofline.errors import RooflineError, WorkloadError

#: dtype names of roofline -> attribute of torch
TORCH_DTYPES = {
    "fp64": "float64",
    "fp32": "float32",
    "tf32": "float32",
    "fp16": "float16",
    "bf16": "bfloat16",
    "fp8": "float8_e4m3fn",
    "int8": "int8",
}

#: value written into preallocated integer outputs before the first call (no int8 product can reach it)
POISON_INT = -(2**31) + 7


class UnsupportedOpError(WorkloadError):
    """The op cannot run here (dtype, device or shape constraints of the torch kernel)."""


class OutputCheckError(RooflineError):
    """The op ran but its output was not written, is not finite, or is all zero."""


class Bench:
    """A ready-to-time op: ``fn()`` runs it once on preallocated inputs."""

    def __init__(
        self,
        op: str,
        fn: Callable[[], object],
        outputs: Callable[[], list[Any]],
        *,
        torch: Any,
        device: Any,
        poison: list[Any] | None = None,
        settings: Callable[[], Any] | None = None,
        notes: list[str] | None = None,
    ) -> None:
        self.op = op
        self.fn: Callable[[], object] | None = fn
        self.notes = list(notes or [])
        self._outputs: Callable[[], list[Any]] | None = outputs
        self._torch = torch
        self._device = device
        self._poison = list(poison or [])
        self._settings = settings

    @contextmanager
    def active(self) -> Iterator[None]:
        """Math-mode flags (TF32 on or off) in force while the op is prepared and timed, then restored."""
        if self._settings is None:
            yield
        else:
            with self._settings():
                yield

    def _sync(self) -> None:
        if getattr(self._device, "type", "cpu") == "cuda":
            self._torch.cuda.synchronize(self._device)

    def prepare(self) -> None:
        """Poison preallocated outputs, run once, check the output was written."""
        for tensor in self._poison:
            _poison(self._torch, tensor)
        assert self.fn is not None, "released"
        self.fn()
        self._sync()
        self.check()

    def check(self) -> None:
        assert self._outputs is not None, "released"
        self._sync()
        for tensor in self._outputs():
            check_output(self._torch, self.op, tensor)

    def release(self) -> None:
        """Drop every tensor reference (the closures hold the inputs)."""
        self.fn = None
        self._outputs = None
        self._poison = []
        self._settings = None


# ----------------------------------------------------------------------------------------------- helpers


def torch_dtype(torch: Any, name: str) -> Any:
    attr = TORCH_DTYPES.get(name)
    if attr is None or not hasattr(torch, attr):
        raise UnsupportedOpError(f"no torch dtype runs {name} tensors: pick one of {', '.join(TORCH_DTYPES)}")
    return getattr(torch, attr)


_SEEDS = itertools.count(1)


def _generator(torch: Any, device: Any) -> Any:
    gen = torch.Generator(device=device)
    gen.manual_seed(next(_SEEDS))  # a new seed per tensor: Q, K and V differ
    return gen


def random(
    torch: Any, shape: tuple[int, ...], dtype: str, device: Any, *, scale: float = 1.0, positive: bool = False
) -> Any:
    """Random data of ``dtype`` on ``device``: normal (times ``scale``), or in [0.5, 0.5 + |N|] when positive;
    integers uniform in [-8, 8). Never all zeros."""
    gen = _generator(torch, device)
    target = torch_dtype(torch, dtype)
    if dtype == "int8":
        return torch.randint(-8, 8, shape, generator=gen, device=device, dtype=target)
    data = torch.randn(shape, generator=gen, device=device, dtype=torch.float32)
    if positive:
        data = data.abs_().add_(0.5)
    if scale != 1.0:
        data.mul_(scale)
    return data.to(target)


def _poison(torch: Any, tensor: Any) -> None:
    if tensor.is_floating_point():
        tensor.fill_(float("nan"))
    elif tensor.dtype == torch.bool:
        pass  # a mask cannot be poisoned; the value output beside it is
    else:
        tensor.fill_(POISON_INT)


def check_output(torch: Any, op: str, tensor: Any) -> None:
    """Raise OutputCheckError unless ``tensor`` is finite, written (no poison left) and not all zero."""
    if tensor is None:
        raise OutputCheckError(f"{op}: produced no output")
    if tensor.dtype == torch.bool:
        return
    if tensor.is_floating_point():
        values = tensor.float() if tensor.element_size() == 1 else tensor  # fp8: few kernels take it
        if not bool(torch.isfinite(values).all()):
            raise OutputCheckError(f"{op}: output has NaN or inf (not written, or overflowed)")
    elif bool((tensor == POISON_INT).any()):
        raise OutputCheckError(f"{op}: output not written (poison value left)")
    else:
        values = tensor
    if not bool((values != 0).any()):
        raise OutputCheckError(f"{op}: output is all zero")


def _aten_out(torch: Any, name: str) -> Any | None:
    """``torch.ops.aten.<name>.out`` where this torch has it (out= forms avoid an allocation per call)."""
    try:
        packet = getattr(torch.ops.aten, name)
        return packet.out if "out" in packet.overloads() else None
    except (AttributeError, RuntimeError):
        return None


def _fresh(op: Callable[[], Any]) -> tuple[Callable[[], object], Callable[[], list[Any]]]:
    """fn storing the newest result of ``op`` (an op without ``out=``) and the getter of that result."""
    holder: list[Any] = [None]

    def fn() -> None:
        holder[0] = op()

    return fn, lambda: [holder[0]]


def fp32_math(torch: Any, tf32: bool) -> Callable[[], Any]:
    """A context factory setting fp32 matmul and cuDNN convolution to TF32 or IEEE fp32, restored after."""

    @contextmanager
    def settings() -> Iterator[None]:
        old_matmul = torch.get_float32_matmul_precision()
        cudnn = getattr(torch.backends, "cudnn", None)
        conv = getattr(cudnn, "conv", None)
        new_api = conv is not None and hasattr(conv, "fp32_precision")
        old_conv = conv.fp32_precision if new_api else getattr(cudnn, "allow_tf32", None)
        torch.set_float32_matmul_precision("high" if tf32 else "highest")
        if new_api:
            conv.fp32_precision = "tf32" if tf32 else "ieee"
        elif old_conv is not None:
            cudnn.allow_tf32 = tf32
        try:
            yield
        finally:
            torch.set_float32_matmul_precision(old_matmul)
            if new_api:
                conv.fp32_precision = old_conv
            elif old_conv is not None:
                cudnn.allow_tf32 = old_conv

    return settings


def _is_cuda(device: Any) -> bool:
    return getattr(device, "type", str(device)) == "cuda"


# -------------------------------------------------------------------------------------------------- gemm


def gemm(torch: Any, p: Any, device: Any) -> Bench:
    if p.dtype == "fp8":
        return _gemm_fp8(torch, p, device)
    if p.dtype == "int8":
        return _gemm_int8(torch, p, device)
    out_dtype = p.out_dtype or p.dtype
    if out_dtype != p.dtype:
        raise UnsupportedOpError(
            f"gemm {p.dtype} with out_dtype {out_dtype}: torch.matmul writes C in its input dtype "
            "(out_dtype applies to fp8 via torch._scaled_mm): drop out_dtype"
        )
    shape = (p.m, p.k) if p.batch == 1 else (p.batch, p.m, p.k)
    scale = p.k**-0.25  # keeps C ~ N(0, 1) whatever k
    a = random(torch, shape, p.dtype, device, scale=scale)
    b = random(torch, (p.k, p.n) if p.batch == 1 else (p.batch, p.k, p.n), p.dtype, device, scale=scale)
    c = torch.empty((p.m, p.n) if p.batch == 1 else (p.batch, p.m, p.n), dtype=a.dtype, device=device)
    op = torch.matmul if p.batch == 1 else torch.bmm
    name = "torch.matmul" if p.batch == 1 else "torch.bmm"

    def fn() -> None:
        op(a, b, out=c)

    notes = []
    settings = None
    if p.dtype == "fp32":
        settings = fp32_math(torch, p.tf32)
        notes.append(f"fp32 matmul with TF32 {'on' if p.tf32 else 'off'}")
    return Bench(
        f"gemm {name} {p.dtype}",
        fn,
        lambda: [c],
        torch=torch,
        device=device,
        poison=[c],
        settings=settings,
        notes=notes,
    )


def _gemm_fp8(torch: Any, p: Any, device: Any) -> Bench:
    if not _is_cuda(device) or not hasattr(torch, "_scaled_mm"):
        raise UnsupportedOpError("fp8 GEMM runs on CUDA only (torch._scaled_mm): use --device cuda or another --dtype")
    major, minor = torch.cuda.get_device_capability(device)
    if (major, minor) < (8, 9):
        raise UnsupportedOpError(
            f"fp8 GEMM needs compute capability 8.9 or newer (Ada, Hopper, Blackwell); this GPU is {major}.{minor}"
        )
    if p.batch != 1:
        raise UnsupportedOpError("fp8 GEMM runs unbatched only (torch._scaled_mm): use batch 1")
    if p.m % 16 or p.n % 16 or p.k % 16:
        raise UnsupportedOpError(f"fp8 GEMM (torch._scaled_mm) needs m, n, k multiples of 16; got {p.label()}")
    a = random(torch, (p.m, p.k), "fp8", device)
    b = random(torch, (p.n, p.k), "fp8", device).t()  # column-major B, as cuBLASLt fp8 requires
    one = torch.ones((), dtype=torch.float32, device=device)
    out_dtype = torch_dtype(torch, p.out_dtype or "bf16")
    fn, outputs = _fresh(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=out_dtype))
    return Bench("gemm torch._scaled_mm fp8", fn, outputs, torch=torch, device=device)


def _gemm_int8(torch: Any, p: Any, device: Any) -> Bench:
    if not hasattr(torch, "_int_mm"):
        raise UnsupportedOpError("int8 GEMM needs torch._int_mm (torch 2.1 or newer)")
    if p.batch != 1:
        raise UnsupportedOpError("int8 GEMM runs unbatched only (torch._int_mm): use batch 1")
    if _is_cuda(device) and (p.m <= 16 or p.k % 8 or p.n % 8):
        raise UnsupportedOpError(f"int8 GEMM (torch._int_mm) needs m > 16 and k, n multiples of 8; got {p.label()}")
    a = random(torch, (p.m, p.k), "int8", device)
    b = random(torch, (p.n, p.k), "int8", device).t()  # column-major B: a row-major one runs ~7x slower on H100
    notes = ["int8 GEMM via torch._int_mm writes an int32 C (the cost model counts C at the output dtype)"]
    out = _aten_out(torch, "_int_mm")
    if out is None:
        fn, outputs = _fresh(lambda: torch._int_mm(a, b))
        return Bench("gemm torch._int_mm int8", fn, outputs, torch=torch, device=device, notes=notes)
    c = torch.empty((p.m, p.n), dtype=torch.int32, device=device)

    def fn() -> None:
        out(a, b, out=c)

    return Bench("gemm torch._int_mm int8", fn, lambda: [c], torch=torch, device=device, poison=[c], notes=notes)


# --------------------------------------------------------------------------------------------- attention


def _sdpa_supports_gqa(torch: Any) -> bool:
    import inspect

    try:
        return "enable_gqa" in inspect.signature(torch.nn.functional.scaled_dot_product_attention).parameters
    except (TypeError, ValueError):  # a builtin without a signature: the docstring names it
        return "enable_gqa" in (torch.nn.functional.scaled_dot_product_attention.__doc__ or "")


def attention(torch: Any, p: Any, device: Any) -> Bench:
    b, h, hkv, sq, skv, d = p.batch, p.heads, p.n_kv_heads, p.seq_q, p.kv_len, p.head_dim
    if p.kv_storage != p.dtype:
        raise UnsupportedOpError(
            f"attention with kv_dtype {p.kv_storage} != dtype {p.dtype}: no built-in kernel; drop kv_dtype"
        )
    q = random(torch, (b, h, sq, d), p.dtype, device)
    k = random(torch, (b, hkv, skv, d), p.dtype, device)
    v = random(torch, (b, hkv, skv, d), p.dtype, device)
    group = h // hkv
    if p.impl == "fused":
        return _attention_fused(torch, p, device, q, k, v, group)
    notes = []
    if group > 1:
        # NB: materialised once, outside the timed region: the cost model reads K and V once per query head.
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        notes.append("naive GQA/MQA: K and V repeated to every query head once, before timing")
    q3 = q.reshape(b * h, sq, d)
    kt = k.reshape(b * h, skv, d).transpose(1, 2)
    v3 = v.reshape(b * h, skv, d)
    scores = torch.empty((b * h, sq, skv), dtype=q.dtype, device=device)
    probs = torch.empty_like(scores)
    out = torch.empty((b * h, sq, d), dtype=q.dtype, device=device)
    ignored = torch.empty((1, 1, 1), dtype=q.dtype, device=device)  # baddbmm's input, unused at beta=0
    scale = 1.0 / math.sqrt(d)
    softmax_out = _aten_out(torch, "_softmax")
    masked = None
    if p.causal:
        # NB: queries aligned to the end of the keys (bottom-right), as the cost model counts pairs.
        rows = torch.arange(sq, device=device).unsqueeze(1)
        cols = torch.arange(skv, device=device).unsqueeze(0)
        masked = cols > rows + (skv - sq)
        notes.append("naive causal: masked_fill_ adds one pass over the scores that the cost model does not count")

    def fn() -> None:
        torch.baddbmm(ignored, q3, kt, beta=0.0, alpha=scale, out=scores)
        if masked is not None:
            scores.masked_fill_(masked, float("-inf"))
        if softmax_out is not None:
            softmax_out(scores, -1, False, out=probs)
        else:
            probs.copy_(torch.softmax(scores, dim=-1))
        torch.bmm(probs, v3, out=out)

    return Bench(
        f"attention naive (baddbmm, softmax, bmm) {p.dtype}",
        fn,
        lambda: [out],
        torch=torch,
        device=device,
        poison=[out],
        notes=notes,
    )


def _attention_fused(torch: Any, p: Any, device: Any, q: Any, k: Any, v: Any, group: int) -> Bench:
    sdpa = torch.nn.functional.scaled_dot_product_attention
    kwargs: dict[str, Any] = {}
    notes = []
    if p.causal:
        if p.seq_q == p.kv_len:
            kwargs["is_causal"] = True
        else:
            from torch.nn.attention.bias import causal_lower_right

            kwargs["attn_mask"] = causal_lower_right(p.seq_q, p.kv_len)
    if group > 1:
        if _sdpa_supports_gqa(torch):
            kwargs["enable_gqa"] = True
        else:
            k = k.repeat_interleave(group, dim=1)
            v = v.repeat_interleave(group, dim=1)
            notes.append("this torch's SDPA has no enable_gqa: K and V repeated to every query head before timing")
    fn, outputs = _fresh(lambda: sdpa(q, k, v, **kwargs))
    return Bench(
        f"attention fused (scaled_dot_product_attention) {p.dtype}",
        fn,
        outputs,
        torch=torch,
        device=device,
        notes=notes,
    )


# ------------------------------------------------------------------------------------------- elementwise

# op -> (torch call name, how, kwargs): 'out' calls torch.<name>(*inputs, out=y); 'aten' calls
# torch.ops.aten.<name>.out (a structured kernel writing y); 'copy' is y.copy_(x); 'scalar' passes a Python scalar
# as the second input; 'relu' is torch.clamp_min(x, 0, out=y); 'dropout' is F.dropout (training).
# NB: every out= form used here is a real kernel writing into y, not a generated "compute, then copy" wrapper.
ELEMENTWISE: dict[str, tuple[str, str, dict[str, Any]]] = {
    "relu": ("clamp_min", "relu", {}),
    "gelu": ("gelu", "aten", {}),
    "gelu_tanh": ("gelu", "aten", {"approximate": "tanh"}),
    "silu": ("silu", "aten", {}),
    "sigmoid": ("sigmoid", "out", {}),
    "tanh": ("tanh", "out", {}),
    "exp": ("exp", "out", {}),
    "log": ("log", "out", {}),
    "sqrt": ("sqrt", "out", {}),
    "rsqrt": ("rsqrt", "out", {}),
    "neg": ("neg", "out", {}),
    "abs": ("abs", "out", {}),
    "square": ("square", "out", {}),
    "add": ("add", "out", {}),
    "sub": ("sub", "out", {}),
    "mul": ("mul", "out", {}),
    "div": ("div", "out", {}),
    "maximum": ("maximum", "out", {}),
    "add_scalar": ("add", "scalar", {}),
    "mul_scalar": ("mul", "scalar", {}),
    "copy": ("copy_", "copy", {}),
    "dropout": ("dropout", "dropout", {}),
}

#: ops whose input must be positive to give finite outputs
POSITIVE_INPUT = frozenset({"log", "sqrt", "rsqrt"})
DROPOUT_P = 0.1


def elementwise(torch: Any, p: Any, device: Any) -> Bench:
    from roofline.costs.elementwise import arity

    if p.op not in ELEMENTWISE:
        raise UnsupportedOpError(f"element-wise op {p.op!r} has no torch mapping in roofline.bench.runners")
    name, how, kwargs = ELEMENTWISE[p.op]
    x = random(torch, (p.numel,), p.dtype, device, positive=p.op in POSITIVE_INPUT)
    y = torch.empty_like(x)
    inputs = [x]
    if arity(p.op) == 2:
        inputs.append(random(torch, (p.numel,), p.dtype, device, positive=p.op == "div", scale=0.5))
    label = f"elementwise {p.op} {p.dtype}"
    if how == "copy":

        def copy_fn() -> None:
            y.copy_(x)

        return Bench(label + " (copy_)", copy_fn, lambda: [y], torch=torch, device=device, poison=[y])
    if how == "dropout":
        # NB: F.dropout (native_dropout on CUDA: output and keep-mask in one kernel). Its out= form is generated
        # (compute, then copy), so the allocating form is the one that moves the counted bytes.
        fn, outputs = _fresh(lambda: torch.nn.functional.dropout(x, DROPOUT_P, training=True))
        return Bench(label + f" (F.dropout p={DROPOUT_P})", fn, outputs, torch=torch, device=device)
    if how == "relu":  # NB: clamp_min(x, 0): relu's out= form is generated (relu, then a copy)

        def relu_fn() -> None:
            torch.clamp_min(x, 0.0, out=y)

        return Bench(label + " (torch.clamp_min)", relu_fn, lambda: [y], torch=torch, device=device, poison=[y])
    if how == "aten":
        out = _aten_out(torch, name)
        if out is None:  # an old torch: the functional form, allocating its output
            functional = getattr(torch.nn.functional, name)
            fn, outputs = _fresh(lambda: functional(x, **kwargs))
            return Bench(label + f" (F.{name})", fn, outputs, torch=torch, device=device)

        def aten_fn() -> None:
            out(x, **kwargs, out=y)

        return Bench(label + f" (aten.{name}.out)", aten_fn, lambda: [y], torch=torch, device=device, poison=[y])
    call = getattr(torch, name)
    args: list[Any] = [*inputs, 1.5] if how == "scalar" else inputs

    def out_fn() -> None:
        call(*args, out=y)

    return Bench(label + f" (torch.{name})", out_fn, lambda: [y], torch=torch, device=device, poison=[y])


# -------------------------------------------------------------------------------------------------- norm

EPS = 1e-5


def norm(torch: Any, p: Any, device: Any) -> Bench:
    F = torch.nn.functional
    x = random(torch, (p.rows, p.cols), p.dtype, device)
    label = f"norm {p.op} {p.dtype}"
    if p.op == "softmax":
        y = torch.empty_like(x)
        out = _aten_out(torch, "_softmax")
        if out is None:
            fn, outputs = _fresh(lambda: torch.softmax(x, dim=-1))
            return Bench(label + " (torch.softmax)", fn, outputs, torch=torch, device=device)

        def softmax_fn() -> None:
            out(x, -1, False, out=y)

        return Bench(label + " (aten._softmax.out)", softmax_fn, lambda: [y], torch=torch, device=device, poison=[y])
    weight = random(torch, (p.cols,), p.dtype, device, positive=True) if p.affine else None
    shape = (p.cols,)
    if p.op == "layernorm":
        bias = random(torch, (p.cols,), p.dtype, device) if p.affine else None
        fn, outputs = _fresh(lambda: F.layer_norm(x, shape, weight, bias, EPS))
        return Bench(label + " (F.layer_norm)", fn, outputs, torch=torch, device=device)
    if hasattr(F, "rms_norm"):
        fn, outputs = _fresh(lambda: F.rms_norm(x, shape, weight, EPS))
        return Bench(label + " (F.rms_norm)", fn, outputs, torch=torch, device=device)

    def manual() -> Any:
        y = x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + EPS).to(x.dtype)
        return y * weight if weight is not None else y

    fn, outputs = _fresh(manual)
    notes = ["this torch has no F.rms_norm: a manual RMSNorm of several kernels (more bytes than counted)"]
    return Bench(label + " (manual rmsnorm)", fn, outputs, torch=torch, device=device, notes=notes)


# ------------------------------------------------------------------------------------------------ conv2d


def conv2d(torch: Any, p: Any, device: Any) -> Bench:
    fan_in = (p.in_channels // p.groups) * p.kernel_size**2
    x = random(torch, (p.batch, p.in_channels, p.height, p.width), p.dtype, device)
    w = random(
        torch,
        (p.out_channels, p.in_channels // p.groups, p.kernel_size, p.kernel_size),
        p.dtype,
        device,
        scale=fan_in**-0.5,
    )
    bias = random(torch, (p.out_channels,), p.dtype, device) if p.bias else None
    conv = torch.nn.functional.conv2d
    fn, outputs = _fresh(lambda: conv(x, w, bias, p.stride, p.padding, p.dilation, p.groups))
    settings = fp32_math(torch, p.tf32) if p.dtype == "fp32" else None
    notes = [f"fp32 convolution with TF32 {'on' if p.tf32 else 'off'}"] if p.dtype == "fp32" else []
    return Bench(f"conv2d F.conv2d {p.dtype}", fn, outputs, torch=torch, device=device, settings=settings, notes=notes)


# -------------------------------------------------------------------------------------------------- entry

RUNNERS: dict[str, Callable[[Any, Any, Any], Bench]] = {
    "gemm": gemm,
    "attention": attention,
    "elementwise": elementwise,
    "norm": norm,
    "conv2d": conv2d,
}


def build(kind: str, params: Any, *, torch: Any, device: Any) -> Bench:
    """A Bench for workload ``kind`` with validated ``params`` on ``device`` (a torch.device or its name)."""
    runner = RUNNERS.get(kind)
    if runner is None:
        raise UnsupportedOpError(f"bench has no runner for {kind!r}: it runs {', '.join(RUNNERS)} (and decode)")
    return runner(torch, params, torch.device(device) if isinstance(device, str) else device)

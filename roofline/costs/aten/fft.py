"""FFTs (``_fft_r2c``, ``_fft_c2r``, ``_fft_c2c``, forward and inverse; their backward is these ops again) and
the complex constructors: the radix-2 count 5 N log2 N per complex transform of length N, half that for a real
one, separable over the transformed dims."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from roofline.costs.aten.call import Call, OpCost, compute_dtype, dtype_name, io_bytes
from roofline.costs.aten.registry import Example, register

_REAL_OF_COMPLEX = {"complex32": "fp16", "complex64": "fp32", "complex128": "fp64"}


def _real_dtype(t: Any) -> str:
    """The roof dtype of an FFT operand: a complex tensor computes in its real component's dtype."""
    name = str(t.dtype).removeprefix("torch.")
    return _REAL_OF_COMPLEX.get(name) or dtype_name(t.dtype)


def c2c_flops(numel: int, lengths: Iterable[int]) -> float:
    """FLOPs of complex transforms over ``numel`` complex elements along dims of ``lengths``: separable, each dim
    of length N does numel / N transforms of 5 N log2 N, i.e. 5 numel log2 N; summed over the dims.

    NB: 5 N log2 N is the standard radix-2 count; used for any N (mixed-radix and Bluestein lengths cost
    somewhat more or less); a length-1 dim costs 0."""
    return sum(5 * numel * math.log2(n) for n in lengths if n > 1)


def _dims(call: Call, t: Any) -> list[int]:
    return [int(d) % max(1, t.dim()) for d in call.get("dim", [])]


def _normalization_flops(call: Call, out: Any) -> int:
    # NB: normalization (1/n or 1/sqrt(n); argument != 0): 1 multiply per real output value (2 per complex
    # element).
    if not int(call.get("normalization", 0)):
        return 0
    return int(out.numel()) * (2 if out.is_complex() else 1)


@register("fft", "_fft_c2c")
def _fft_c2c(call: Call) -> OpCost:
    # NB: c2c_flops over the transformed dims (forward and inverse alike) + normalization; input read once,
    # output written once (complex elements are 2 reals: their element size counts both).
    x, out = call.tensor("self"), call.out0
    lengths = [int(x.shape[d]) for d in _dims(call, x)]
    flops = round(c2c_flops(int(x.numel()), lengths)) + _normalization_flops(call, out)
    return OpCost(flops, io_bytes(call), _real_dtype(x), "vector",
                  f"_fft_c2c: 5 N log2 N per length-N complex transform over dims {lengths}")  # fmt: skip


@register("fft", "_fft_r2c")
def _fft_r2c(call: Call) -> OpCost:
    # NB: the last transformed dim (length N) is a real transform: 2.5 N log2 N per transform, i.e. 2.5 x the
    # real input numel x log2 N; the other transformed dims are complex transforms of the half spectrum
    # (N // 2 + 1 along the last dim), c2c_flops of that size. onesided=False writes the full spectrum (the
    # mirrored half is a copy, not counted); + normalization. Input read once, output written once.
    x, out = call.tensor("self"), call.out0
    dims = _dims(call, x)
    last = int(x.shape[dims[-1]])
    half = int(x.numel()) // max(1, last) * (last // 2 + 1)
    flops = 2.5 * int(x.numel()) * math.log2(last) if last > 1 else 0.0
    flops += c2c_flops(half, [int(x.shape[d]) for d in dims[:-1]])
    total = round(flops) + _normalization_flops(call, out)
    return OpCost(total, io_bytes(call), compute_dtype(call), "vector",
                  f"_fft_r2c: 2.5 N log2 N per length-{last} real transform, 5 N log2 N other dims")  # fmt: skip


@register("fft", "_fft_c2r")
def _fft_c2r(call: Call) -> OpCost:
    # NB: the inverse of _fft_r2c: complex transforms of the (half-spectrum) input along all transformed dims
    # but the last (c2c_flops), then a real transform of length last_dim_size along the last: 2.5 x the real
    # output numel x log2 N; + normalization. Input read once, output written once.
    x, out = call.tensor("self"), call.out0
    dims = _dims(call, x)
    last = int(call.get("last_dim_size", 1))
    flops = c2c_flops(int(x.numel()), [int(x.shape[d]) for d in dims[:-1]])
    flops += 2.5 * int(out.numel()) * math.log2(last) if last > 1 else 0.0
    total = round(flops) + _normalization_flops(call, out)
    return OpCost(total, io_bytes(call), _real_dtype(x), "vector",
                  f"_fft_c2r: 5 N log2 N leading dims, 2.5 N log2 N per length-{last} real transform")  # fmt: skip


@register("fft", "complex", "polar")
def _complex(call: Call) -> OpCost:
    # NB: complex(real, imag) interleaves two real tensors: 0 FLOPs, a copy; polar(abs, angle) computes
    # abs*cos(angle), abs*sin(angle): 2 transcendentals + 2 multiplies per element (4). Inputs read once
    # (broadcast dims once), the output written once.
    flops = 4 * int(call.out0.numel()) if call.base == "polar" else 0
    return OpCost(flops, io_bytes(call), compute_dtype(call), "vector",
                  f"{call.base}: {'4 FLOPs per element' if flops else 'an interleaving copy'}")  # fmt: skip


EXAMPLES: dict[str, Example] = {
    # a forward length-8 transform of 4 complex rows; the inverse real transform of 4 half spectra (5) to length 8
    "_fft_c2c": lambda t: ((t.randn(4, 8, dtype=t.complex64), [1], 0, True), {}),
    "_fft_c2r": lambda t: ((t.randn(4, 5, dtype=t.complex64), [1], 0, 8), {}),
}

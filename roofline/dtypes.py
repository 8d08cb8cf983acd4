"""Data types: canonical names, aliases and storage size in bits.

Sizes are in bits so that 4-bit formats stay exact integers (bytes = ceil(numel * bits / 8)).
"""

from __future__ import annotations

from typing import Literal

from roofline.errors import UsageError

DType = Literal["fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "int4", "fp4"]

BITS: dict[str, int] = {
    "fp64": 64,
    "fp32": 32,
    "tf32": 32,  # NB: TF32 is a math mode; operands are stored as fp32
    "fp16": 16,
    "bf16": 16,
    "fp8": 8,
    "int8": 8,
    "int4": 4,
    "fp4": 4,
}

ALIASES: dict[str, str] = {
    "float64": "fp64",
    "double": "fp64",
    "float32": "fp32",
    "float": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "float8": "fp8",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
    "e4m3": "fp8",
    "e5m2": "fp8",
    "fp4_e2m1": "fp4",
    "nvfp4": "fp4",
    "mxfp4": "fp4",
}

INTEGER = frozenset({"int8", "int4"})


def canonical(name: str) -> str:
    """Canonical dtype name for ``name`` (case-insensitive, with aliases), or a UsageError."""
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    if key not in BITS:
        known = ", ".join(BITS)
        raise UsageError(f"unknown dtype {name!r}: use one of {known}")
    return key


def nbytes(numel: int, dtype: str) -> int:
    """Bytes that ``numel`` elements of ``dtype`` occupy (4-bit formats pack two per byte)."""
    return -(-numel * BITS[dtype] // 8)


def ops_unit(dtype: str) -> str:
    """'OP' for integer math (TOPS), 'FLOP' for floating point."""
    return "OP" if dtype in INTEGER else "FLOP"

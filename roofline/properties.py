"""The six optimization properties of the source texts and the techniques each enables."""

from __future__ import annotations

from enum import Enum


class Property(str, Enum):
    ASSOCIATIVITY = "associativity"  # regroup: parallel scan, chunking, online softmax, batching
    SEPARABILITY = "separability"  # factor: low-rank, separable filters, FFT
    LOCALITY = "locality"  # keep data close: fusion, tiling, layout, CUDA graphs
    SPARSITY = "sparsity"  # skip zeros: 2:4 structured sparsity, MoE, pruning
    REDUNDANCY = "redundancy"  # don't repeat or over-represent: batching reuse, caching, lower precision
    SYMMETRY = "symmetry"  # exploit invariance: weight sharing, symmetric kernels


def join(properties: tuple[Property, ...]) -> str:
    return " + ".join(p.value for p in properties)

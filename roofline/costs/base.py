"""Cost values and the registry of shape-only cost formulas.

A cost model maps a workload's parameters (shapes, dtypes) to the kernels it needs, each with its
FLOPs (2 per multiply-add) and compulsory DRAM bytes (each input read once, each output written once).
Where an implementation necessarily moves more (naive attention), the model says so in its notes.
Counts are Python ints, so tests can pin them exactly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from roofline import dtypes
from roofline.errors import UsageError, WorkloadError
from roofline.units import MAX_SIZE

Math = Literal["tensor", "vector"]


@dataclass(frozen=True)
class Kernel:
    """One kernel (or ``count`` identical kernels).

    ``flops`` run on the (dtype, math) roof; ``vector_flops`` are extra element-wise FLOPs inside the
    same kernel (the softmax of fused attention) that run on the vector roof, after the rest. ``link_bytes``: what
    one GPU sends to its peers over the interconnect (a collective such as a tensor-parallel all-reduce), timed
    against the device's peer link.
    """

    name: str
    flops: int
    bytes: int
    dtype: str
    math: Math
    count: int = 1
    vector_flops: int = 0
    tf32: bool = False
    link_bytes: int = 0

    @property
    def total_flops(self) -> int:
        return self.flops + self.vector_flops


@dataclass(frozen=True)
class Cost:
    kind: str
    kernels: tuple[Kernel, ...]
    notes: tuple[str, ...] = ()
    # Named parts of the byte count, for explanations ("weights 16.1 GB of 16.2 GB").
    byte_terms: dict[str, int] = field(default_factory=dict)

    @property
    def flops(self) -> int:
        return sum(k.count * k.total_flops for k in self.kernels)

    @property
    def bytes(self) -> int:
        return sum(k.count * k.bytes for k in self.kernels)

    @property
    def link_bytes(self) -> int:
        """Bytes one GPU sends over the interconnect (collectives), summed over the kernels."""
        return sum(k.count * k.link_bytes for k in self.kernels)

    @property
    def kernel_count(self) -> int:
        return sum(k.count for k in self.kernels)

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else float("inf")

    @property
    def dtype(self) -> str:
        """The dtype of the kernel doing most FLOPs (what the row is 'in')."""
        main = max(self.kernels, key=lambda k: k.count * k.total_flops)
        return main.dtype

    @property
    def math(self) -> Math:
        main = max(self.kernels, key=lambda k: k.count * k.total_flops)
        return main.math


def combine(kind: str, parts: list[Cost], notes: tuple[str, ...] = ()) -> Cost:
    """Concatenate the kernels of several costs (a model step made of layers)."""
    kernels = tuple(k for part in parts for k in part.kernels)
    all_notes = tuple(dict.fromkeys(notes + tuple(n for part in parts for n in part.notes)))
    terms: dict[str, int] = {}
    for part in parts:
        for key, value in part.byte_terms.items():
            terms[key] = terms.get(key, 0) + value
    return Cost(kind=kind, kernels=kernels, notes=all_notes, byte_terms=terms)


def scale(cost: Cost, times: int) -> Cost:
    """``times`` repetitions of ``cost`` (e.g. one layer x n_layers)."""
    kernels = tuple(dataclasses.replace(k, count=k.count * times) for k in cost.kernels)
    return Cost(cost.kind, kernels, cost.notes, {key: v * times for key, v in cost.byte_terms.items()})


class Params(BaseModel):
    """Base of every workload's parameters: strict (unknown keys rejected), dtypes canonicalised."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    #: option names that take a size (sweepable with a comma list)
    sizes: ClassVar[tuple[str, ...]] = ()

    @field_validator("*", mode="before")
    @classmethod
    def _dtype_names(cls, value: Any, info: Any) -> Any:
        if info.field_name and info.field_name.endswith("dtype") and isinstance(value, str):
            try:
                return dtypes.canonical(value)
            except UsageError as exc:  # pydantic reports ValueErrors with the field's name
                raise ValueError(str(exc)) from None
        return value

    def label(self) -> str:
        """Short human label of the shape, e.g. 'm=4096 n=4096 k=4096'."""
        return " ".join(f"{name}={getattr(self, name)}" for name in self.sizes)


@dataclass(frozen=True)
class CostModel:
    kind: str
    params: type[Params]
    formula: Callable[[Any], Cost]
    summary: str

    def __call__(self, params: Params) -> Cost:
        return self.formula(params)

    def parse(self, values: dict[str, Any], source: str = "", strict: bool = False) -> Params:
        """The parameters, validated; ``strict`` (a file's values: pydantic's strict mode) takes no bool or string
        for a number. The command line's values are text converted by their options, so not strict."""
        from roofline.yamlio import describe_validation_error

        where = f"{source}: " if source else ""
        for name, value in values.items():  # what a user gives; the formulas' own products may exceed it
            if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_SIZE:
                raise WorkloadError(f"{where}{self.kind}: {name}: too large: a size is at most 2^62 (about 4.6e18)")
        try:
            return self.params.model_validate(values, strict=strict)
        except ValidationError as exc:
            raise WorkloadError(
                f"{where}{self.kind}: {describe_validation_error(exc, 'docs/cost-models.md')}"
            ) from None


REGISTRY: dict[str, CostModel] = {}


Formula = Callable[[Any], Cost]


def register(kind: str, params: type[Params], summary: str) -> Callable[[Formula], Formula]:
    """Decorator adding a shape-only cost formula to the registry under ``kind``."""

    def decorate(formula: Formula) -> Formula:
        if kind in REGISTRY:
            raise ValueError(f"cost model {kind!r} registered twice")
        REGISTRY[kind] = CostModel(kind, params, formula, summary)
        return formula

    return decorate


def get_model(kind: str) -> CostModel:
    """The cost model of workload ``kind`` among those registered: import roofline.costs.models (which imports every
    formula module, each registering its kinds) to look up a built-in kind."""
    if kind not in REGISTRY:
        raise UsageError(f"unknown workload kind {kind!r}: use one of {', '.join(sorted(REGISTRY))}")
    return REGISTRY[kind]


def cost(kind: str, **values: Any) -> Cost:
    """Cost of workload ``kind`` with the given parameters (the library's one-call entry point)."""
    model = get_model(kind)
    return model(model.parse(values))

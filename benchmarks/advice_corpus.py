"""The advice oracle's corpus: problems generated from rule tables (families x shapes), plus the example models.

Each :class:`Problem` has an id (``FAMILY-SHAPE``, e.g. ``conv2d-c64``, ``conv+mish-stem``, ``model-rnn_loop``),
and builds ``(model, inputs, kwargs)`` on a device: the GPU shape in bf16 on CUDA, or (``quick``) a small CPU-sized
shape in fp32. The tables:

- :data:`MODULES`: one ``torch.nn`` module alone (a family: what to build from a shape) x :data:`MODULE_SHAPES`;
- :data:`CONV_TAILS` x :data:`CONV_CHAIN_SHAPES`: a convolution followed by an activation, norm or pool;
- :data:`LINEAR_TAILS` x :data:`LINEAR_CHAIN_SHAPES`: a Linear followed by an activation, norm or epilogue;
- :data:`EPILOGUES` x their shapes: longer chains (conv + batchnorm + relu, an MLP, a residual block...);
- :data:`SMALL`: a few deliberately small problems (kind 'small', ids ``small-FAMILY-SHAPE``), host-bound on a GPU;
- :func:`example_models`: workloads/models/*.py, loaded by roofline's own loader (large on CUDA, small on the CPU).

The GPU shapes are sized so that each module and chain problem is GPU-bound on an H100: :func:`estimate` (its
eager call op by op on the meta device, at the H100's roofs) gives 0.2-5 ms of kernel time and at most
:data:`MEMORY_LIMIT` bytes for each (tests/test_advice_oracle.py checks every one), where the per-call host time of
a compiled callable (40-100 us) would otherwise decide what compile or CUDA graphs measure.

torch is imported when a problem is built, never by importing this file.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "workloads" / "models"

Shape = dict[str, int]
# an input spec: ("randn", dims) | ("near-one", dims): 1 + 1e-3 randn | ("ids", dims, high): token ids
InputSpec = tuple[Any, ...]
Built = tuple[Any, tuple[Any, ...], dict[str, Any]]

# example models that run in fp32 on the GPU (the others in bf16): benchmarks/diagnose_fixes_gpu.py's FIXES
FP32_MODELS = frozenset({"fp32_matmul", "mamba_scan_naive", "layernorm_few_rows"})


@dataclass(frozen=True)
class Problem:
    """One corpus entry: ``build(device, quick)`` gives ``(model, inputs, kwargs)`` on ``device``."""

    id: str
    family: str
    kind: str  # 'module' | 'chain' | 'model' | 'small' (a deliberately small, host-bound problem)
    gpu: Shape = field(default_factory=dict)
    cpu: Shape = field(default_factory=dict)
    path: Path | None = None  # example models: the file

    def dtype(self, device: str) -> str:
        if not device.startswith("cuda"):
            return "fp32"
        return "fp32" if self.kind == "model" and self.family in FP32_MODELS else "bf16"

    def shape(self, quick: bool) -> Shape:
        return self.cpu if quick else self.gpu

    def build(self, device: str, quick: bool) -> Built:
        if self.path is not None:
            return _load_example(self.path, device, self.dtype(device), quick)
        return _build_generated(self, device, quick)


# ------------------------------------------------------------------------------------------------ building


def _nn() -> Any:
    from torch import nn

    return nn


def image(shape: Shape, channels: str = "cin") -> InputSpec:
    return ("randn", (shape["n"], shape[channels], shape["h"], shape["h"]))


def rows(shape: Shape, features: str = "k") -> InputSpec:
    return ("randn", (shape["m"], shape[features]))


def _conv(shape: Shape) -> Any:
    k = shape.get("k", 3)
    return _nn().Conv2d(
        shape["cin"],
        shape["cout"],
        k,
        stride=shape.get("stride", 1),
        padding=k // 2,
        groups=shape.get("conv_groups", 1),
    )


def _sequential(*parts: Any) -> Any:
    """nn.Sequential of the parts: the head (conv or Linear) then its tail."""
    return _nn().Sequential(*parts)


def _residual_block(shape: Shape) -> Any:
    nn = _nn()

    class Residual(nn.Module):
        """conv -> batchnorm -> relu -> conv -> batchnorm, + x, relu (a ResNet basic block)."""

        def __init__(self, c: int) -> None:
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
            self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

        def forward(self, x: Any) -> Any:
            y = self.b1(self.c1(x)).relu()
            return (self.b2(self.c2(y)) + x).relu()

    return Residual(shape["cin"])


def _post_norm(shape: Shape) -> Any:
    nn = _nn()

    class PostNorm(nn.Module):
        """Linear -> dropout (eval: identity) -> + x -> LayerNorm (a transformer sublayer's epilogue)."""

        def __init__(self, k: int) -> None:
            super().__init__()
            self.linear, self.drop, self.norm = nn.Linear(k, k), nn.Dropout(0.1), nn.LayerNorm(k)

        def forward(self, x: Any) -> Any:
            return self.norm(x + self.drop(self.linear(x)))

    return PostNorm(shape["k"])


def _scan(op: str) -> Any:
    import torch

    class Scan(torch.nn.Module):
        """torch.cumsum / torch.cumprod along the last dimension."""

        def forward(self, x: Any) -> Any:
            return getattr(torch, op)(x, dim=-1)

    return Scan()


def _recurrent(kind: str, shape: Shape) -> Any:
    nn = _nn()

    class Recurrent(nn.Module):
        """nn.LSTM / nn.GRU over (sequence, batch, features): the output sequence."""

        def __init__(self) -> None:
            super().__init__()
            self.rnn = getattr(nn, kind)(shape["k"], shape["k"], num_layers=shape.get("layers", 1))

        def forward(self, x: Any) -> Any:
            return self.rnn(x)[0]

    return Recurrent()


def _self_attention(shape: Shape) -> Any:
    nn = _nn()

    class SelfAttention(nn.Module):
        """nn.MultiheadAttention(x, x, x), without the weights."""

        def __init__(self) -> None:
            super().__init__()
            self.mha = nn.MultiheadAttention(shape["k"], shape["heads"], batch_first=True)

        def forward(self, x: Any) -> Any:
            return self.mha(x, x, x, need_weights=False)[0]

    return SelfAttention()


def _seq(shape: Shape) -> InputSpec:
    return ("randn", (shape["n"], shape["m"], shape["k"]))


def _time_major(shape: Shape) -> InputSpec:
    return ("randn", (shape["m"], shape["n"], shape["k"]))


# family -> (module from a shape, its inputs from the shape)
MODULES: dict[str, tuple[Callable[[Shape], Any], Callable[[Shape], list[InputSpec]]]] = {
    "conv2d": (_conv, lambda s: [image(s)]),
    "conv-transpose2d": (
        lambda s: _nn().ConvTranspose2d(s["cin"], s["cout"], 4, stride=2, padding=1),
        lambda s: [image(s)],
    ),
    "conv1d": (
        lambda s: _nn().Conv1d(s["cin"], s["cout"], 3, padding=1),
        lambda s: [("randn", (s["n"], s["cin"], s["m"]))],
    ),
    "linear": (lambda s: _nn().Linear(s["k"], s["n"]), lambda s: [rows(s)]),
    "layernorm": (lambda s: _nn().LayerNorm(s["k"]), lambda s: [rows(s)]),
    "rmsnorm": (lambda s: _nn().RMSNorm(s["k"]), lambda s: [rows(s)]),
    "groupnorm": (lambda s: _nn().GroupNorm(s["groups"], s["cin"]), lambda s: [image(s)]),
    "instancenorm2d": (lambda s: _nn().InstanceNorm2d(s["cin"], affine=True), lambda s: [image(s)]),
    "batchnorm2d": (lambda s: _nn().BatchNorm2d(s["cin"]), lambda s: [image(s)]),
    "maxpool2d": (lambda s: _nn().MaxPool2d(3, stride=2, padding=1), lambda s: [image(s)]),
    "avgpool2d": (lambda s: _nn().AvgPool2d(2), lambda s: [image(s)]),
    "adaptive-avgpool2d": (lambda s: _nn().AdaptiveAvgPool2d(1), lambda s: [image(s)]),
    "upsample-bilinear": (lambda s: _nn().Upsample(scale_factor=2, mode="bilinear"), lambda s: [image(s)]),
    "softmax": (lambda s: _nn().Softmax(dim=-1), lambda s: [rows(s)]),
    "log-softmax": (lambda s: _nn().LogSoftmax(dim=-1), lambda s: [rows(s)]),
    "gelu": (lambda s: _nn().GELU(), lambda s: [rows(s)]),
    "silu": (lambda s: _nn().SiLU(), lambda s: [rows(s)]),
    "mish": (lambda s: _nn().Mish(), lambda s: [rows(s)]),
    "softplus": (lambda s: _nn().Softplus(), lambda s: [rows(s)]),
    "cumsum": (lambda s: _scan("cumsum"), lambda s: [rows(s)]),
    "cumprod": (lambda s: _scan("cumprod"), lambda s: [("near-one", (s["m"], s["k"]))]),
    "embedding": (lambda s: _nn().Embedding(s["vocab"], s["k"]), lambda s: [("ids", (s["n"], s["m"]), s["vocab"])]),
    "multihead-attention": (_self_attention, lambda s: [_seq(s)]),
    "transformer-encoder-layer": (
        lambda s: _nn().TransformerEncoderLayer(s["k"], s["heads"], 4 * s["k"], batch_first=True),
        lambda s: [_seq(s)],
    ),
    "lstm": (lambda s: _recurrent("LSTM", s), lambda s: [_time_major(s)]),
    "gru": (lambda s: _recurrent("GRU", s), lambda s: [_time_major(s)]),
}

# The GPU shapes (bf16 on an H100), by what the family's time scales with, so that each eager call is GPU-bound:
# about 0.2-5 ms of kernel time at the roofs (ESTIMATE_PEAKS; :func:`estimate`, tested for every problem), far above
# the 40-100 us a compiled callable or a CUDA-graph tree costs on the host per call, and at most MEMORY_LIMIT bytes:
# - rows (norms, softmax, activations, scans): 2^29 elements (1 GiB in bf16), ROWS;
# - images (norms, pools): 2^29 elements, IMAGE (n 64, 128 channels, 256 px) or the family's realistic channels;
# - convolutions: batch 32-64 at 56-224 px (ResNet stages: 64 channels at 224 px ... 512 at 56 px);
# - GEMMs: 16-64k tokens (Linear), 32-64k tokens x 1024 (attention, encoder layers);
# the CPU shapes (--quick, the tests) tiny. The deliberately small (host-bound) problems are SMALL's, apart.
ROWS = {"m": 131072, "k": 4096}
IMAGE = {"n": 64, "cin": 128, "cout": 128, "h": 256, "groups": 32}
_IMG_CPU = {"n": 2, "cin": 8, "cout": 8, "h": 16, "groups": 4}
_ROWS_CPU = {"m": 64, "k": 64, "n": 64}
_SEQ_CPU = {"n": 2, "m": 16, "k": 32, "heads": 4}
MODULE_SHAPES: dict[str, dict[str, tuple[Shape, Shape]]] = {
    "conv2d": {
        "stem": (
            {"n": 64, "cin": 3, "cout": 64, "h": 224, "k": 7, "stride": 2},
            {**_IMG_CPU, "cin": 3, "k": 7, "stride": 2},
        ),
        "c64": ({"n": 64, "cin": 64, "cout": 64, "h": 224}, _IMG_CPU),
        "c128": ({"n": 32, "cin": 128, "cout": 128, "h": 224}, _IMG_CPU),
        "c256": ({"n": 64, "cin": 256, "cout": 256, "h": 112}, _IMG_CPU),
        "c512": ({"n": 64, "cin": 512, "cout": 512, "h": 56}, _IMG_CPU),
        "pointwise256": ({"n": 64, "cin": 256, "cout": 1024, "h": 112, "k": 1}, {**_IMG_CPU, "k": 1}),
        "depthwise512": (
            {"n": 64, "cin": 512, "cout": 512, "h": 112, "conv_groups": 512},
            {**_IMG_CPU, "conv_groups": 8},
        ),
    },
    "conv-transpose2d": {"c128": ({"n": 64, "cin": 128, "cout": 64, "h": 192}, _IMG_CPU)},
    "conv1d": {"c256": ({"n": 64, "cin": 256, "cout": 256, "m": 32768}, {"n": 2, "cin": 8, "cout": 8, "m": 32})},
    "linear": {
        "tokens32k": ({"m": 32768, "k": 4096, "n": 4096}, _ROWS_CPU),
        "unaligned": ({"m": 32766, "k": 4000, "n": 4000}, {"m": 62, "k": 50, "n": 50}),
    },
    "layernorm": {"rows128k": (ROWS, _ROWS_CPU)},
    "rmsnorm": {"rows64k": ({**ROWS, "m": 65536}, _ROWS_CPU)},  # NB: several kernels in eager where not fused
    "groupnorm": {"c256": ({**IMAGE, "n": 32, "cin": 256}, _IMG_CPU)},
    "instancenorm2d": {"c128": (IMAGE, _IMG_CPU)},
    "batchnorm2d": {"c128": (IMAGE, _IMG_CPU)},
    "maxpool2d": {"c128": (IMAGE, _IMG_CPU)},
    "avgpool2d": {"c128": (IMAGE, _IMG_CPU)},
    "adaptive-avgpool2d": {"c2048": ({"n": 256, "cin": 2048, "h": 32}, _IMG_CPU)},
    "upsample-bilinear": {"c64": ({"n": 32, "cin": 64, "h": 256}, _IMG_CPU)},  # NB: the output 4x the input
    "softmax": {
        "rows64k": ({"m": 65536, "k": 8192}, _ROWS_CPU),
        "scores": ({"m": 1048576, "k": 512}, {"m": 256, "k": 32}),
    },
    "log-softmax": {"vocab": ({"m": 16384, "k": 32000}, {"m": 16, "k": 500})},
    "gelu": {"rows128k": (ROWS, _ROWS_CPU)},
    "silu": {"rows128k": (ROWS, _ROWS_CPU)},
    "mish": {"rows128k": (ROWS, _ROWS_CPU)},
    "softplus": {"rows128k": (ROWS, _ROWS_CPU)},
    "cumsum": {"rows128k": (ROWS, _ROWS_CPU)},
    "cumprod": {"rows128k": (ROWS, _ROWS_CPU)},
    "embedding": {"gpt2": ({"n": 512, "m": 2048, "vocab": 50257, "k": 1024}, {"n": 2, "m": 16, "vocab": 500, "k": 32})},
    # NB: on the meta device attention runs as its math (the scores held): the estimate is far above flash's
    "multihead-attention": {"seq1k": ({"n": 32, "m": 1024, "k": 1024, "heads": 16}, _SEQ_CPU)},
    "transformer-encoder-layer": {"seq1k": ({"n": 16, "m": 1024, "k": 1024, "heads": 16}, _SEQ_CPU)},
    "lstm": {"h512": ({"n": 256, "m": 128, "k": 512}, {"n": 2, "m": 8, "k": 32})},
    "gru": {"h512": ({"n": 256, "m": 128, "k": 512}, {"n": 2, "m": 8, "k": 32})},
}


def _act(name: str) -> Callable[[Shape, str], Any]:
    return lambda s, c: getattr(_nn(), name)()


# the tail after a convolution: (shape, the conv's output channels key) -> module(s)
CONV_TAILS: dict[str, Callable[[Shape, str], Any]] = {
    "relu": _act("ReLU"),
    "gelu": _act("GELU"),
    "mish": _act("Mish"),
    "mish+mish": lambda s, c: _sequential(_nn().Mish(), _nn().Mish()),
    "batchnorm": lambda s, c: _nn().BatchNorm2d(s[c]),
    "groupnorm": lambda s, c: _nn().GroupNorm(s["groups"], s[c]),
    "instancenorm": lambda s, c: _nn().InstanceNorm2d(s[c], affine=True),
    "maxpool": lambda s, c: _nn().MaxPool2d(3, stride=2, padding=1),
}
CONV_CHAIN_SHAPES: dict[str, tuple[Shape, Shape]] = {
    "stem": ({"n": 64, "cin": 3, "cout": 64, "h": 224, "groups": 32}, {**_IMG_CPU, "cin": 3}),
    "c64": ({"n": 64, "cin": 64, "cout": 64, "h": 224, "groups": 32}, _IMG_CPU),
}
# the tail after a Linear (shape keys: m rows, k in, n out)
LINEAR_TAILS: dict[str, Callable[[Shape], Any]] = {
    "gelu": lambda s: _nn().GELU(),
    "bias+relu": lambda s: _nn().ReLU(),  # nn.Linear has its bias: the tail is the ReLU on it
    "layernorm": lambda s: _nn().LayerNorm(s["n"]),
    "softmax": lambda s: _nn().Softmax(dim=-1),
    "groupnorm": lambda s: _nn().GroupNorm(s["groups"], s["n"]),
}
LINEAR_CHAIN_SHAPES: dict[str, tuple[Shape, Shape]] = {
    "tokens64k": ({"m": 65536, "k": 1024, "n": 4096, "groups": 32}, {**_ROWS_CPU, "groups": 4}),
    "tokens16k": ({"m": 16384, "k": 4096, "n": 4096, "groups": 32}, {"m": 32, "k": 64, "n": 64, "groups": 4}),
}
# longer chains: family -> (module from a shape, inputs, {shape name: (GPU shape, CPU shape)})
EPILOGUES: dict[
    str, tuple[Callable[[Shape], Any], Callable[[Shape], list[InputSpec]], dict[str, tuple[Shape, Shape]]]
] = {
    "conv+batchnorm+relu": (
        lambda s: _sequential(_conv(s), _nn().BatchNorm2d(s["cout"]), _nn().ReLU()),
        lambda s: [image(s)],
        {"c64": CONV_CHAIN_SHAPES["c64"], "stem": CONV_CHAIN_SHAPES["stem"]},
    ),
    "residual-block": (_residual_block, lambda s: [image(s)], {"c64": CONV_CHAIN_SHAPES["c64"]}),
    "mlp": (
        lambda s: _sequential(_nn().Linear(s["k"], s["n"]), _nn().GELU(), _nn().Linear(s["n"], s["k"])),
        lambda s: [rows(s)],
        {"tokens64k": LINEAR_CHAIN_SHAPES["tokens64k"]},
    ),
    "linear+residual+layernorm": (
        _post_norm,
        lambda s: [rows(s)],
        {"tokens128k": ({"m": 131072, "k": 1024}, {"m": 64, "k": 64})},
    ),
}


# the deliberately small problems (kind 'small', ids 'small-FAMILY-SHAPE'): a few microseconds of kernels a call,
# where the host's time per call (eager's dispatch, a compiled callable's guards, CUDA-graph trees) decides; any
# family the other tables build; kept few (the advice on GPU-bound work is what the corpus is for)
SMALL: dict[str, dict[str, tuple[Shape, Shape]]] = {
    "layernorm": {"rows32": ({"m": 32, "k": 4096}, {"m": 4, "k": 64})},
    "linear": {"rows16": ({"m": 16, "k": 4096, "n": 4096}, {"m": 4, "k": 64, "n": 64})},
    "linear+gelu": {"rows256": ({"m": 256, "k": 4096, "n": 4096}, {"m": 8, "k": 64, "n": 64})},
    "linear+layernorm": {"rows256": ({"m": 256, "k": 4096, "n": 4096}, {"m": 8, "k": 64, "n": 64})},
    "linear+softmax": {"rows256": ({"m": 256, "k": 4096, "n": 4096}, {"m": 8, "k": 64, "n": 64})},
    "conv+relu": {"n1": ({"n": 1, "cin": 64, "cout": 64, "h": 56}, {**_IMG_CPU, "n": 1})},
}


def generated() -> list[Problem]:
    """Every problem the tables generate, in table order (modules, conv chains, linear chains, epilogues, small)."""
    out = [
        Problem(f"{family}-{name}", family, "module", gpu, cpu)
        for family, shapes in MODULE_SHAPES.items()
        for name, (gpu, cpu) in shapes.items()
    ]
    out += [
        Problem(f"conv+{tail}-{name}", f"conv+{tail}", "chain", gpu, cpu)
        for tail in CONV_TAILS
        for name, (gpu, cpu) in CONV_CHAIN_SHAPES.items()
    ]
    out += [
        Problem(f"linear+{tail}-{name}", f"linear+{tail}", "chain", gpu, cpu)
        for tail in LINEAR_TAILS
        for name, (gpu, cpu) in LINEAR_CHAIN_SHAPES.items()
    ]
    out += [
        Problem(f"{family}-{name}", family, "chain", gpu, cpu)
        for family, (_, _, shapes) in EPILOGUES.items()
        for name, (gpu, cpu) in shapes.items()
    ]
    out += [
        Problem(f"small-{family}-{name}", family, "small", gpu, cpu)
        for family, shapes in SMALL.items()
        for name, (gpu, cpu) in shapes.items()
    ]
    return out


def example_models(directory: Path = MODELS) -> list[Problem]:
    """workloads/models/*.py (not the distributed ones), one problem each."""
    return [Problem(f"model-{p.stem}", p.stem, "model", path=p) for p in sorted(directory.glob("*.py"))]


def free_device(device: str) -> None:
    """What one problem left behind, freed before the next: dynamo's compiled graphs, Python's garbage, and on
    CUDA the caching allocator's unused blocks."""
    import contextlib
    import gc

    import torch

    with contextlib.suppress(Exception):
        torch._dynamo.reset()
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def corpus(*, models: bool = True) -> list[Problem]:
    problems = generated() + (example_models() if models else [])
    ids = [p.id for p in problems]
    if len(ids) != len(set(ids)):
        raise ValueError("duplicate problem ids in the corpus tables")
    return problems


def _module_and_inputs(problem: Problem, shape: Shape) -> tuple[Any, list[InputSpec]]:
    family = problem.family
    if family in MODULES:
        make, inputs = MODULES[family]
        return make(shape), inputs(shape)
    if family in EPILOGUES:
        make, inputs, _ = EPILOGUES[family]
        return make(shape), inputs(shape)
    head, _, tail = family.partition("+")
    if head == "conv" and tail in CONV_TAILS:
        return _sequential(_conv(shape), CONV_TAILS[tail](shape, "cout")), [image(shape)]
    if head == "linear" and tail in LINEAR_TAILS:
        return _sequential(_nn().Linear(shape["k"], shape["n"]), LINEAR_TAILS[tail](shape)), [rows(shape)]
    raise KeyError(f"no table builds family {family!r}")


def _build_generated(problem: Problem, device: str, quick: bool, dtype_name: str | None = None) -> Built:
    import torch

    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype_name or problem.dtype(device)]
    torch.manual_seed(0)
    with torch.device(device):  # NB: the weights made (and initialised) where they run
        module, specs = _module_and_inputs(problem, problem.shape(quick))
    module = module.to(device=device, dtype=dtype).eval()
    inputs: list[Any] = []
    for spec in specs:
        if spec[0] == "ids":
            inputs.append(torch.randint(0, spec[2], spec[1], device=device))
        elif spec[0] == "near-one":  # a long product of these stays finite (randn's would over- and underflow)
            inputs.append((1.0 + 1e-3 * torch.randn(spec[1], device=device)).to(dtype))
        else:
            inputs.append(torch.randn(spec[1], device=device, dtype=dtype))
    return module, tuple(inputs), {}


# ------------------------------------------------------------------------------------------------ estimating

#: the H100 SXM's roofs the GPU shapes are sized by: HBM3 bytes/s, dense bf16 tensor-core FLOP/s, and the CUDA
#: cores' FLOP/s (a 16-bit convolution whose channels are not a multiple of 8 runs without tensor cores)
ESTIMATE_PEAKS = {"bytes_per_s": 3.35e12, "tensor_flops": 990e12, "cuda_core_flops": 67e12}
MEMORY_LIMIT = 8e9  # bytes a problem may hold (:attr:`Estimate.memory_bytes`)
# ops that move no data (views)
_VIEWS = frozenset(
    {"view", "_unsafe_view", "t", "transpose", "permute", "expand", "detach", "split", "unsqueeze", "squeeze",
     "reshape", "select", "slice", "alias", "as_strided", "unbind", "chunk", "split_with_sizes", "_reshape_alias"}
)  # fmt: skip


@dataclass(frozen=True)
class Estimate:
    """One eager call at the GPU shape in bf16, op by op (on the meta device: nothing allocated or run)."""

    seconds: float  # sum over the ops of max(bytes / HBM, FLOPs / their roof): kernel time at the roofs
    memory_bytes: int  # inputs + parameters + every op's output, none freed: an upper bound on what a call holds
    ops: int


def estimate(problem: Problem) -> Estimate:
    """The kernel time of one eager call of a generated problem at its GPU shape in bf16 on an H100's roofs
    (ESTIMATE_PEAKS), and the memory it holds: every aten op's inputs and outputs once (views none), its FLOPs by
    torch.utils.flop_counter's formulas (GEMMs, convolutions, attention). A lower bound on the time where kernels
    run below their roofs; on the meta device a composite op (an RNN, a fused norm) runs as its decomposition."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten
    from torch.utils.flop_counter import flop_registry

    def tensors(value: Any) -> list[Any]:
        return [t for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor)]

    class Count(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.seconds, self.out_bytes, self.ops = 0.0, 0, 0

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            packet = func._overloadpacket
            if packet.__name__ in _VIEWS:
                return out
            moved = sum(t.numel() * t.element_size() for t in tensors((args, kwargs)) + tensors(out))
            self.out_bytes += sum(t.numel() * t.element_size() for t in tensors(out))
            flops = flop_registry[packet](*args, **kwargs, out_val=out) if packet in flop_registry else 0
            roof = ESTIMATE_PEAKS["tensor_flops"]
            if packet.__name__ == "convolution" and (args[0].shape[1] // max(int(args[8]), 1)) % 8:
                roof = ESTIMATE_PEAKS["cuda_core_flops"]  # NB: channels per group not a multiple of 8
            self.seconds += max(moved / ESTIMATE_PEAKS["bytes_per_s"], flops / roof)
            self.ops += 1
            return out

    model, inputs, kwargs = _build_generated(problem, "meta", quick=False, dtype_name="bf16")
    held = sum(t.numel() * t.element_size() for t in tensors((inputs, kwargs)) + list(model.parameters()))
    count = Count()
    with torch.no_grad(), count:
        model(*inputs, **kwargs)
    return Estimate(count.seconds, held + count.out_bytes, count.ops)


def _load_example(path: Path, device: str, dtype: str, quick: bool) -> Built:
    import torch

    from roofline.diagnose.loader import load_model

    before = os.environ.get("ROOFLINE_MODEL_SIZE")
    os.environ["ROOFLINE_MODEL_SIZE"] = "small" if quick else "large"
    try:
        torch.manual_seed(0)
        loaded = load_model(path, device=device, dtype=dtype)
    finally:
        if before is None:
            os.environ.pop("ROOFLINE_MODEL_SIZE", None)
        else:
            os.environ["ROOFLINE_MODEL_SIZE"] = before
    return loaded.model, loaded.inputs, loaded.kwargs


__all__ = [
    "CONV_CHAIN_SHAPES",
    "CONV_TAILS",
    "EPILOGUES",
    "ESTIMATE_PEAKS",
    "LINEAR_CHAIN_SHAPES",
    "LINEAR_TAILS",
    "MEMORY_LIMIT",
    "MODULES",
    "MODULE_SHAPES",
    "SMALL",
    "Estimate",
    "Problem",
    "corpus",
    "estimate",
    "example_models",
    "generated",
]

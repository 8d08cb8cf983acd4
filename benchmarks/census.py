"""The op census (issue 26): does every op that costs time have a cost formula?

    python benchmarks/census.py [--device cpu|cuda] [--filter REGEX] [--quick] [--json] [--out PATH]
                                [--warmup N] [--iters N] [--threads N]

One small model per case, the cases generated from torch's own namespaces (not a hand-picked list):

- every public ``torch.nn`` module class (``nn.Module`` subclasses of ``torch.nn.modules``), built by a rule table
  keyed by family: the constructor's required arguments filled from their *names* (``in_channels``,
  ``kernel_size``, ``num_heads``, ...; :data:`ARGS`) plus a few per-family keyword choices (:data:`KWARGS`), the
  input by family (an image of the class's dimensionality for conv/pool/norm/pad/dropout classes, a (batch, seq,
  hidden) activation otherwise, the loss's input and target for a loss, ...);
- every public function of ``torch.nn.functional`` (by family: activations, pools, convolutions, norms, losses,
  padding, interpolation, distances, ...), interpolate and pad once per mode;
- every public function of ``torch.fft``, the basics of ``torch.linalg``, and the sort/search family (sort,
  argsort, topk, kthvalue, median, unique, cdist, ...).

What the generator does not build is in :data:`MODULE_EXCEPTIONS` / :data:`FUNCTIONAL_EXCEPTIONS`, each with its
reason (tests/test_census.py fails when torch grows a class or function that is neither built nor listed).

Each case runs through roofline's own counting pass (``roofline.diagnose.count.count_ops``: training mode --
forward and backward -- where the case has parameters or differentiable float inputs, inference where training
cannot run) and its own timing pass (``roofline.diagnose.profile.time_model``: torch.profiler, the op times joined
to the counted records, as ``roofline diagnose`` does). Per case: the aten ops covered by a cost formula and those
not, and the share of device time in the uncovered ones; overall: the device time uncounted (%) and the uncovered
ops by time. Device time: on the CPU each op's self CPU time, on a GPU its kernels' time. Time the profiler could
not join to any counted op (``Timing.unmatched_time_s``) is reported apart, as "unmatched".

Times: each op's median over the profiled iterations (``--iters``, default 5, after ``--warmup`` calls). On a
shared, loaded CPU ``--threads 1`` keeps them steady (two threads that wait on each other's preemption inflate
every op's time several-fold). The share is of the census's summed time, so the slowest cases weigh most.

Shapes: on the CPU small (the whole census runs in a few minutes on 2 cores); on a GPU (``--device cuda``)
realistic (batch 16, 64 channels, 64x64 images, sequence 512, hidden 1024, vocabulary 32000) and bf16 where the op
takes it (a case that fails in bf16 runs again in fp32). One case's failure is recorded with its one-line error and
never stops the census; progress goes to stderr; ``--out`` writes the results as JSON (atomically, as they
come: a run cut short leaves the cases it ran); ``--merge A.json B.json --out ALL.json`` joins the results of a
census split by ``--filter`` (a GPU's command limit) and recomputes the totals.
"""

from __future__ import annotations

import argparse
import inspect
import json
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

VERSION = 1


# ------------------------------------------------------------------------------------------------ the sizes


@dataclass(frozen=True)
class Sizes:
    """The shapes every case is built from."""

    batch: int
    channels: int
    length: int  # 1-d signals
    side2: int  # 2-d images: side x side
    side3: int  # 3-d volumes: side^3
    seq: int
    hidden: int
    heads: int
    vocab: int
    classes: int
    dtype: str  # 'fp32' | 'bf16': the float dtype of the inputs and parameters

    @property
    def bilinear(self) -> int:
        """Bilinear's width: its weight is width^3 (at hidden 1024: 10^9 parameters), so half the hidden size,
        at most 256."""
        return min(self.hidden // 2, 256)

    def side(self, dims: int) -> int:
        return {1: self.length, 2: self.side2, 3: self.side3}[dims]


CPU_SIZES = Sizes(batch=4, channels=16, length=256, side2=32, side3=12, seq=64, hidden=64, heads=4, vocab=512,
                  classes=32, dtype="fp32")  # fmt: skip
CUDA_SIZES = Sizes(batch=16, channels=64, length=4096, side2=64, side3=16, seq=512, hidden=1024, heads=8,
                   vocab=32000, classes=1000, dtype="bf16")  # fmt: skip


class Skip(Exception):
    """A case that does not apply on this device (CUDA-only kernels on the CPU): skipped, not failed."""


class Maker:
    """Tensors of the case's sizes on its device: ``f`` float (the working dtype), ``u`` in (0, 1), ``i`` int64."""

    def __init__(self, sizes: Sizes, device: str, dtype: Any) -> None:
        import torch

        self.s, self.device, self.dtype, self.torch = sizes, device, dtype, torch

    def f(self, *shape: int) -> Any:
        return self.torch.randn(*shape, device=self.device, dtype=self.dtype)

    def u(self, *shape: int) -> Any:
        return self.torch.rand(*shape, device=self.device, dtype=self.dtype).clamp(0.05, 0.95)

    def i(self, high: int, *shape: int) -> Any:
        return self.torch.randint(0, high, shape, device=self.device)

    def sign(self, *shape: int) -> Any:
        return self.torch.randint(0, 2, shape, device=self.device).to(self.dtype) * 2 - 1

    def img(self, dims: int, channels: int | None = None) -> Any:
        s = self.s
        return self.f(s.batch, channels or s.channels, *[s.side(dims)] * dims)

    def act(self) -> Any:
        """A (batch, seq, hidden) activation."""
        return self.f(self.s.batch, self.s.seq, self.s.hidden)

    def rows(self) -> Any:
        """(batch * seq, hidden): a matrix of rows."""
        return self.f(self.s.batch * self.s.seq, self.s.hidden)

    def spd(self) -> Any:
        """A batch of symmetric positive-definite (hidden x hidden) matrices."""
        a = self.f(self.s.batch, self.s.hidden, self.s.hidden)
        eye = self.torch.eye(self.s.hidden, device=self.device, dtype=self.dtype)
        return a @ a.transpose(-1, -2) / self.s.hidden + eye


Built = tuple[Any, tuple[Any, ...]]  # (the model: an nn.Module or a callable, its positional inputs)
Builder = Callable[[Maker], Built]


@dataclass(frozen=True)
class Case:
    name: str  # 'nn.Conv2d', 'F.gelu', 'F.interpolate[bilinear]', 'torch.fft.rfft'
    family: str
    build: Builder
    grad: bool = True  # training (forward + backward) where it can run; False: inference only
    float32: bool = False  # never cast to bf16 (integer-valued or fp32-only ops)


# ------------------------------------------------------------------------------------------ nn module classes

#: Public torch.nn module classes the generator does not build, and why.
MODULE_EXCEPTIONS: dict[str, str] = {
    "Module": "the abstract base class: no forward",
    "Container": "a deprecated container base: no forward of its own",
    "Sequential": "a container: costs what its modules cost",
    "ModuleList": "a container: no forward",
    "ModuleDict": "a container: no forward",
    "ParameterList": "a container of parameters: no forward",
    "ParameterDict": "a container of parameters: no forward",
    "DataParallel": "a wrapper: runs its module on several devices (its module's ops, plus scatter/gather copies)",
    "RNNBase": "the base of RNN/LSTM/GRU: built through those",
    "RNNCellBase": "the base of RNNCell/LSTMCell/GRUCell: built through those",
    "SyncBatchNorm": "training needs a process group (torch.distributed); single-process it is BatchNorm",
    "LazyBatchNorm1d": "a lazy module becomes BatchNorm1d on its first call: costed as that class",
    "LazyBatchNorm2d": "a lazy module becomes BatchNorm2d on its first call: costed as that class",
    "LazyBatchNorm3d": "a lazy module becomes BatchNorm3d on its first call: costed as that class",
    "LazyConv1d": "a lazy module becomes Conv1d on its first call: costed as that class",
    "LazyConv2d": "a lazy module becomes Conv2d on its first call: costed as that class",
    "LazyConv3d": "a lazy module becomes Conv3d on its first call: costed as that class",
    "LazyConvTranspose1d": "a lazy module becomes ConvTranspose1d on its first call: costed as that class",
    "LazyConvTranspose2d": "a lazy module becomes ConvTranspose2d on its first call: costed as that class",
    "LazyConvTranspose3d": "a lazy module becomes ConvTranspose3d on its first call: costed as that class",
    "LazyInstanceNorm1d": "a lazy module becomes InstanceNorm1d on its first call: costed as that class",
    "LazyInstanceNorm2d": "a lazy module becomes InstanceNorm2d on its first call: costed as that class",
    "LazyInstanceNorm3d": "a lazy module becomes InstanceNorm3d on its first call: costed as that class",
    "LazyLinear": "a lazy module becomes Linear on its first call: costed as that class",
}


def module_classes() -> dict[str, type]:
    """Every public nn.Module subclass exported by torch.nn.modules (and torch.nn), by name."""
    import torch.nn as nn
    import torch.nn.modules as modules

    found: dict[str, type] = {}
    for namespace in (modules, nn):
        for name in dir(namespace):
            obj = getattr(namespace, name)
            if not name.startswith("_") and inspect.isclass(obj) and issubclass(obj, nn.Module):
                found.setdefault(name, obj)
    return dict(sorted(found.items()))


def _dims(name: str) -> int:
    """The spatial dimensionality a class name says ('Conv2d' -> 2), 0 if none."""
    m = re.search(r"(\d)d$", name)
    return int(m.group(1)) if m else 0


#: constructor argument name -> its value (a function of the sizes and the class name).
ARGS: dict[str, Callable[[Sizes, str], Any]] = {
    "in_channels": lambda s, n: s.channels,
    "out_channels": lambda s, n: s.channels,
    "num_features": lambda s, n: s.channels,
    "num_channels": lambda s, n: s.channels,
    "kernel_size": lambda s, n: 2 if "Pool" in n or "Unpool" in n else 3,
    "num_groups": lambda s, n: 4,
    "groups": lambda s, n: 2,
    "normalized_shape": lambda s, n: s.hidden,
    "in_features": lambda s, n: s.bilinear if n == "Bilinear" else s.hidden,
    "out_features": lambda s, n: s.bilinear if n == "Bilinear" else s.hidden,
    "in1_features": lambda s, n: s.bilinear,
    "in2_features": lambda s, n: s.bilinear,
    "embed_dim": lambda s, n: s.hidden,
    "input_size": lambda s, n: s.hidden,
    "hidden_size": lambda s, n: s.hidden,
    "embedding_dim": lambda s, n: s.hidden,
    "num_embeddings": lambda s, n: s.vocab,
    "num_heads": lambda s, n: s.heads,
    "upscale_factor": lambda s, n: 2,
    "downscale_factor": lambda s, n: 2,
    "padding": lambda s, n: 2,
    "value": lambda s, n: 0.0,
    "size": lambda s, n: 5,
    "output_size": lambda s, n: 4,
    "threshold": lambda s, n: 0.1,
    "norm_type": lambda s, n: 2.0,
    "n_classes": lambda s, n: s.vocab,
    "num_classes": lambda s, n: s.vocab,
    "cutoffs": lambda s, n: [s.vocab // 4, s.vocab // 2],
    "dim": lambda s, n: 1,
    "d_model": lambda s, n: s.hidden,
    "nhead": lambda s, n: s.heads,
    "num_layers": lambda s, n: 2,
    "encoder_layer": lambda s, n: _layer("TransformerEncoderLayer", s),
    "decoder_layer": lambda s, n: _layer("TransformerDecoderLayer", s),
    "unflattened_size": lambda s, n: (s.seq // 2, 2),
}


def _layer(name: str, s: Sizes) -> Any:
    """A transformer layer of the sizes (what TransformerEncoder/Decoder stack)."""
    import torch

    return getattr(torch.nn, name)(s.hidden, s.heads, 4 * s.hidden, batch_first=True)


#: class-name pattern -> keyword arguments beyond the required ones (the family's realistic choice).
KWARGS: list[tuple[str, Callable[[Sizes], dict[str, Any]]]] = [
    (r"^Conv(Transpose)?\dd$", lambda s: {"padding": 1}),
    (r"^FractionalMaxPool", lambda s: {"output_ratio": 0.5}),  # NB: the functional form takes a tuple
    (r"^(RNN|LSTM|GRU)$", lambda s: {"batch_first": True}),
    (r"^Transformer(EncoderLayer|DecoderLayer)?$", lambda s: {"batch_first": True, "dim_feedforward": 4 * s.hidden}),
    (
        r"^Transformer$",
        lambda s: {"d_model": s.hidden, "nhead": s.heads, "num_encoder_layers": 2, "num_decoder_layers": 2},
    ),
    (r"^MultiheadAttention$", lambda s: {"batch_first": True}),
    (r"^EmbeddingBag$", lambda s: {"mode": "mean"}),
    (r"^(Softmax|Softmin|LogSoftmax)$", lambda s: {"dim": -1}),
    (r"^Upsample$", lambda s: {"scale_factor": 2, "mode": "nearest"}),
    (r"^Upsampling", lambda s: {"scale_factor": 2}),
    (r"^InstanceNorm", lambda s: {"affine": True}),
    (r"^Fold$", lambda s: {"output_size": (s.side2, s.side2), "kernel_size": 3, "padding": 1}),
    (r"^Unfold$", lambda s: {"kernel_size": 3, "padding": 1}),
    (r"^Unflatten$", lambda s: {"dim": 1}),
    (r"^LocalResponseNorm$|^CrossMapLRN2d$", lambda s: {"size": 5}),
]

#: classes whose input is an image of its dimensionality ((N, C, *side^d); d from the name, else 2)
_IMAGE = re.compile(
    r"Conv|Pool|BatchNorm|InstanceNorm|Pad\dd|Dropout\dd|FeatureAlphaDropout|Upsampl|Softmax2d|ChannelShuffle|"
    r"PixelShuffle|PixelUnshuffle|GroupNorm|LocalResponseNorm|CrossMapLRN2d|Unfold"
)


def constructor_args(cls: type, sizes: Sizes) -> tuple[list[Any], dict[str, Any]]:
    """The positional (required) arguments of ``cls`` from their names, and the family's keyword arguments."""
    name = cls.__name__
    extra: dict[str, Any] = {}
    for pattern, kwargs in KWARGS:
        if re.search(pattern, name):
            extra.update(kwargs(sizes))
    args: list[Any] = []
    for p in list(inspect.signature(cls.__init__).parameters.values())[1:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.default is not p.empty:
            continue
        if p.name in extra:
            args.append(extra.pop(p.name))
        elif p.name in ARGS:
            args.append(ARGS[p.name](sizes, name))
        elif p.kind == p.KEYWORD_ONLY:
            raise TypeError(f"no rule for the keyword argument {p.name!r}")
        else:
            raise TypeError(f"no rule for the argument {p.name!r}")
    return args, extra


# loss inputs, shared by the nn classes and the functional losses: key -> (maker -> inputs)
def _ce(t: Maker) -> tuple[Any, ...]:
    return t.f(t.s.batch * t.s.seq, t.s.classes), t.i(t.s.classes, t.s.batch * t.s.seq)


def _pair(t: Maker) -> tuple[Any, ...]:
    return t.rows(), t.rows()


def _ctc(t: Maker) -> tuple[Any, ...]:
    s, torch = t.s, t.torch
    steps, target = s.seq * 2, s.seq // 2
    log_probs = t.f(steps, s.batch, s.classes).log_softmax(-1).detach()
    targets = torch.randint(1, s.classes, (s.batch, target), device=t.device)
    lengths = torch.full((s.batch,), steps, dtype=torch.long, device=t.device)
    return log_probs, targets, lengths, torch.full((s.batch,), target, dtype=torch.long, device=t.device)


def _multilabel_margin(t: Maker) -> tuple[Any, ...]:
    x, target = t.f(t.s.batch * t.s.seq, t.s.classes), t.i(t.s.classes, t.s.batch * t.s.seq, t.s.classes)
    target[:, t.s.classes // 2] = -1  # each row's labels end at the first -1
    return x, target


LOSS_INPUTS: dict[str, Callable[[Maker], tuple[Any, ...]]] = {
    "pair": _pair,  # (input, target) of the same shape
    "bce": lambda t: (t.u(t.s.batch * t.s.seq, t.s.hidden), t.u(t.s.batch * t.s.seq, t.s.hidden)),
    "logits_prob": lambda t: (t.rows(), t.u(t.s.batch * t.s.seq, t.s.hidden)),
    "ce": _ce,
    "nll": lambda t: (_ce(t)[0].log_softmax(-1).detach(), _ce(t)[1]),
    "nll2d": lambda t: (
        t.img(2, t.s.classes).log_softmax(1).detach(),
        t.i(t.s.classes, t.s.batch, t.s.side2, t.s.side2),
    ),
    "kl": lambda t: (t.rows().log_softmax(-1).detach(), t.rows().softmax(-1)),
    "cosine_embedding": lambda t: (t.rows(), t.rows(), t.sign(t.s.batch * t.s.seq)),
    "margin_ranking": lambda t: (t.f(t.s.batch * t.s.seq), t.f(t.s.batch * t.s.seq), t.sign(t.s.batch * t.s.seq)),
    "sign_target": lambda t: (t.rows(), t.sign(t.s.batch * t.s.seq, t.s.hidden)),
    "multilabel_margin": _multilabel_margin,
    "multilabel_soft": lambda t: (t.rows(), t.i(2, t.s.batch * t.s.seq, t.s.hidden).to(t.dtype)),
    "gaussian": lambda t: (t.rows(), t.rows(), t.u(t.s.batch * t.s.seq, t.s.hidden)),
    "poisson": lambda t: (t.rows(), t.u(t.s.batch * t.s.seq, t.s.hidden)),
    "triplet": lambda t: (t.rows(), t.rows(), t.rows()),
    "ctc": _ctc,
    "adaptive": lambda t: (t.rows(), t.i(t.s.vocab, t.s.batch * t.s.seq)),
    "linear_ce": lambda t: (t.rows(), t.i(t.s.vocab, t.s.batch * t.s.seq)),
}

#: loss class -> its inputs' key in LOSS_INPUTS
LOSS_OF_CLASS: dict[str, str] = {
    "BCELoss": "bce", "BCEWithLogitsLoss": "logits_prob", "CrossEntropyLoss": "ce", "NLLLoss": "nll",
    "NLLLoss2d": "nll2d", "KLDivLoss": "kl", "L1Loss": "pair", "MSELoss": "pair", "HuberLoss": "pair",
    "SmoothL1Loss": "pair", "CosineEmbeddingLoss": "cosine_embedding", "MarginRankingLoss": "margin_ranking",
    "HingeEmbeddingLoss": "sign_target", "SoftMarginLoss": "sign_target", "MultiMarginLoss": "ce",
    "MultiLabelMarginLoss": "multilabel_margin", "MultiLabelSoftMarginLoss": "multilabel_soft",
    "GaussianNLLLoss": "gaussian", "PoissonNLLLoss": "poisson", "TripletMarginLoss": "triplet",
    "TripletMarginWithDistanceLoss": "triplet", "CTCLoss": "ctc", "AdaptiveLogSoftmaxWithLoss": "adaptive",
    "LinearCrossEntropyLoss": "linear_ce",
}  # fmt: skip


def _module_inputs(cls: type, module: Any, t: Maker) -> tuple[Any, ...]:
    """The inputs of one module, by family."""
    name, s = cls.__name__, t.s
    if name in LOSS_OF_CLASS:
        return LOSS_INPUTS[LOSS_OF_CLASS[name]](t)
    if name in ("RNN", "LSTM", "GRU"):
        return (t.act(),)
    if name.endswith("Cell"):
        return (t.f(s.batch * s.seq, s.hidden),)
    if name == "MultiheadAttention":
        return t.act(), t.act(), t.act()
    if name in ("Transformer", "TransformerDecoderLayer", "TransformerDecoder"):
        return t.act(), t.act()
    if name in ("Embedding", "EmbeddingBag"):
        return (t.i(s.vocab, s.batch, s.seq),)
    if name == "Bilinear":
        return t.f(s.batch * s.seq, s.bilinear), t.f(s.batch * s.seq, s.bilinear)
    if name in ("CosineSimilarity", "PairwiseDistance"):
        return t.rows(), t.rows()
    if name.startswith("MaxUnpool"):
        return _pooled(t, _dims(name))
    if name == "Fold":
        return (t.f(s.batch, s.channels * 9, s.side2 * s.side2),)
    if name == "BatchNorm1d":
        return (t.f(s.batch, s.channels, s.length),)
    if name == "Unflatten":
        return (t.act(),)
    if _IMAGE.search(name):
        return (t.img(_dims(name) or 2),)
    return (t.act(),)


def _module_builder(cls: type) -> Builder:
    def build(t: Maker) -> Built:
        args, kwargs = constructor_args(cls, t.s)
        if cls.__name__ in ("RNN", "LSTM", "GRU"):  # NB: their signature is (*args, **kwargs)
            args = [t.s.hidden, t.s.hidden]
        module = cls(*args, **kwargs).to(device=t.device, dtype=t.dtype)
        return module, _module_inputs(cls, module, t)

    return build


def _module_family(name: str) -> str:
    for family, pattern in MODULE_FAMILIES:
        if re.search(pattern, name):
            return family
    return "activation"


MODULE_FAMILIES: list[tuple[str, str]] = [
    ("loss", r"Loss|NLLLoss2d"),
    ("conv", r"^Conv|^Fold$|^Unfold$"),
    ("pool", r"Pool|Unpool"),
    ("norm", r"Norm|LRN"),
    ("rnn", r"^(RNN|LSTM|GRU)"),
    ("transformer", r"Transformer|MultiheadAttention"),
    ("embedding", r"^Embedding"),
    ("upsample", r"Upsampl|PixelShuffle|PixelUnshuffle|ChannelShuffle"),
    ("padding", r"Pad\dd$"),
    ("dropout", r"Dropout"),
    ("linear", r"Linear|Bilinear|Identity"),
    ("distance", r"Similarity|Distance"),
    ("shape", r"Flatten|Unflatten"),
]


def module_cases() -> list[Case]:
    return [
        Case(f"nn.{name}", _module_family(name), _module_builder(cls))
        for name, cls in module_classes().items()
        if name not in MODULE_EXCEPTIONS
    ]


# ------------------------------------------------------------------------------------------ torch.nn.functional


#: Public names of torch.nn.functional that are not ops the generator builds, and why.
FUNCTIONAL_EXCEPTIONS: dict[str, str] = {
    "assert_int_or_pair": "an argument check, not an op",
    "boolean_dispatch": "a helper that picks one of two functions, not an op",
    "handle_torch_function": "the __torch_function__ dispatcher, not an op",
    "has_torch_function": "a __torch_function__ test, not an op",
    "has_torch_function_unary": "a __torch_function__ test, not an op",
    "has_torch_function_variadic": "a __torch_function__ test, not an op",
    "multi_head_attention_forward": "what nn.MultiheadAttention.forward runs: costed by the nn.MultiheadAttention case",
    "scaled_mm": "an fp8 GEMM that needs scale recipes and fp8 layouts (CUDA, SM 8.9+): aten::_scaled_mm is costed "
    "by the matmul family",
    "scaled_grouped_mm": "an fp8 grouped GEMM that needs scale recipes (CUDA, SM 9.0+): aten::_scaled_grouped_mm "
    "is costed by the matmul family",
}


def functional_names() -> list[str]:
    """Every public function of torch.nn.functional (typing names, enums and classes left out)."""
    import torch.nn.functional as F

    out = []
    for name in dir(F):
        obj = getattr(F, name)
        if name.startswith("_") or not callable(obj) or inspect.isclass(obj):
            continue
        if getattr(obj, "__module__", "") in ("typing", "collections.abc"):
            continue
        out.append(name)
    return sorted(out)


_UNARY = ["celu", "elu", "gelu", "hardsigmoid", "hardswish", "hardtanh", "leaky_relu", "logsigmoid", "mish", "relu",
          "relu6", "rrelu", "selu", "sigmoid", "silu", "softsign", "tanh", "tanhshrink", "softplus", "softshrink",
          "hardshrink", "dropout", "alpha_dropout", "normalize", "glu"]  # fmt: skip
_INPLACE = ["celu_", "elu_", "hardtanh_", "leaky_relu_", "relu_", "rrelu_", "selu_"]
_LOSS_OF_FUNCTION: dict[str, str] = {
    "binary_cross_entropy": "bce", "binary_cross_entropy_with_logits": "logits_prob", "cross_entropy": "ce",
    "nll_loss": "nll", "kl_div": "kl", "l1_loss": "pair", "mse_loss": "pair", "huber_loss": "pair",
    "smooth_l1_loss": "pair", "cosine_embedding_loss": "cosine_embedding", "margin_ranking_loss": "margin_ranking",
    "hinge_embedding_loss": "sign_target", "soft_margin_loss": "sign_target", "multi_margin_loss": "ce",
    "multilabel_margin_loss": "multilabel_margin", "multilabel_soft_margin_loss": "multilabel_soft",
    "gaussian_nll_loss": "gaussian", "poisson_nll_loss": "poisson", "triplet_margin_loss": "triplet",
    "triplet_margin_with_distance_loss": "triplet", "ctc_loss": "ctc",
}  # fmt: skip


def _fn(name: str, inputs: Callable[[Maker], tuple[Any, ...]], **kwargs: Any) -> Builder:
    def build(t: Maker) -> Built:
        fn = getattr(t.torch.nn.functional, name)
        return (lambda *a: fn(*a, **kwargs)), inputs(t)

    return build


def _weights(t: Maker, *shape: int) -> Any:
    return t.f(*shape).requires_grad_(False) * 0.1


def _functional_builders() -> dict[str, tuple[str, Builder, bool]]:
    """F name (or 'name[variant]') -> (family, builder, grad), one rule per family."""
    rules: dict[str, tuple[str, Builder, bool]] = {}

    def add(
        key: str, family: str, inputs: Callable[[Maker], tuple[Any, ...]], grad: bool = True, **kwargs: Any
    ) -> None:
        rules[key] = (family, _fn(key.split("[")[0], inputs, **kwargs), grad)

    act = lambda t: (t.act(),)  # noqa: E731
    h = lambda t: t.s.hidden  # noqa: E731
    for name in _UNARY:
        add(name, "activation", act)
    for name in _INPLACE:
        add(name, "activation", act, grad=False)  # NB: in place on a leaf: inference
    add("threshold", "activation", lambda t: (t.act(), 0.1, 0.0))
    add("threshold_", "activation", lambda t: (t.act(), 0.1, 0.0), grad=False)
    add("prelu", "activation", lambda t: (t.img(2), _weights(t, t.s.channels)))
    for name in ("softmax", "softmin", "log_softmax", "gumbel_softmax"):
        add(name, "softmax", act, dim=-1)
    for name, dims in (("dropout1d", 1), ("dropout2d", 2), ("dropout3d", 3), ("feature_alpha_dropout", 2)):
        add(name, "dropout", lambda t, d=dims: (t.img(d),))
    # norms
    add("layer_norm", "norm", lambda t: (t.act(), (h(t),), _weights(t, h(t)), _weights(t, h(t))))
    add("rms_norm", "norm", lambda t: (t.act(), (h(t),), _weights(t, h(t))))
    add("group_norm", "norm", lambda t: (t.img(2), 4))
    add("instance_norm", "norm", lambda t: (t.img(2),))
    add("local_response_norm", "norm", lambda t: (t.img(2), 5))
    add("batch_norm", "norm", _batch_norm_inputs, training=True)
    # pools, unpools, convolutions, by dimensionality
    for d in (1, 2, 3):
        for kind in ("max", "avg"):
            add(f"{kind}_pool{d}d", "pool", lambda t, d=d: (t.img(d), 2))
            add(f"adaptive_{kind}_pool{d}d", "pool", lambda t, d=d: (t.img(d), 4))
        add(f"max_pool{d}d_with_indices", "pool", lambda t, d=d: (t.img(d), 2))
        add(f"adaptive_max_pool{d}d_with_indices", "pool", lambda t, d=d: (t.img(d), 4))
        add(f"lp_pool{d}d", "pool", lambda t, d=d: (t.img(d), 2.0, 2))
        add(f"max_unpool{d}d", "pool", lambda t, d=d: (*_pooled(t, d), 2))
        add(
            f"conv{d}d", "conv", lambda t, d=d: (t.img(d), _weights(t, t.s.channels, t.s.channels, *[3] * d)), padding=1
        )
        add(f"conv_transpose{d}d", "conv", lambda t, d=d: (t.img(d), _weights(t, t.s.channels, t.s.channels, *[3] * d)),
            padding=1)  # fmt: skip
        if d > 1:
            add(f"fractional_max_pool{d}d", "pool", lambda t, d=d: (t.img(d), 2), output_ratio=(0.5,) * d)
            add(f"fractional_max_pool{d}d_with_indices", "pool", lambda t, d=d: (t.img(d), 2), output_ratio=(0.5,) * d)
    add("adaptive_avg_pool1d", "pool", lambda t: (t.img(1), 4))
    add("conv_tbc", "conv", lambda t: (t.f(t.s.seq, t.s.batch, h(t)), _weights(t, 3, h(t), h(t)), _weights(t, h(t)), 1))
    add(
        "fold", "conv", lambda t: (t.f(t.s.batch, t.s.channels * 9, t.s.side2**2), (t.s.side2, t.s.side2), 3), padding=1
    )
    add("unfold", "conv", lambda t: (t.img(2), 3), padding=1)
    # linear, embedding, attention
    add("linear", "linear", lambda t: (t.act(), _weights(t, h(t), h(t)), _weights(t, h(t))))
    add("bilinear", "linear", _bilinear_inputs)
    rules["grouped_mm"] = ("linear", _grouped_mm, True)
    add("embedding", "embedding", lambda t: (t.i(t.s.vocab, t.s.batch, t.s.seq), t.f(t.s.vocab, h(t))))
    add("embedding_bag", "embedding", lambda t: (t.i(t.s.vocab, t.s.batch, t.s.seq), t.f(t.s.vocab, h(t))), mode="mean")
    add("one_hot", "embedding", lambda t: (t.i(t.s.classes, t.s.batch, t.s.seq), t.s.classes), grad=False)
    qkv = lambda t: tuple(t.f(t.s.batch, t.s.heads, t.s.seq, h(t) // t.s.heads) for _ in range(3))  # noqa: E731
    add("scaled_dot_product_attention", "attention", qkv)
    add("scaled_dot_product_attention[causal]", "attention", qkv, is_causal=True)
    # shuffles, padding, interpolation, sampling
    for name in ("pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "native_channel_shuffle"):
        add(name, "upsample", lambda t: (t.img(2), 2))
    for mode in ("constant", "reflect", "replicate", "circular"):
        add(f"pad[{mode}]", "padding", lambda t: (t.img(2), (2, 2, 2, 2)), mode=mode)
    for mode, d in (("nearest", 2), ("nearest-exact", 2), ("linear", 1), ("bilinear", 2), ("bicubic", 2),
                    ("trilinear", 3), ("area", 2)):  # fmt: skip
        add(f"interpolate[{mode}]", "upsample", lambda t, d=d: (t.img(d),), scale_factor=2, mode=mode)
    for name in ("upsample", "upsample_nearest", "upsample_bilinear"):
        add(name, "upsample", lambda t: (t.img(2),), scale_factor=2)
    add("grid_sample", "upsample", lambda t: (t.img(2), t.u(t.s.batch, t.s.side2, t.s.side2, 2) * 2 - 1),
        align_corners=False)  # fmt: skip
    add("affine_grid", "upsample", lambda t: (t.f(t.s.batch, 2, 3), [t.s.batch, t.s.channels, t.s.side2, t.s.side2]),
        align_corners=False)  # fmt: skip
    # distances
    add("cosine_similarity", "distance", _pair)
    add("pairwise_distance", "distance", _pair)
    add("pdist", "distance", lambda t: (t.rows(),))
    # losses: the inputs the loss classes get
    for name, key in _LOSS_OF_FUNCTION.items():
        add(name, "loss", LOSS_INPUTS[key])
    add("linear_cross_entropy", "loss", lambda t: (t.rows(), _weights(t, t.s.vocab, h(t)),
                                                   t.i(t.s.vocab, t.s.batch * t.s.seq)))  # fmt: skip
    return rules


def _batch_norm_inputs(t: Maker) -> tuple[Any, ...]:
    """An image and the running mean and variance (updated in place, never requiring grad)."""
    torch, c = t.torch, t.s.channels
    return t.img(2), torch.zeros(c, device=t.device, dtype=t.dtype), torch.ones(c, device=t.device, dtype=t.dtype)


def _pooled(t: Maker, dims: int) -> tuple[Any, Any]:
    """A max pool's output and indices (max_unpool's input)."""
    return getattr(t.torch.nn.functional, f"max_pool{dims}d")(t.img(dims), 2, return_indices=True)


def _bilinear_inputs(t: Maker) -> tuple[Any, ...]:
    rows, w = t.s.batch * t.s.seq, t.s.bilinear
    return t.f(rows, w), t.f(rows, w), _weights(t, w, w, w)


def _grouped_mm(t: Maker) -> Built:
    if not str(t.device).startswith("cuda"):
        raise Skip("grouped_mm runs on CUDA only")
    torch, s = t.torch, t.s
    experts, tokens = 8, s.batch * s.seq
    a = torch.randn(tokens, s.hidden, device=t.device, dtype=torch.bfloat16)
    b = torch.randn(experts, s.hidden, s.hidden, device=t.device, dtype=torch.bfloat16).transpose(-1, -2)
    offs = torch.arange(1, experts + 1, device=t.device, dtype=torch.int32) * (tokens // experts)
    return (lambda x, w: torch.nn.functional.grouped_mm(x, w, offs=offs)), (a, b)


def functional_cases() -> list[Case]:
    """A case per rule whose function this torch has (a rule written for a newer torch is left out here)."""
    import torch.nn.functional as F

    rules = _functional_builders()
    return [
        Case(f"F.{name}", family, build, grad)
        for name, (family, build, grad) in rules.items()
        if hasattr(F, name.split("[")[0])
    ]


def functional_unbuilt() -> list[str]:
    """Public torch.nn.functional functions neither built (under their name or a variant) nor listed as exceptions."""
    built = {name.split("[")[0] for name in _functional_builders()}
    return [n for n in functional_names() if n not in built and n not in FUNCTIONAL_EXCEPTIONS]


# ---------------------------------------------------------------------------------- fft, linalg, sort/search


def fft_cases() -> list[Case]:
    """Every public function of torch.fft: real input for the forward transforms, a complex spectrum for the
    inverse real ones, a length for the frequency grids."""
    import torch

    cases = []
    for name in sorted(n for n in dir(torch.fft) if not n.startswith("_") and callable(getattr(torch.fft, n))):
        if inspect.isclass(getattr(torch.fft, name)):
            continue
        cases.append(Case(f"torch.fft.{name}", "fft", _fft_builder(name), grad=False, float32=True))
    return cases


def _fft_builder(name: str) -> Builder:
    def build(t: Maker) -> Built:
        fn = getattr(t.torch.fft, name)
        x = t.img(2)
        if name.endswith("freq"):
            return (lambda n: fn(n, device=t.device)), (t.s.length,)
        if name.startswith(("irfft", "hfft")):
            return fn, (t.torch.fft.rfftn(x, dim=(-2, -1)),)
        return fn, (x,)

    return build


def linalg_cases() -> list[Case]:
    import torch

    la = torch.linalg
    rows: dict[str, Callable[[Maker], tuple[Any, ...]]] = {
        "matmul": lambda t: (t.act(), t.f(t.s.hidden, t.s.hidden)),
        "vector_norm": lambda t: (t.act(),),
        "matrix_norm": lambda t: (t.spd(),),
        "norm": lambda t: (t.act(),),
        "vecdot": lambda t: (t.act(), t.act()),
        "cross": lambda t: (t.f(t.s.batch * t.s.seq, 3), t.f(t.s.batch * t.s.seq, 3)),
        "multi_dot": lambda t: tuple(t.f(t.s.hidden, t.s.hidden) for _ in range(3)),
        "solve": lambda t: (t.spd(), t.f(t.s.batch, t.s.hidden, t.s.seq)),
        "solve_triangular": lambda t: (t.spd().triu(), t.f(t.s.batch, t.s.hidden, t.s.seq)),
        "inv": lambda t: (t.spd(),),
        "det": lambda t: (t.spd(),),
        "slogdet": lambda t: (t.spd(),),
        "cholesky": lambda t: (t.spd(),),
        "qr": lambda t: (t.spd(),),
        "svd": lambda t: (t.spd(),),
        "svdvals": lambda t: (t.spd(),),
        "eigh": lambda t: (t.spd(),),
        "eigvalsh": lambda t: (t.spd(),),
        "lu_factor": lambda t: (t.spd(),),
        "pinv": lambda t: (t.spd(),),
        "matrix_exp": lambda t: (t.spd() / t.s.hidden,),
        "matrix_power": lambda t: (t.spd(), 3),
        "lstsq": lambda t: (t.spd(), t.f(t.s.batch, t.s.hidden, t.s.seq)),
    }
    out = []
    for name, inputs in rows.items():
        fn = getattr(la, name)
        if name == "multi_dot":
            fn = lambda *mats, multi_dot=fn: multi_dot(list(mats))  # noqa: E731
        elif name == "solve_triangular":
            fn = lambda a, b, solve=fn: solve(a, b, upper=True)  # noqa: E731
        out.append(Case(f"torch.linalg.{name}", "linalg", lambda t, fn=fn, inputs=inputs: (fn, inputs(t)),
                        grad=name not in ("lu_factor", "lstsq"), float32=True))  # fmt: skip
    return out


def sort_cases() -> list[Case]:
    import torch

    k = 8
    rows: dict[str, tuple[Callable[..., Any], Callable[[Maker], tuple[Any, ...]], bool]] = {
        "sort": (lambda x: torch.sort(x, dim=-1), lambda t: (t.rows(),), True),
        "argsort": (lambda x: torch.argsort(x, dim=-1), lambda t: (t.rows(),), False),
        "msort": (torch.msort, lambda t: (t.rows(),), True),
        "topk": (lambda x: torch.topk(x, k, dim=-1), lambda t: (t.rows(),), True),
        "kthvalue": (lambda x: torch.kthvalue(x, k, dim=-1), lambda t: (t.rows(),), True),
        "median": (lambda x: torch.median(x, dim=-1), lambda t: (t.rows(),), True),
        "nanmedian": (lambda x: torch.nanmedian(x, dim=-1), lambda t: (t.rows(),), True),
        "mode": (lambda x: torch.mode(x, dim=-1), lambda t: (t.rows(),), False),
        "quantile": (lambda x: torch.quantile(x, 0.9, dim=-1), lambda t: (t.rows(),), True),
        "cummax": (lambda x: torch.cummax(x, dim=-1), lambda t: (t.rows(),), True),
        "cummin": (lambda x: torch.cummin(x, dim=-1), lambda t: (t.rows(),), True),
        "unique": (
            lambda x: torch.unique(x, return_counts=True),
            lambda t: (t.i(t.s.vocab, t.s.batch * t.s.seq * 4),),
            False,
        ),
        "unique_consecutive": (
            torch.unique_consecutive,
            lambda t: (t.i(t.s.vocab, t.s.batch * t.s.seq * 4).sort()[0],),
            False,
        ),
        "searchsorted": (torch.searchsorted, lambda t: (t.rows().sort(-1)[0], t.rows()), False),
        "bucketize": (torch.bucketize, lambda t: (t.rows(), t.f(t.s.hidden).sort()[0]), False),
        "histc": (lambda x: torch.histc(x, bins=64), lambda t: (t.rows(),), False),
        "bincount": (torch.bincount, lambda t: (t.i(t.s.vocab, t.s.batch * t.s.seq * 4),), False),
        "cdist": (
            torch.cdist,
            lambda t: (t.f(t.s.batch, t.s.seq, t.s.hidden), t.f(t.s.batch, t.s.seq * 2, t.s.hidden)),
            True,
        ),
    }
    return [
        Case(f"torch.{name}", "sort/search", lambda t, fn=fn, inputs=inputs: (fn, inputs(t)), grad=grad, float32=True)
        for name, (fn, inputs, grad) in rows.items()
    ]


def all_cases() -> list[Case]:
    return [*module_cases(), *functional_cases(), *fft_cases(), *linalg_cases(), *sort_cases()]


#: --quick: a handful of cases, each family's cheapest, for the tests
QUICK = ["nn.Linear", "nn.ReLU", "nn.Conv2d", "nn.LayerNorm", "F.gelu", "torch.sort"]


# ------------------------------------------------------------------------------------------------ running


@dataclass
class CaseResult:
    name: str
    family: str
    status: str = "ok"  # ok | failed | skipped
    mode: str = ""  # training | inference
    dtype: str = ""
    ops: int = 0  # counted aten calls (views included)
    covered: list[str] = field(default_factory=list)  # aten ops with a formula, sorted
    uncovered: dict[str, float] = field(default_factory=dict)  # aten op -> device seconds per iteration
    time_s: float = 0.0  # device time of the timed ops, per iteration
    uncounted_s: float = 0.0  # of which in ops with no formula
    unmatched_s: float = 0.0  # device time the profiler could not join to a counted op
    seconds: float = 0.0  # host seconds the case took
    error: str = ""
    note: str = ""

    @property
    def uncounted_share(self) -> float:
        return self.uncounted_s / self.time_s if self.time_s > 0 else 0.0


class Fn:
    """A callable as a module (count_ops names the model's ops after it)."""

    def __new__(cls, fn: Callable[..., Any]) -> Any:
        import torch

        class Function(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.fn = fn

            def forward(self, *args: Any) -> Any:
                return self.fn(*args)

        return Function()


def _one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    line = text[0] if text else type(exc).__name__
    return line[:200]


def _build(case: Case, sizes: Sizes, device: str, dtype: Any, grads: str) -> tuple[Any, tuple[Any, ...]]:
    """The case's model and inputs; ``grads``: which float inputs require grad ('all', 'first', '' none)."""
    import torch

    torch.manual_seed(0)
    model, inputs = case.build(Maker(sizes, device, dtype))
    if not isinstance(model, torch.nn.Module):
        model = Fn(model)
    out, first = [], True
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            x = x.detach().requires_grad_(grads == "all" or (grads == "first" and first))
            first = False
        out.append(x)
    return model, tuple(out)


def run_case(case: Case, sizes: Sizes, device: str, *, warmup: int, iters: int) -> CaseResult:
    """Count and time one case; a failure is recorded with its one-line error."""
    import warnings

    import torch

    warnings.filterwarnings("ignore")  # NB: deprecations of the classes the census builds on purpose
    start = time.perf_counter()
    result = CaseResult(case.name, case.family)
    dtypes = [torch.float32] if case.float32 or sizes.dtype == "fp32" else [torch.bfloat16, torch.float32]
    # NB: training with every float input requiring grad; where an input cannot (a loss's target, running
    # statistics), only the first; where no backward runs (integer or complex outputs), inference.
    modes = ["training", "training:first", "inference"] if case.grad else ["inference"]
    errors: list[str] = []
    for dtype in dtypes:
        for mode in modes:
            try:
                _measure(case, sizes, device, dtype, mode, result, warmup=warmup, iters=iters)
            except Skip as exc:
                result.status, result.note = "skipped", str(exc)
                result.seconds = time.perf_counter() - start
                return result
            except Exception as exc:  # NB: one case's failure never stops the census
                errors.append(f"{mode}, {_dtype_name(dtype)}: {_one_line(exc)}")
                continue
            result.status = "ok"
            result.note = "; ".join(errors)
            result.seconds = time.perf_counter() - start
            return result
    result.status, result.error = "failed", errors[-1] if errors else "no run"
    result.note = "; ".join(errors[:-1])
    result.seconds = time.perf_counter() - start
    return result


def _dtype_name(dtype: Any) -> str:
    return "bf16" if str(dtype).endswith("bfloat16") else "fp32"


def _measure(case: Case, sizes: Sizes, device: str, dtype: Any, mode: str, result: CaseResult, *,
             warmup: int, iters: int) -> None:  # fmt: skip
    from roofline.diagnose.count import count_ops
    from roofline.diagnose.profile import time_model

    grads = {"training": "all", "training:first": "first"}.get(mode, "")
    mode = mode.split(":")[0]
    model, inputs = _build(case, sizes, device, dtype, grads)
    if mode == "training":
        model.train()
    else:
        model.eval()
    records = count_ops(model, inputs, {}, mode=mode)  # type: ignore[arg-type]
    timing = time_model(model, inputs, {}, records, device=device, mode=mode, warmup=warmup, iters=iters)
    times: dict[int, float] = {}
    for t in timing.ops:
        # NB: the median over the profiled iterations where they are known: a preempted iteration (a shared,
        # loaded CPU) does not decide the census
        seconds = statistics.median(t.samples_s) if t.samples_s else t.device_time_s
        times[t.index] = times.get(t.index, 0.0) + seconds
    covered: set[str] = set()
    uncovered: dict[str, float] = {}
    for r in records:
        if r.counted:
            covered.add(r.op)
        else:
            name = r.op if "failed" not in r.note else f"{r.op} (formula failed)"
            uncovered[name] = uncovered.get(name, 0.0) + times.get(r.index, 0.0)
    result.mode, result.dtype = mode, _dtype_name(dtype)
    result.ops = len(records)
    result.covered = sorted(covered)
    result.uncovered = dict(sorted(uncovered.items(), key=lambda kv: -kv[1]))
    result.time_s = sum(times.values())
    result.uncounted_s = sum(uncovered.values())
    result.unmatched_s = float(timing.unmatched_time_s)


# ------------------------------------------------------------------------------------------------ totals


def totals(results: Iterable[CaseResult]) -> dict[str, Any]:
    results = list(results)
    ok = [r for r in results if r.status == "ok"]
    time_s = sum(r.time_s for r in ok)
    uncounted = sum(r.uncounted_s for r in ok)
    unmatched = sum(r.unmatched_s for r in ok)
    return {
        "cases": len(results),
        "ok": len(ok),
        "failed": sum(r.status == "failed" for r in results),
        "skipped": sum(r.status == "skipped" for r in results),
        "cases_fully_covered": sum(not r.uncovered for r in ok),
        "time_s": time_s,
        "uncounted_s": uncounted,
        "uncounted_share": uncounted / time_s if time_s > 0 else 0.0,
        "covered_share": 1 - uncounted / time_s if time_s > 0 else 0.0,
        "unmatched_s": unmatched,
        "unmatched_share": unmatched / (time_s + unmatched) if time_s + unmatched > 0 else 0.0,
    }


def uncovered_ops(results: Iterable[CaseResult]) -> list[dict[str, Any]]:
    """Every uncovered op: its device time over the census, its share of the census's time, the cases it ran in."""
    results = [r for r in results if r.status == "ok"]
    total = sum(r.time_s for r in results)
    by_op: dict[str, dict[str, Any]] = {}
    for r in results:
        for op, seconds in r.uncovered.items():
            row = by_op.setdefault(op, {"op": op, "time_s": 0.0, "cases": []})
            row["time_s"] += seconds
            row["cases"].append(r.name)
    rows = sorted(by_op.values(), key=lambda row: (-row["time_s"], row["op"]))
    for row in rows:
        row["share"] = row["time_s"] / total if total > 0 else 0.0
    return rows


def results_document(results: list[CaseResult], device: str, sizes: Sizes, argv: list[str]) -> dict[str, Any]:
    import torch

    return {
        "version": VERSION,
        "command": "python benchmarks/census.py " + " ".join(argv),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "device": device,
        "device_name": torch.cuda.get_device_name(0) if device.startswith("cuda") else platform.processor() or "cpu",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "sizes": asdict(sizes),
        "totals": totals(results),
        "uncovered_ops": uncovered_ops(results),
        "covered_ops": sorted({op for r in results for op in r.covered}),
        "cases": [{**asdict(r), "uncounted_share": r.uncounted_share} for r in results],
        "exceptions": {"modules": MODULE_EXCEPTIONS, "functional": FUNCTIONAL_EXCEPTIONS},
    }


def _percent(x: float) -> str:
    return f"{100 * x:.2f}%"


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f} us" if seconds < 1e-2 else f"{seconds * 1e3:,.1f} ms"


def render(doc: dict[str, Any], *, top: int = 25) -> str:
    lines = [f"op census on {doc['device']} ({doc['device_name']}), torch {doc['torch']}", ""]
    lines.append(f"{'case':44} {'family':12} {'mode':9} {'ops':>5} {'time':>11} {'uncounted':>9}  uncovered ops")
    for c in doc["cases"]:
        if c["status"] != "ok":
            lines.append(f"{c['name']:44} {c['family']:12} {c['status'].upper():9} {c['error'] or c['note']}")
            continue
        missing = ", ".join(op.removeprefix("aten::") for op in c["uncovered"])
        lines.append(
            f"{c['name']:44} {c['family']:12} {c['mode']:9} {c['ops']:5} {_us(c['time_s']):>11} "
            f"{_percent(c['uncounted_share']):>9}  {missing}"
        )
    lines += ["", "uncovered ops by device time:"]
    for row in doc["uncovered_ops"][:top]:
        cases = ", ".join(row["cases"][:4]) + (f" (+{len(row['cases']) - 4})" if len(row["cases"]) > 4 else "")
        lines.append(f"  {row['op']:44} {_us(row['time_s']):>11} {_percent(row['share']):>8}  {cases}")
    if len(doc["uncovered_ops"]) > top:
        lines.append(f"  ... {len(doc['uncovered_ops']) - top} more")
    tot = doc["totals"]
    lines += [
        "",
        f"cases: {tot['cases']} ({tot['ok']} ok, {tot['failed']} failed, {tot['skipped']} skipped); "
        f"{tot['cases_fully_covered']} fully covered",
        f"device time: {_us(tot['time_s'])}; uncounted {_us(tot['uncounted_s'])} = {_percent(tot['uncounted_share'])} "
        f"(covered {_percent(tot['covered_share'])}); unmatched by the profiler join {_us(tot['unmatched_s'])} "
        f"= {_percent(tot['unmatched_share'])}",
    ]
    return "\n".join(lines)


def exceptions_table() -> str:
    """The classes and functions the census does not build, and why, as markdown (docs/op-costs.md holds it)."""
    lines = ["| not built | why |", "|---|---|"]
    lines += [f"| `nn.{name}` | {why} |" for name, why in MODULE_EXCEPTIONS.items()]
    lines += [f"| `F.{name}` | {why} |" for name, why in FUNCTIONAL_EXCEPTIONS.items()]
    return "\n".join(lines) + "\n"


def select(cases: list[Case], pattern: str | None, quick: bool) -> list[Case]:
    if quick:
        cases = [c for c in cases if c.name in QUICK]
    if pattern:
        rx = re.compile(pattern)
        cases = [c for c in cases if rx.search(c.name) or rx.search(c.family)]
    return cases


def census(
    cases: list[Case],
    device: str,
    *,
    warmup: int,
    iters: int,
    progress: bool = True,
    done: Callable[[list[CaseResult]], None] | None = None,
) -> list[CaseResult]:
    """Run ``cases`` in order; ``done`` is told the results so far after each case (the partial results file)."""
    import torch

    sizes = CUDA_SIZES if device.startswith("cuda") else CPU_SIZES
    results = []
    for n, case in enumerate(cases, 1):
        result = run_case(case, sizes, device, warmup=warmup, iters=iters)
        results.append(result)
        if progress:
            what = result.error if result.status == "failed" else f"{_percent(result.uncounted_share)} uncounted"
            print(f"[{n}/{len(cases)}] {case.name}: {result.status}, {what} ({result.seconds:.1f} s)", file=sys.stderr)
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
        if done is not None:
            done(results)
    return results


def case_results(doc: dict[str, Any]) -> list[CaseResult]:
    """The cases of a results file, as CaseResults (for --merge)."""
    names = {f.name for f in fields(CaseResult)}
    return [CaseResult(**{k: v for k, v in case.items() if k in names}) for case in doc["cases"]]


def merged(docs: list[dict[str, Any]], argv: list[str]) -> dict[str, Any]:
    """One results document from several runs on the same device (a census split by --filter): the cases of all,
    a case run twice taken from the last file; totals and uncovered ops recomputed."""
    devices = {doc["device"] for doc in docs}
    if len(devices) != 1:
        raise SystemExit(f"--merge: results of different devices ({', '.join(sorted(devices))})")
    by_name: dict[str, CaseResult] = {}
    for doc in docs:
        by_name.update({r.name: r for r in case_results(doc)})
    last = docs[-1]
    out = {**last, "command": "python benchmarks/census.py " + " ".join(argv)}
    results = list(by_name.values())
    out.update(totals=totals(results), uncovered_ops=uncovered_ops(results),
               covered_ops=sorted({op for r in results for op in r.covered}),
               cases=[{**asdict(r), "uncounted_share": r.uncounted_share} for r in results],
               seconds=sum(float(doc.get("seconds", 0.0)) for doc in docs))  # fmt: skip
    return out


def _writer(path: str | None) -> Callable[[dict[str, Any]], None]:
    def write(doc: dict[str, Any]) -> None:
        if path is None:
            return
        from roofline.fileio import atomic_write_text

        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out, json.dumps(doc, indent=1) + "\n")

    return write


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N (default cpu)")
    parser.add_argument("--filter", default=None, help="a regex on the case names or families")
    parser.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    parser.add_argument("--json", action="store_true", help="print the results as JSON instead of the table")
    parser.add_argument("--out", default=None, help="write the results as JSON to this file (as they come)")
    parser.add_argument("--warmup", type=int, default=None, help="warm-up calls per case (default 3 CPU, 2 GPU)")
    parser.add_argument("--iters", type=int, default=None, help="profiled iterations per case (default 5; medians)")
    parser.add_argument("--threads", type=int, default=None, help="torch's CPU threads (1: steadier when loaded)")
    parser.add_argument("--merge", nargs="+", metavar="FILE", help="no run: merge the results of split runs")
    parser.add_argument("--exceptions", action="store_true", help="no run: print what is not built, and why")
    args = parser.parse_args(argv)
    if args.exceptions:
        print(exceptions_table(), end="")
        return 0
    write = _writer(args.out)
    if args.merge:
        doc = merged([json.loads(Path(p).read_text(encoding="utf-8")) for p in args.merge], argv)
        print(json.dumps(doc, indent=1) if args.json else render(doc))
        write(doc)
        return 0
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    cuda = args.device.startswith("cuda")
    warmup = args.warmup if args.warmup is not None else (2 if cuda else 3)
    iters = args.iters if args.iters is not None else 5
    cases = select(all_cases(), args.filter, args.quick)
    if not cases:
        print("no case matches", file=sys.stderr)
        return 2
    start = time.perf_counter()
    sizes = CUDA_SIZES if cuda else CPU_SIZES

    def document(results: list[CaseResult]) -> dict[str, Any]:
        doc = results_document(results, args.device, sizes, argv)
        doc["seconds"] = time.perf_counter() - start
        return doc

    def partial(so_far: list[CaseResult]) -> None:
        if cuda or len(so_far) % 25 == 0:
            write(document(so_far))

    results = census(cases, args.device, warmup=warmup, iters=iters, done=partial)
    doc = document(results)
    print(json.dumps(doc, indent=1) if args.json else render(doc))
    write(doc)
    if args.out:
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The analytic cost of one aten op call: FLOPs, compulsory bytes, the dtype and math unit its roof is chosen by.

A registry in the spirit of ``torch.utils.flop_counter``: a dict from aten ops ('aten::mm', keyed by the name that
``OpRecord.op`` and the profiler use, so that importing this package does not import torch) to shape-only formulas.
Each formula gets the call (the op, its arguments bound to their schema names, its outputs) and returns an
:class:`OpCost`. Every assumption is an ``NB:`` comment next to its formula and a line in docs/op-costs.md.

Conventions (as roofline/costs): 2 FLOPs per multiply-add; a transcendental counts 1 FLOP; compulsory bytes =
each tensor input read once + each output written once, where

- a view or alias (view, permute, transpose, expand, slice, select, split, detach, ...) moves 0 bytes and does
  0 FLOPs (math 'none');
- a broadcast input (a stride-0 dim) counts its unique elements once;
- the same tensor passed twice (``x * x``) is read once;
- an in-place op (``add_``) reads and writes the tensor it mutates; an op that overwrites without reading
  (``fill_``, ``zero_``, ``copy_``'s destination, ``uniform_``) only writes it; an ``out=`` tensor is written,
  not read;
- a gather (embedding, index_select, gather, advanced indexing) reads the rows it touches (indices x row size,
  repeats counted), not the whole table; a scatter writes (and, when it accumulates, reads) the rows it touches;
- a reduction reads its input and writes its small output.

An op with no formula gets ``flops=None, bytes=None`` and the note :data:`NO_FORMULA`: it is listed as uncounted
(:func:`roofline.diagnose.count.uncovered`), never counted as zero. Matmul-family FLOPs follow
``torch.utils.flop_counter``'s formulas where it has one (mm, addmm, bmm, baddbmm, _scaled_mm, the convolutions
forward and backward), computed here from the shapes (tests compare them with torch's); attention is ours (causal
masking, GQA), as are element-wise ops, norms, softmax, reductions, copies and index ops.

One module per op family; importing the package registers them all:

- :mod:`~roofline.costs.aten.call`: :class:`Call` (an op call as the formulas see it), :class:`OpCost`, the byte
  rules (:func:`read_bytes`, :func:`write_bytes`, :func:`io_bytes`) and :func:`compute_dtype`;
- :mod:`~roofline.costs.aten.registry`: ``OP_COSTS``, :func:`register`, :func:`covered_ops`, :func:`describe` (a
  row of the docs table) and :func:`op_cost`;
- :mod:`~roofline.costs.aten.table`: :func:`covered_table`, docs/op-costs.md's covered-ops section generated from
  the registry (``python -m roofline.costs.aten`` prints it);
- :mod:`~roofline.costs.aten.movement` (views, allocations, copies, creations), :mod:`~roofline.costs.aten.elementwise`,
  :mod:`~roofline.costs.aten.reductions`, :mod:`~roofline.costs.aten.index` (gathers, scatters),
  :mod:`~roofline.costs.aten.norms` (norms, softmax), :mod:`~roofline.costs.aten.matmul`,
  :mod:`~roofline.costs.aten.conv` and :mod:`~roofline.costs.aten.attention`: the formulas;
- :mod:`~roofline.costs.aten.pooling`, :mod:`~roofline.costs.aten.sampling` (upsampling, grid sampling),
  :mod:`~roofline.costs.aten.embedding_bag`, :mod:`~roofline.costs.aten.distance` (cdist, pdist) and
  :mod:`~roofline.costs.aten.fft`: the spatial families;
- :mod:`~roofline.costs.aten.linalg`: the factorizations and solvers of ``torch.linalg`` (textbook counts) and
  ``_trilinear`` (nn.Bilinear).
"""

from __future__ import annotations

# Importing a family registers its formulas.
from roofline.costs.aten import (  # noqa: F401
    attention,
    conv,
    distance,
    elementwise,
    embedding_bag,
    fft,
    index,
    linalg,
    losses,
    matmul,
    movement,
    norms,
    pooling,
    reductions,
    rnn,
    sampling,
    sorting,
    transformer,
)
from roofline.costs.aten.attention import block_mask_density, causal_pairs, flex_attention_cost
from roofline.costs.aten.call import (
    NO_FORMULA,
    Call,
    Math,
    OpCost,
    compute_dtype,
    dtype_name,
    io_bytes,
    is_strided,
    read_bytes,
    tensor_bytes,
    unique_numel,
    write_bytes,
)
from roofline.costs.aten.custom import PLUGIN_ERRORS, load_plugins, register_cost
from roofline.costs.aten.matmul import tf32_enabled
from roofline.costs.aten.registry import FAMILY, OP_COSTS, ROWS, Formula, covered_ops, describe, op_cost, register
from roofline.costs.aten.table import covered_table

__all__ = [
    "FAMILY",
    "NO_FORMULA",
    "OP_COSTS",
    "PLUGIN_ERRORS",
    "ROWS",
    "Call",
    "Formula",
    "Math",
    "OpCost",
    "block_mask_density",
    "causal_pairs",
    "compute_dtype",
    "covered_ops",
    "covered_table",
    "describe",
    "dtype_name",
    "flex_attention_cost",
    "io_bytes",
    "is_strided",
    "load_plugins",
    "op_cost",
    "read_bytes",
    "register",
    "register_cost",
    "tensor_bytes",
    "tf32_enabled",
    "unique_numel",
    "write_bytes",
]

"""The naive selective scan of a Mamba-style state space model, as the source text writes it (seed 000,
``mamba_scan_naive``): a Python loop over the sequence updating the hidden state h = exp(delta A) h + B x.

Bottleneck: the sequential recurrence. Each step issues the same few element-wise ops and a reduction on one time
slice (d_model x d_state), and each step reads the hidden state the step before wrote; the steps run one after the
other, each op far too small to fill the device and paying its own launch. The recurrence is associative
(h_t = A_t h_{t-1} + b_t composes as (A2 A1, A2 b1 + b2)), so a parallel (or chunked) scan does the same work in
log(steps) dependent rounds.
Expected top finding: ``sequential-loop`` (associativity: a parallel scan or chunked recurrence).

Sizes: ``ROOFLINE_MODEL_SIZE=small`` (default: d_model 2048, d_state 16 as in the text, 64 steps: about a second
on a laptop CPU) or ``large`` (the text's d_model 2048, d_state 16, batch 1, 512 steps), or
``roofline diagnose mamba_scan_naive.py -- --size large``.
"""

import os
import sys

import torch
from torch import nn

# small (default): about a second on a laptop CPU; large: GPU-sized. Env ROOFLINE_MODEL_SIZE or `-- --size large`.
SIZE = os.environ.get("ROOFLINE_MODEL_SIZE", "small")
if "--size" in sys.argv[:-1]:
    SIZE = sys.argv[sys.argv.index("--size") + 1]
BATCH, SEQ_LEN, D_MODEL, D_STATE = {"small": (1, 64, 2048, 16), "large": (1, 512, 2048, 16)}[SIZE]
EXPECTED_FINDING = "sequential-loop"


class Model(nn.Module):
    def forward(self, x, A, B, C, delta):
        """x: (batch, seq_len, d_model); A: (d_model, d_state); B, C: (batch, seq_len, d_state);
        delta: (batch, seq_len, d_model). Returns (batch, seq_len, d_model)."""
        batch, seq_len, d_model = x.shape
        d_state = A.shape[1]
        h = x.new_zeros(batch, d_model, d_state)  # hidden state
        outputs = []
        for t in range(seq_len):
            # update the hidden state: h = A_bar * h + B * x, A_bar = exp(delta * A)
            A_bar = torch.exp(delta[:, t, :, None] * A)  # (batch, d_model, d_state)
            h = A_bar * h + B[:, t, None, :] * x[:, t, :, None]
            # output: y = C * h
            y = (C[:, t, None, :] * h).sum(dim=-1)  # (batch, d_model)
            outputs.append(y)
        return torch.stack(outputs, dim=1)


def get_init_inputs():
    return ()


def get_inputs():
    x = torch.randn(BATCH, SEQ_LEN, D_MODEL)
    A = torch.randn(D_MODEL, D_STATE)
    B = torch.randn(BATCH, SEQ_LEN, D_STATE)
    C = torch.randn(BATCH, SEQ_LEN, D_STATE)
    delta = torch.randn(BATCH, SEQ_LEN, D_MODEL).abs()
    return (x, A, B, C, delta)

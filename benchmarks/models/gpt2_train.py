"""A small GPT-2-like language model for the training match check (benchmarks/training_match.py).

Laid out as Hugging Face's GPT2LMHeadModel: token and position embeddings, pre-norm blocks (LayerNorm, fused QKV
Linear, causal attention written out as GPT-2's eager attention, dropout, GELU(tanh) MLP), a final LayerNorm, an
LM head tied to the token embedding, and the shifted cross-entropy loss computed in forward(). Sizes from the
environment: ROOFLINE_MODEL_SIZE=large gives GPT-2 small's (768 hidden, 12 heads, 12 layers, seq 1024);
ROOFLINE_ATTENTION=sdpa uses F.scaled_dot_product_attention (Hugging Face's default) instead of the eager one.
"""

import math
import os

import torch
from torch import nn
from torch.nn import functional as F

if os.environ.get("ROOFLINE_MODEL_SIZE") == "large":
    VOCAB, HIDDEN, HEADS, LAYERS, SEQ, BATCH = 50257, 768, 12, 12, 1024, 4
else:
    VOCAB, HIDDEN, HEADS, LAYERS, SEQ, BATCH = 512, 64, 4, 2, 32, 2
SDPA = os.environ.get("ROOFLINE_ATTENTION") == "sdpa"  # Hugging Face's default attention (else: eager)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(HIDDEN)
        self.c_attn = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.c_proj = nn.Linear(HIDDEN, HIDDEN)
        self.ln_2 = nn.LayerNorm(HIDDEN)
        self.c_fc = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.c_proj2 = nn.Linear(4 * HIDDEN, HIDDEN)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(h, dim=-1)
        q, k, v = (t.view(b, s, HEADS, h // HEADS).transpose(1, 2) for t in (q, k, v))
        if SDPA:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=0.1 if self.training else 0.0, is_causal=True)
            y = y.transpose(1, 2).reshape(b, s, h)
            x = x + self.drop(self.c_proj(y))
            return x + self.drop(self.c_proj2(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")))
        w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(h // HEADS)
        mask = torch.tril(torch.ones(s, s, dtype=torch.bool, device=x.device))
        w = w.masked_fill(~mask, float("-inf"))
        w = self.drop(F.softmax(w, dim=-1))
        y = torch.matmul(w, v).transpose(1, 2).reshape(b, s, h)
        x = x + self.drop(self.c_proj(y))
        return x + self.drop(self.c_proj2(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, HIDDEN)
        self.wpe = nn.Embedding(SEQ, HIDDEN)
        self.h = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(HIDDEN)
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, ids, labels):
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.wte(ids) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1))
        return loss


def get_init_inputs():
    return ()


def get_inputs():
    torch.manual_seed(0)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    return (ids, ids.clone())

"""GPT-2 small (benchmarks/models/gpt2_hf.py) compiled by the file itself (torch.compile, default mode): the
compiled-model check of `roofline diagnose` (fused kernels attributed, total time against CUDA events)."""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt2_hf import Model, get_inputs

model = torch.compile(Model())
example_inputs = get_inputs()

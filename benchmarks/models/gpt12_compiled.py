"""benchmarks/models/gpt12.py compiled by the file itself (torch.compile): `roofline diagnose` counts the original
computation, times the compiled one and attributes inductor's fused kernels to the ops they fused."""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpt12 import Model as _Model
from gpt12 import get_init_inputs, get_inputs

model = torch.compile(_Model(*get_init_inputs()))
example_inputs = get_inputs()

"""Two element-wise ops in a row: ``F.mish(F.mish(x))`` (issue 27's mish2.py): the intermediate goes to memory and
back. Expected top finding: ``elementwise-pair`` (torch.compile fuses them).
"""

import torch
import torch.nn.functional as F

EXPECTED_FINDING = "elementwise-pair"


class Model(torch.nn.Module):
    def forward(self, x):
        return F.mish(F.mish(x))


def get_inputs():
    return (torch.randn(2048, 2048),)


def get_init_inputs():
    return ()

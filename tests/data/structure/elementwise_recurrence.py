"""An element-wise recurrence over the same elements: ``y = y * 0.9 + x`` eight times (issue 27's recur.py).

Each element's steps depend on that element alone: no scan is needed, one fused kernel (torch.compile) runs every
step with the element in registers. Expected top finding: ``elementwise-recurrence``.
"""

import torch

EXPECTED_FINDING = "elementwise-recurrence"


class Model(torch.nn.Module):
    def forward(self, x):
        y = torch.zeros_like(x)
        for _ in range(8):
            y = y * 0.9 + x
        return y


def get_inputs():
    return (torch.randn(1024, 1024),)


def get_init_inputs():
    return ()

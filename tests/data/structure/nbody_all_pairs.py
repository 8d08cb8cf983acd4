"""All-pairs gravity through broadcasting (issue 27's nbody.py; the source text's N-body): ``pos[None] -
pos[:, None]``, per-pair math, a sum over one axis. Expected top finding: ``all-pairs`` (symmetry: half the pairs;
separability + locality: a Barnes-Hut tree / fast multipole method, O(N log N)); ``fusion-across-reduction`` too.
"""

import torch

EXPECTED_FINDING = "all-pairs"


class Model(torch.nn.Module):
    def forward(self, pos, mass):
        d = pos[None, :, :] - pos[:, None, :]
        r2 = (d * d).sum(-1) + 1e-3
        inv = r2**-1.5
        return (d * (inv * mass[None, :])[..., None]).sum(1)


def get_inputs():
    return (torch.randn(1024, 3), torch.rand(1024))


def get_init_inputs():
    return ()

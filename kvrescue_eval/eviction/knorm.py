from dataclasses import dataclass

import torch

from .view import CacheView


@dataclass
class KNorm:
    """KNorm (Devoto et al., 2024, arXiv:2406.11430; kvpress `KnormPress`): keep the keys of lowest L2 norm.

    Needs no queries: a low key norm correlates with high attention.
    """

    def score(self, view: CacheView) -> torch.Tensor:
        return -view.keys[:, :, :view.candidates].float().norm(dim=-1)

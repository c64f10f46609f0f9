from dataclasses import dataclass

import torch


@dataclass
class KNorm:
    """KNorm (Devoto et al., 2024, arXiv:2406.11430; kvpress `KnormPress`): keep the keys of lowest L2 norm.

    Needs no queries: a low key norm correlates with high attention.
    """

    def score(self, queries: torch.Tensor, keys: torch.Tensor, window: int) -> torch.Tensor:
        return -keys[:, :, : keys.shape[2] - window].float().norm(dim=-1)

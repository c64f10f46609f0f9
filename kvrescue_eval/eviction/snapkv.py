from dataclasses import dataclass

import torch

from .attention import check_pool_kernel, window_importance


@dataclass
class SnapKV:
    """SnapKV (Li et al., 2024, arXiv:2404.14469), run at decode time as in the R-KV repository.

    Score = pooled attention of the observation window (see `window_importance`). Max-pooling makes exact
    ties; any choice inside a tie is correct.
    """

    pool_kernel: int = 7

    def __post_init__(self):
        check_pool_kernel(self.pool_kernel)

    def score(self, queries: torch.Tensor, keys: torch.Tensor, window: int) -> torch.Tensor:
        return window_importance(queries, keys, window, self.pool_kernel)

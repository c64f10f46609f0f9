from dataclasses import dataclass

import torch

from .attention import check_pool_kernel, window_importance
from .view import CacheView


@dataclass
class SnapKV:
    """SnapKV (Li et al., 2024, arXiv:2404.14469), run at decode time as in the R-KV repository.

    Score = pooled attention of the observation window (see `window_importance`). Max-pooling makes exact
    ties; any choice inside a tie is correct.
    """

    pool_kernel: int = 7

    def __post_init__(self):
        check_pool_kernel(self.pool_kernel)

    def score(self, view: CacheView) -> torch.Tensor:
        return window_importance(view.window_queries, view.keys, view.window, self.pool_kernel, view.valid)

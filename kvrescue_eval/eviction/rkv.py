from dataclasses import dataclass

import torch

from .attention import check_pool_kernel, window_importance
from .redundancy import key_redundancy
from .view import CacheView


@dataclass
class RKV:
    """R-KV (Cai et al., 2025, arXiv:2505.24133; github.com/Zefan-Cai/R-KV, `R1KV`).

    Score = mix_lambda * importance - (1 - mix_lambda) * redundancy, where importance is SnapKV's and
    redundancy is computed over all L slots (window included) and then cut to the n candidates.
    """

    pool_kernel: int = 7
    mix_lambda: float = 0.1

    def __post_init__(self):
        check_pool_kernel(self.pool_kernel)
        if isinstance(self.mix_lambda, bool) or not isinstance(self.mix_lambda, (int, float)) \
                or not 0.0 <= self.mix_lambda <= 1.0:
            raise ValueError(f"mix_lambda must be a number in [0, 1] (R-KV uses 0.1), got {self.mix_lambda!r}")

    def score(self, view: CacheView) -> torch.Tensor:
        importance = window_importance(view.window_queries, view.keys, view.window, self.pool_kernel, view.valid)
        redundancy = key_redundancy(view.keys, valid=view.valid)[..., :view.candidates]
        return self.mix_lambda * importance - (1.0 - self.mix_lambda) * redundancy

from dataclasses import dataclass
from typing import ClassVar

import torch

from .base_scores import base_scorer
from .kept import Kept
from .selection import candidate_scores, top_scored
from .view import CacheView


@dataclass
class CriticalKV:
    """CriticalKV (Feng et al., 2025, arXiv:2502.03805; kvpress `CriticalKVPress`): value-aware, two stages.

    Of the k = budget - window candidates kept, the first int(k * first_stage_ratio) (at least 1) are the
    top ones by `scores` (default our SnapKV); the rest by (score + epsilon) * ||v||_1, the L1 norm of the
    slot's value, so that slots whose values barely move the output go first.
    Where ours differs: CriticalKV (and kvpress) weigh ||W_o v||_1, the value through each query head's
    slice of the output projection, averaged over the KV head's group; the cache hands evictors no
    weights, so ours is that with W_o = identity (the cases in tests/eviction/reference show kvpress's
    press giving our kept sets then).
    """

    NEEDS_VALUES: ClassVar[bool] = True   # the cache must hand it the cached values
    scores: str = "snapkv"
    epsilon: float = 1e-4
    first_stage_ratio: float = 0.5
    pool_kernel: int = 7
    mix_lambda: float = 0.1

    def __post_init__(self):
        value = self.first_stage_ratio
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
            raise ValueError(f"first_stage_ratio must be a number in [0, 1] (CriticalKV uses 0.5), got {value!r}")
        self._base = base_scorer(self.scores, self.pool_kernel, self.mix_lambda)

    def select(self, view: CacheView, budget: int) -> Kept:
        if view.values is None:
            raise ValueError("CriticalKV is value-aware: the cache must pass the cached values in the view")
        picks = budget - view.window
        scores = candidate_scores(self._base, view)
        first = max(1, int(picks * self.first_stage_ratio)) if self.first_stage_ratio > 0 and picks > 0 else 0
        norm = view.values[:, :, :view.candidates].float().abs().sum(dim=-1)
        rescaled = ((scores + self.epsilon) * norm).nan_to_num(nan=float("-inf"))
        rescaled = rescaled.scatter(-1, scores.topk(first, dim=-1).indices, torch.finfo(rescaled.dtype).max)
        return top_scored(view, rescaled, picks)

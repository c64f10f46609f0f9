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
    top ones by `scores` (default our SnapKV); the rest by (score + epsilon) * ||W_o v||_1: the slot's value
    through each query head's slice of the output projection, L1 norm over the hidden size, averaged over
    the query heads of the KV head's group, so that slots whose values barely move the layer's output go
    first. Both evicting caches hand over the layer's W_o (`CacheView.out_proj`).
    """

    NEEDS_VALUES: ClassVar[bool] = True   # the cache must hand it the cached values (and W_o, as both caches do)
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
        if view.values is None or view.out_proj is None:
            raise ValueError("CriticalKV is value-aware: the cache must pass the cached values and the layer's "
                             "output projection (CacheView.values, CacheView.out_proj) in the view")
        picks = budget - view.window
        scores = candidate_scores(self._base, view)
        first = max(1, int(picks * self.first_stage_ratio)) if self.first_stage_ratio > 0 and picks > 0 else 0
        norm = projected_value_norm(view.values[:, :, :view.candidates], view.out_proj)
        rescaled = ((scores + self.epsilon) * norm).nan_to_num(nan=float("-inf"))
        rescaled = rescaled.scatter(-1, scores.topk(first, dim=-1).indices, torch.finfo(rescaled.dtype).max)
        return top_scored(view, rescaled, picks)


def projected_value_norm(values: torch.Tensor, out_proj: torch.Tensor) -> torch.Tensor:
    """(batch, kv_heads, L) float32: ||W_o^h v||_1 of every slot's value v, averaged over the query heads h of
    its KV head's group. values (batch, kv_heads, L, value_dim), out_proj (q_heads, hidden, value_dim). One
    group member at a time, so at most (batch, kv_heads, L, hidden) is held."""
    kv_heads, (q_heads, hidden, value_dim) = values.shape[1], out_proj.shape
    group = q_heads // kv_heads
    per_group = out_proj.float().reshape(kv_heads, group, hidden, value_dim)
    values = values.float()
    total = torch.zeros(values.shape[:3], dtype=torch.float32, device=values.device)
    for member in range(group):
        total += torch.einsum("bkld,khd->bklh", values, per_group[:, member]).abs().sum(dim=-1)
    return total / group

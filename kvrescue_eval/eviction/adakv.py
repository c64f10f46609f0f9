from dataclasses import dataclass

import torch

from .base_scores import base_scorer
from .kept import Kept
from .selection import candidate_scores
from .view import CacheView


@dataclass
class AdaKV:
    """AdaKV (Feng et al., 2024, arXiv:2407.11550; kvpress `AdaKVPress`, by the same author): per-head
    budgets. The KV heads of a layer share kv_heads x k candidate slots (k = budget - window), chosen by
    one top-k over all heads' `scores` (default our SnapKV); each head first gets its own top
    n_safe = max(1, int(k * alpha_safeguard)) candidates. The window is kept in every head.

    Where ours differs: a head keeps at most `head_cap` x k candidates (kvpress and the paper: up to all of
    the layer's), so that the cache stays rectangular and its memory bounded: window + head_cap x k + buffer
    slots per head (`head_width`). The candidates a capped head cannot take go to the next-best slots of
    the other heads, so the layer keeps kv_heads x k in total as the reference does. kvpress masks evicted
    keys inside a full cache; we remove them.
    """

    scores: str = "snapkv"
    alpha_safeguard: float = 0.2
    head_cap: float = 2.0
    pool_kernel: int = 7
    mix_lambda: float = 0.1

    def __post_init__(self):
        for name, low, high in (("alpha_safeguard", 0.0, 1.0), ("head_cap", 1.0, float("inf"))):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
                raise ValueError(f"{name} must be a number in [{low}, {high}], got {value!r}")
        self._base = base_scorer(self.scores, self.pool_kernel, self.mix_lambda)

    def head_width(self, budget: int, window: int) -> int:
        return window + int(self.head_cap * (budget - window))

    def select(self, view: CacheView, budget: int) -> Kept:
        picks = budget - view.window
        scores = candidate_scores(self._base, view)
        batch, kv_heads, candidates = scores.shape
        cap = min(int(self.head_cap * picks), candidates)
        safe = max(1, int(picks * self.alpha_safeguard)) if self.alpha_safeguard > 0 and picks > 0 else 0
        holds = scores > float("-inf")                               # candidates that hold a token
        scores = scores.scatter(-1, scores.topk(safe, dim=-1).indices, torch.finfo(scores.dtype).max)
        scores = scores.masked_fill(~holds, float("-inf"))
        best, slots = scores.topk(cap, dim=-1)                       # each head's eligible candidates
        shared = best.reshape(batch, kv_heads * cap).topk(kv_heads * picks, dim=-1).indices
        chosen = torch.zeros(batch, kv_heads * cap, dtype=torch.bool, device=scores.device)
        chosen = chosen.scatter(-1, shared, True).view(batch, kv_heads, cap) & (best > float("-inf"))
        order = torch.where(chosen, slots, -1).sort(dim=-1).indices  # dropped first, then kept ascending
        recent = torch.arange(candidates, view.length, device=scores.device).expand(batch, kv_heads, view.window)
        window_valid = (torch.ones_like(recent, dtype=torch.bool) if view.valid is None
                        else view.valid[..., candidates:])
        return Kept(torch.cat([slots.gather(-1, order), recent], dim=-1),
                    torch.cat([chosen.gather(-1, order), window_valid], dim=-1))

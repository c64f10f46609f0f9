"""Which cache slots survive one compression: the newest `window` slots plus the top-scored older ones."""

import torch

from .kept import Kept
from .view import CacheView


def select(evictor, view: CacheView, budget: int) -> Kept:
    """The slots a compression to `budget` slots per head (>= view.window) keeps; all of them when
    L <= budget. An evictor with its own `select` (per-head budgets) chooses; else the top
    budget - window candidates by `score`, per batch row and KV head."""
    if view.length <= budget:
        return keep_all(view)
    own = getattr(evictor, "select", None)
    if own is not None:
        return own(view, budget)
    return top_scored(view, candidate_scores(evictor, view), budget - view.window)


def keep_all(view: CacheView) -> Kept:
    batch, kv_heads, length = view.keys.shape[:3]
    index = torch.arange(length, device=view.keys.device).expand(batch, kv_heads, length).contiguous()
    return Kept(index, None if view.valid is None else view.valid.clone())


def candidate_scores(evictor, view: CacheView) -> torch.Tensor:
    """`evictor.score(view)`, shape-checked; candidates that hold no token score -inf."""
    scores = evictor.score(view)
    expected = view.keys.shape[:2] + (view.candidates,)
    if tuple(scores.shape) != tuple(expected):
        raise RuntimeError(f"{type(evictor).__name__}.score returned shape {tuple(scores.shape)}, "
                           f"expected (batch, kv_heads, L - window) = {tuple(expected)}")
    if view.valid is not None:
        scores = scores.masked_fill(~view.valid[..., :view.candidates], float("-inf"))
    return scores


def top_scored(view: CacheView, scores: torch.Tensor, picks: int) -> Kept:
    """The top `picks` candidates by score (per row and head) and the window, ascending."""
    batch, kv_heads, length = view.keys.shape[:3]
    chosen = scores.topk(picks, dim=-1).indices
    recent = torch.arange(view.candidates, length, device=view.keys.device).expand(batch, kv_heads, view.window)
    index = torch.cat([chosen, recent], dim=-1).sort(dim=-1).values
    return Kept(index, None if view.valid is None else view.valid.gather(2, index))

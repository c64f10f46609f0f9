"""What an evictor is: a scorer of the older cache slots, plus optional hooks. Selection is shared.

Required:
    score(view: CacheView) -> (batch, kv_heads, view.candidates) float32 scores; higher is kept. The newest
        `view.window` slots are always kept and are not scored. Slots that hold no token (view.valid False)
        are never chosen, whatever their score.
Optional (each found by name; an evictor declares only what it needs):
    observe(state, queries, keys, valid) -> state. Per-slot state that the cache keeps (float32, batch x
        kv_heads x slots, 0 for a new slot), gathers with the kept slots at each compression and passes in
        `view.state`. Called after every forward chunk's attention with the chunk's post-RoPE queries
        (batch, q_heads, q, head_dim), the layer's keys (batch, kv_heads, L, head_dim) whose last q slots
        are the chunk's, and `valid` (batch, kv_heads, L) or None; pure tensor ops, no host read.
    layer_budget(budget, window, layer, num_layers) -> int: slots this layer keeps per head (>= window):
        a budget allocation across layers (PyramidKV). Default: `budget` in every layer.
    head_width(budget, window) -> int: the most slots one KV head may keep when the layer keeps `budget`
        per head on average (>= budget): heads whose budgets vary (AdaKV). Default: `budget`.
    select(view, budget) -> Kept: a selection of one's own (per-head budgets), replacing top-k of `score`.
        It must return exactly `EvictionSchedule.kept_width` columns.
"""

from typing import Protocol

import torch

from .view import CacheView


class Evictor(Protocol):
    def score(self, view: CacheView) -> torch.Tensor:
        """Scores of the n = L - window candidate slots, (batch, kv_heads, n) float32; higher is kept."""

"""What a compression keeps: per row and KV head, the slot indices that survive."""

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Kept:
    """index (batch, kv_heads, W): ascending slot indices to keep, LongTensor.
    valid (batch, kv_heads, W) bool or None: None when every kept slot holds a token (uniform budgets: then
      W is the layer's budget, or L when L <= budget). Where head budgets vary, a head that keeps fewer
      than W tokens fills its leading entries with slots that hold none (valid False), so every head's
      tokens end right-aligned.
    W is a host int the cache knows before the compression (`EvictionSchedule.kept_width`).
    """

    index: torch.Tensor
    valid: torch.Tensor | None = None

    @property
    def width(self) -> int:
        return self.index.shape[-1]

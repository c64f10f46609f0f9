from dataclasses import dataclass

import torch

from .view import CacheView


@dataclass
class StreamingLLM:
    """StreamingLLM (Xiao et al., ICLR 2024, arXiv:2309.17453): attention sinks plus the most recent slots.

    Keeps the first `sinks` slots and the newest ones, i.e. (with the window always kept) slots
    0..sinks-1 and the last budget - sinks, as the R-KV repository's `StreamingLLM` does.
    """

    sinks: int = 4

    def __post_init__(self):
        if isinstance(self.sinks, bool) or not isinstance(self.sinks, int) or self.sinks < 0:
            raise ValueError(f"sinks must be a non-negative integer (StreamingLLM uses 4), got {self.sinks!r}")

    def score(self, view: CacheView) -> torch.Tensor:
        batch, kv_heads, candidates = view.keys.shape[0], view.keys.shape[1], view.candidates
        slot = torch.arange(candidates, dtype=torch.float32, device=view.keys.device)
        # Newer is better; sinks rank above every other slot, earlier sinks first.
        score = torch.where(slot < self.sinks, 2 * candidates - slot, slot)
        return score.expand(batch, kv_heads, candidates)

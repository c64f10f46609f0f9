"""What an evictor is: a scorer of the older cache slots. Selection (`selection.py`) is shared."""

from typing import Protocol

import torch


class Evictor(Protocol):
    def score(self, queries: torch.Tensor, keys: torch.Tensor, window: int) -> torch.Tensor:
        """Scores of the n = L - window candidate slots, shape (batch, kv_heads, n), float32; higher is kept.

        `queries` (batch, q_heads, window, head_dim) are the last `window` post-RoPE queries and `keys`
        (batch, kv_heads, L, head_dim) the cached post-RoPE keys, slot 0 oldest. The newest `window` slots
        are always kept by the selection and are not scored.
        """

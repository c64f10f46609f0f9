from dataclasses import dataclass

import torch

from .attention import chunk_attention
from .view import CacheView


@dataclass
class H2O:
    """H2O, heavy-hitter oracle (Zhang et al., NeurIPS 2023, arXiv:2306.14048; github.com/FMInference/H2O,
    `h2o_hf/utils_real_drop/modify_llama.py: H2OKVCache_LayerWise`): keep the slots that have received the
    most attention so far, plus the most recent ones.

    State per slot: the attention it has received, summed over every query since it entered the cache
    (prompt and decoding, softmax over the slots each query saw, float32), kept across compressions.
    Score = that sum. The window plays the reference's `recent_size`, budget - window its `hh_size`.
    Where ours differs: the reference evicts one slot per decode step, we compress every `buffer` slots
    (with buffer=1 the kept sets are the reference's); it sums over the query heads of a multi-head model
    (and over its batch of one), we over each KV head's query group, per batch row.
    """

    def observe(self, state: torch.Tensor, queries: torch.Tensor, keys: torch.Tensor,
                valid: torch.Tensor | None = None) -> torch.Tensor:
        return state + chunk_attention(queries, keys, valid)

    def score(self, view: CacheView) -> torch.Tensor:
        return view.state[..., :view.candidates].float()

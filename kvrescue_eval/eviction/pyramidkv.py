from dataclasses import dataclass

import torch

from .base_scores import base_scorer
from .view import CacheView


@dataclass
class PyramidKV:
    """PyramidKV (Cai et al., 2024, arXiv:2406.02069; github.com/Zefan-Cai/PyramidKV,
    `pyramidkv/pyramidkv_utils.py: PyramidKVCluster`): lower layers keep more slots, upper layers fewer.

    Layer budgets as the reference's integer arithmetic, with k = budget - window candidates per head on
    average: min = k // beta, max = 2k - min, step = (max - min) // (num_layers - 1); layer l keeps
    max - l * step candidates plus the window. Slots are then chosen per head by `scores` (default our
    SnapKV). Where ours differs: the reference shrinks `max` when the prompt is shorter than it and falls
    back to uniform budgets for prompts under 2k; ours fixes the budgets in advance (memory is preallocated
    per layer: `layer_budget + buffer` slots), whatever the length. kvpress's `PyramidKVPress` computes the
    same budgets in floating point and rounds them, so it can differ by one slot.
    """

    scores: str = "snapkv"
    beta: int = 20
    pool_kernel: int = 7
    mix_lambda: float = 0.1

    def __post_init__(self):
        if isinstance(self.beta, bool) or not isinstance(self.beta, int) or self.beta < 1:
            raise ValueError(f"beta must be an integer >= 1 (PyramidKV uses 20), got {self.beta!r}")
        self._base = base_scorer(self.scores, self.pool_kernel, self.mix_lambda)

    def layer_budget(self, budget: int, window: int, layer: int, num_layers: int) -> int:
        if num_layers == 1:
            return budget
        candidates = budget - window
        low = candidates // self.beta
        high = 2 * candidates - low
        return high - layer * ((high - low) // (num_layers - 1)) + window

    def score(self, view: CacheView) -> torch.Tensor:
        return self._base.score(view)

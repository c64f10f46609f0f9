from dataclasses import dataclass, field
from typing import ClassVar

import torch

from .random_stream import SeededStream
from .view import CacheView


@dataclass
class RandomAttention:
    """Random Attention (arXiv 2609.03430, 2026): keep the prompt, evict generated tokens uniformly at random
    per KV head.

    Score of a candidate slot: a fresh uniform draw in [0, 1) per batch row, KV head and slot, plus 1 for a
    slot that holds a prompt token (`CacheView.prompt`), so prompt slots are kept whenever the budget - window
    kept candidates can hold them, and the rest is a uniformly random subset of the generated slots, drawn
    independently for every row and KV head. When the prompt alone outgrows them, a uniformly random subset
    of the prompt slots is kept. The window is kept as by every evictor. Draws come from one generator seeded
    with `random_seed` (from --model_args, the run's seed unless given), fresh at every compression.
    """

    NEEDS_PROMPT: ClassVar[bool] = True   # the cache must say which slots hold prompt tokens
    random_seed: int = 0
    _stream: SeededStream = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        self._stream = SeededStream(self.random_seed)

    def score(self, view: CacheView) -> torch.Tensor:
        if view.prompt is None:
            raise ValueError("RandomAttention keeps the prompt: the cache must pass which slots hold prompt tokens "
                             "(CacheView.prompt)")
        draws = self._stream.uniform((*view.keys.shape[:2], view.candidates), view.keys.device)
        return draws + view.prompt[..., :view.candidates].float()

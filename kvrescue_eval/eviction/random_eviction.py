from dataclasses import dataclass, field

import torch

from .random_stream import SeededStream
from .view import CacheView


@dataclass
class RandomEviction:
    """Random eviction, the floor every method should beat (kvpress `RandomPress`): uniform random scores.

    Every slot is a candidate, the prompt's too (this is the plain random baseline; `randomattention` keeps
    the prompt). Each compression draws afresh: torch.rand over (batch, kv_heads, L), cut to the n
    candidates, from one generator on the keys' device seeded with `random_seed` (from --model_args, the
    run's seed unless given). The first compression of a fresh evictor draws what kvpress's press draws;
    kvpress reseeds at every call, so it draws the same positions at every compression of one shape.
    """

    random_seed: int = 0
    _stream: SeededStream = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        self._stream = SeededStream(self.random_seed)

    def score(self, view: CacheView) -> torch.Tensor:
        return self._stream.uniform(view.keys.shape[:3], view.keys.device)[..., :view.candidates]

from dataclasses import dataclass

import torch

from .view import CacheView


@dataclass
class RandomEviction:
    """Random eviction, the floor every method should beat (kvpress `RandomPress`): uniform random scores.

    Drawn as kvpress draws them, torch.rand over (batch, kv_heads, L) from a generator seeded with
    `random_seed` on the keys' device (the same draws at every compression of that shape), cut to the
    n candidates.
    """

    random_seed: int = 0

    def score(self, view: CacheView) -> torch.Tensor:
        generator = torch.Generator(device=view.keys.device).manual_seed(self.random_seed)
        draws = torch.rand(*view.keys.shape[:3], generator=generator, device=view.keys.device)
        return draws[..., :view.candidates]

"""The random stream of an evictor that draws: seeded once, advancing with every draw."""

import torch


class SeededStream:
    """One torch generator per device, seeded with `seed` when first used there, so every draw is fresh and
    a run with the same seed draws the same sequence. The draws a compression gets therefore depend on the
    compressions before it in the run (as the order of batched rows does), not on the compression alone."""

    def __init__(self, seed: int):
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"random_seed must be an int, got {seed!r}")
        self.seed = seed
        self._generators: dict[str, torch.Generator] = {}

    def uniform(self, shape, device) -> torch.Tensor:
        """float32 draws in [0, 1) of `shape` on `device`, from this stream."""
        key = str(torch.device(device))
        if key not in self._generators:
            self._generators[key] = torch.Generator(device=device).manual_seed(self.seed)
        return torch.rand(*shape, generator=self._generators[key], device=device)

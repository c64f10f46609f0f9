"""Engine settings and the modes of the paper's Table 5."""

from dataclasses import dataclass, field

from kvrescue_eval.detector import DetectorConfig

# mode -> (uses base, uses helper); eviction ("bon" evicts, "full" does not) is the base policy's business
MODES = {
    "rescue": (True, True),   # N base candidates (evicted) + N helper candidates (full KV), PRM picks
    "bon": (True, False),     # evicted best-of-N
    "full": (True, False),    # best-of-N of the base with its full KV cache
    "helper": (False, True),  # the helper alone, best-of-N, full KV
}
STEP_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class EngineConfig:
    n_base: int = 8
    n_helper: int = 8
    max_steps: int = 1024
    max_step_tokens: int = 512
    max_context: int = 4096               # prompt + trajectory, in tokens of the primary policy
    max_problems_in_flight: int = 8
    seed: int = 0
    detector: DetectorConfig | None = field(default_factory=DetectorConfig)  # None: never abort

    def __post_init__(self):
        for name in ("max_steps", "max_step_tokens", "max_context", "max_problems_in_flight"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.n_base < 0 or self.n_helper < 0 or self.n_base + self.n_helper == 0:
            raise ValueError(f"need n_base >= 0, n_helper >= 0 and at least one candidate per step; "
                             f"got n_base={self.n_base}, n_helper={self.n_helper}")

    @classmethod
    def for_mode(cls, mode: str, n: int, **kwargs) -> "EngineConfig":
        if mode not in MODES:
            raise ValueError(f"mode={mode!r} is not one of {sorted(MODES)}")
        uses_base, uses_helper = MODES[mode]
        return cls(n_base=n if uses_base else 0, n_helper=n if uses_helper else 0, **kwargs)

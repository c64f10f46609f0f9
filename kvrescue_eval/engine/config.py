"""Engine settings and the modes of the paper's Table 5."""

from dataclasses import dataclass, field

from kvrescue_eval import STEP_SEPARATOR  # noqa: F401 (re-exported for the engine)
from kvrescue_eval.detector import DetectorConfig


@dataclass(frozen=True, kw_only=True)
class Mode:
    """A row of the paper's Table 5: which models propose candidates, whether the base's cache evicts, and
    whether the detector screens base candidates by default (the paper uses early exit in KV-Rescue only)."""
    name: str = field(kw_only=False)
    uses_base: bool
    uses_helper: bool
    evicts: bool
    early_exit: bool
    summary: str


# The one table of modes, read by model_args, the lm-eval model, the policies' builder and the analysis.
MODES = {mode.name: mode for mode in (
    Mode("rescue", uses_base=True, uses_helper=True, evicts=True, early_exit=True,
         summary="N base (evicted KV) + N helper (full KV) candidates, the scorer picks"),
    Mode("bon", uses_base=True, uses_helper=False, evicts=True, early_exit=False,
         summary="evicted best-of-N: N base candidates, no helper"),
    Mode("full", uses_base=True, uses_helper=False, evicts=False, early_exit=False,
         summary="best-of-N of the base with its full KV cache"),
    Mode("helper", uses_base=False, uses_helper=True, evicts=False, early_exit=False,
         summary="the helper alone, best-of-N, full KV"),
)}


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

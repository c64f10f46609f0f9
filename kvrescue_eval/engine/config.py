"""Engine settings (the modes of the paper's Table 5, which set them, are kvrescue_eval/run_modes.py)."""

from dataclasses import dataclass, field

from kvrescue_eval import STEP_SEPARATOR  # noqa: F401 (re-exported for the engine)
from kvrescue_eval.bounds import refuse_below
from kvrescue_eval.detector import DetectorConfig


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
    # With the detector off: its settings, whose window and gzip_chars the recorded base-candidate statistics
    # still use (kvrescue_eval/candidate_records.py); None: DetectorConfig's defaults
    detector_when_off: DetectorConfig | None = None

    def __post_init__(self):
        refuse_below("engine", self, {name: (1, "an integer >= 1") for name in (
            "max_steps", "max_step_tokens", "max_context", "max_problems_in_flight")})
        if self.n_base < 0 or self.n_helper < 0 or self.n_base + self.n_helper == 0:
            raise ValueError(f"need n_base >= 0, n_helper >= 0 and at least one candidate per step; "
                             f"got n_base={self.n_base}, n_helper={self.n_helper}")
        if self.detector is not None and self.detector_when_off is not None:
            raise ValueError(f"detector_when_off={self.detector_when_off} is for a detector that is off; the "
                             f"detector is on ({self.detector}): give one of them")

    @property
    def candidate_detector(self) -> DetectorConfig:
        """The detector settings whose window and gzip_chars the recorded base-candidate statistics use."""
        return self.detector or self.detector_when_off or DetectorConfig()

"""Online degeneration detector for base candidates (KV-Rescue, Section "early exit").

Two rules, checked after every generated token of a base candidate:

- entropy: the predictive entropy H_t = -sum_v p_t(v) log p_t(v) (nats) of the model's own next-token
  distribution, before temperature, top-k or top-p, for every generated token. Once more than
  `guard` (24) tokens exist, the moving average of the last `window` (12) entropies is compared with
  `entropy_threshold` (7.0): above it, the candidate is incoherent ("symbol soup").
- gzip: the compression ratio len(gzip(w)) / len(w) of w = the UTF-8 bytes of the last 800
  characters of the candidate's text; checked once the text has 800 characters; below
  `gzip_threshold` (0.18) the candidate is looping.

The candidate's text is the text of the step being generated (the engine feeds the step's text,
not the committed trajectory before it).
"""

import gzip
from collections import deque
from dataclasses import dataclass

from kvrescue_eval.bounds import refuse_below

ENTROPY = "entropy"
GZIP = "gzip"
REASONS = (ENTROPY, GZIP)


@dataclass(frozen=True)
class DetectorConfig:
    entropy_threshold: float = 7.0
    window: int = 12
    guard: int = 24
    gzip_threshold: float = 0.18
    gzip_chars: int = 800

    def __post_init__(self):
        refuse_below("detector", self, {
            "entropy_threshold": (0, "a number >= 0 (nats)"), "window": (1, "an integer >= 1"),
            "guard": (0, "an integer >= 0"), "gzip_threshold": (0, "a number >= 0"),
            "gzip_chars": (1, "an integer >= 1")})


def gzip_ratio(text: str, chars: int = 800) -> float:
    """len(gzip.compress(w)) / len(w) for w = UTF-8 bytes of the last `chars` characters of `text`."""
    window = text[-chars:].encode("utf-8")
    if not window:
        raise ValueError("gzip_ratio of an empty text is undefined")
    return len(gzip.compress(window)) / len(window)


class CandidateMonitor:
    """The detector's state for one candidate, fed token by token: O(window) per token. It also keeps the
    largest moving average of the entropy over `window` tokens so far (`peak_average`), one of the two
    statistics of the candidate histograms (kvrescue_eval/candidate_records.py)."""

    def __init__(self, config: DetectorConfig = DetectorConfig()):
        self.config = config
        self.tokens = 0
        self.recent = deque(maxlen=config.window)
        self.average = 0.0  # of the last `window` entropies (of all of them while fewer)
        self.peak = None    # the largest average over a full window so far (None: fewer tokens than a window)

    def add(self, entropy: float) -> None:
        """One more generated token, with its predictive entropy."""
        self.tokens += 1
        self.recent.append(float(entropy))
        self.average = sum(self.recent) / len(self.recent)
        if len(self.recent) == self.config.window:
            self.peak = self.average if self.peak is None else max(self.peak, self.average)

    @property
    def peak_average(self) -> float:
        """The largest moving average of the entropy over `window` tokens; the mean of all of them for a
        candidate shorter than the window (0.0 before any token)."""
        return self.average if self.peak is None else self.peak

    def update(self, entropy: float, text: str) -> str | None:
        """`add`, then the verdict on the candidate, whose text is now `text`."""
        self.add(entropy)
        return self.verdict(text)

    def verdict(self, text: str) -> str | None:
        """The reason ("entropy" or "gzip") for which the candidate is degenerate now, or None.
        Entropy is checked first."""
        config = self.config
        if self.tokens > config.guard and self.average > config.entropy_threshold:
            return ENTROPY
        if len(text) >= config.gzip_chars and gzip_ratio(text, config.gzip_chars) < config.gzip_threshold:
            return GZIP
        return None


def is_degenerate(entropies, text: str, config: DetectorConfig = DetectorConfig()) -> str | None:
    """The verdict on a candidate with these per-token entropies and this text: "entropy", "gzip" or None."""
    monitor = CandidateMonitor(config)
    for entropy in entropies:
        monitor.add(entropy)
    return monitor.verdict(text)

"""The interface between the engine and step scorers (PRMs and others).

A scorer sees text, never model state: the question, the committed steps, and the candidate next
steps. `key` identifies one trajectory (problem and repeat) so a scorer may cache the committed
prefix across calls; the engine calls `release(key)` when the trajectory is finished.
"""

from dataclasses import dataclass, field
from typing import Hashable, Protocol, Sequence


@dataclass
class ScoreRequest:
    key: Hashable
    question: str
    steps: Sequence[str]          # committed steps so far, without the "\n\n" separators
    candidates: Sequence[str]     # candidate next steps, without a trailing "\n\n"
    system: str = field(default="Please reason step by step, and put your final answer within \\boxed{}.")


class StepScorer(Protocol):
    name: str

    def score(self, requests: Sequence[ScoreRequest]) -> list[list[float]]:
        """One score per candidate of every request (higher is better), in order."""

    def release(self, key: Hashable) -> None:
        """Forget any cached state of a finished trajectory."""

"""The interface between the engine and step scorers (PRMs and others).

A scorer sees text, never model state: the question, the committed steps, and the candidate next
steps. `key` identifies one trajectory (problem and repeat) so a scorer may cache the committed
prefix across calls; the engine calls `release(key)` when the trajectory is finished.
"""

from dataclasses import dataclass, replace
from typing import Callable, Hashable, Protocol, Sequence


@dataclass
class ScoreRequest:
    key: Hashable
    question: str
    steps: Sequence[str]          # committed steps so far, without the "\n\n" separators
    candidates: Sequence[str]     # candidate next steps, without a trailing "\n\n"
    # the system turn of the problem's own conversation, as the task wrote it; None when it has none
    # (the scorer then renders no system turn, so its chat template's own default applies)
    system: str | None = None
    # who proposed each candidate ("base" or "helper"), in the candidates' order; a scorer of the text alone
    # (every real one) ignores it; the sabotaged selectors that test the CI gate read it (scorers/sabotage.py)
    roles: Sequence[str] = ()


class StepScorer(Protocol):
    name: str

    def score(self, requests: Sequence[ScoreRequest]) -> list[list[float]]:
        """One score per candidate of every request (higher is better), in order."""

    def release(self, key: Hashable) -> None:
        """Forget any cached state of a finished trajectory."""


def score_each_text_once(score: Callable[[Sequence[ScoreRequest]], list[list[float]]],
                         requests: Sequence[ScoreRequest]) -> list[list[float]]:
    """`score` over every request's distinct candidate texts, spread back to all candidates.

    A reward is a function of the text, so candidates that agree (common when N samples do) need one
    row, and they get the very same score: batch padding no longer decides between them, and the
    engine draws among equals (engine/selection.py)."""
    distinct = [replace(r, candidates=list(dict.fromkeys(r.candidates)), roles=()) for r in requests]
    rewards = [dict(zip(d.candidates, s)) for d, s in zip(distinct, score(distinct))]
    return [[reward[c] for c in r.candidates] for r, reward in zip(requests, rewards)]

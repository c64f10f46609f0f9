"""Which candidate a step commits: the best-scored one, a tie broken by the step's own random stream.

Candidates are pooled base rows first, then the helper's, so taking the first of equal scores would hand
every tie to the base: two candidates with the same text (which a scorer of text scores alike) would always
count as a base step. The tie is drawn instead, uniformly over the tied candidates, from a stream that
depends only on (run seed, problem key, step number): the same seed picks the same candidate, whatever else
is in flight.
"""

import random
from typing import Hashable, Sequence

from kvrescue_eval.engine.sampling import stream_seed

TIE_STREAM = "tie"  # the stream's name beside the candidate rows' ("base", "helper")


def best_candidate(scores: Sequence[float], *, seed: int, key: Hashable, step: int) -> int:
    """The index of the highest score; among equal highest scores, one drawn uniformly from the stream of
    (seed, key, step)."""
    best = max(scores)
    tied = [index for index, score in enumerate(scores) if score == best]
    if len(tied) == 1:
        return tied[0]
    return tied[random.Random(stream_seed(seed, key, TIE_STREAM, step)).randrange(len(tied))]


def proposed_by_both(texts: Sequence[str], roles: Sequence[str], winner: int) -> bool:
    """Whether the winning text was proposed by the base and by the helper alike (so the tie rule, not the
    scorer, decided which of them the step counts for)."""
    return {role for text, role in zip(texts, roles) if text == texts[winner]} >= {"base", "helper"}

"""Sabotaged selectors, reserved for testing the CI recovery gate (docs/testbed.md, "CI gate").

Each is a real scorer, chosen like any other (`scorer=sabotage-first-helper`, ...), that ignores what the
candidates say and picks by who proposed them (`ScoreRequest.roles`), which no real selector may do:

- `sabotage-first-helper`: always the helper's first candidate (the run degenerates into the helper alone at N = 1);
- `sabotage-first-base`: always the base's first surviving candidate (the evicted base alone at N = 1, its
  degenerate candidates still screened by the detector);
- `sabotage-random`: a uniformly random candidate among those that survived the detector, drawn from a
  generator seeded by `sabotage_seed`, the trajectory and the step number, so a run is reproducible whatever
  the batching.

The winner scores 1, every other candidate 0. With no candidate of the wanted role in the pool (every base
candidate aborted, or mode bon for first-helper) all score 0, so the engine draws one of the pool's candidates
(its tie rule, engine/selection.py). A gate that passes any of these does not check interleaving under an
independent selector (tests/testbed/test_gate_sabotage.py).
"""

import random
from typing import Hashable, Sequence

from kvrescue_eval.engine.scoring import ScoreRequest

SABOTAGED = ("sabotage-first-helper", "sabotage-first-base", "sabotage-random")


def _one_hot(request: ScoreRequest, index: int | None) -> list[float]:
    return [1.0 if i == index else 0.0 for i in range(len(request.candidates))]


def _roles(request: ScoreRequest) -> Sequence[str]:
    if len(request.roles) != len(request.candidates):
        raise ValueError(f"a sabotaged selector needs the role of every candidate: got {len(request.roles)} roles for "
                         f"{len(request.candidates)} candidates (ScoreRequest.roles is set by the engine)")
    return request.roles


class FirstOfRole:
    """Always the first candidate that `role` ("base" or "helper", as in ScoreRequest.roles) proposed."""

    def __init__(self, role: str):
        if role not in ("base", "helper"):
            raise ValueError(f"role={role!r} is invalid; valid: base, helper")
        self.role = role
        self.name = f"sabotage-first-{role}"

    def score(self, requests: Sequence[ScoreRequest]) -> list[list[float]]:
        return [_one_hot(r, next((i for i, role in enumerate(_roles(r)) if role == self.role), None))
                for r in requests]

    def release(self, key: Hashable) -> None:
        pass


class UniformRandom:
    """A uniformly random candidate, reproducible: the draw depends on the seed, the trajectory and the step."""

    name = "sabotage-random"

    def __init__(self, seed: int = 0):
        self.seed = seed

    def score(self, requests: Sequence[ScoreRequest]) -> list[list[float]]:
        # random.Random seeds from a str through SHA-512: the same in every process (unlike hash())
        return [_one_hot(r, random.Random(f"{self.seed}|{r.key!r}|{len(r.steps)}").randrange(len(r.candidates)))
                for r in requests]

    def release(self, key: Hashable) -> None:
        pass


def first_helper() -> FirstOfRole:
    return FirstOfRole("helper")


def first_base() -> FirstOfRole:
    return FirstOfRole("base")


def uniform_random(sabotage_seed: int = 0) -> UniformRandom:
    return UniformRandom(sabotage_seed)

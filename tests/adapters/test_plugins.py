"""Plug-ins as objects: a toy evictor and a toy scorer, each added by one registry line, run end to end
through `--model_args` (with an option of each), with no change anywhere else."""

from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch
from test_lm_eval_model import Request, tiny_folder  # noqa: F401 (the tiny model folder fixture)

from kvrescue_eval.eviction import EVICTORS
from kvrescue_eval.model_adapters.scorers import SCORERS


@dataclass
class KeepOldest:
    """Keeps the oldest slots: score = offset - slot index. Records every window it was asked to score."""
    offset: float = 0.0
    seen: ClassVar[list] = []

    def score(self, view):
        batch, kv_heads, length, _ = view.keys.shape
        KeepOldest.seen.append((self.offset, length))
        return (self.offset - torch.arange(view.candidates, dtype=torch.float32)).expand(batch, kv_heads, -1)


class LongestStep:
    """Rewards a candidate by its length in characters, times `weight`."""
    name = "longest-step"

    def __init__(self, *, weight: float = 1.0):
        self.weight = weight
        self.requests = []

    def score(self, requests):
        self.requests += requests
        return [[self.weight * len(candidate) for candidate in r.candidates] for r in requests]

    def release(self, key):
        pass


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(EVICTORS, "keep-oldest", KeepOldest)   # the evictor's one registry line
    monkeypatch.setitem(SCORERS, "longest-step", LongestStep)  # the scorer's one registry line
    KeepOldest.seen.clear()


def test_a_toy_evictor_and_scorer_run_the_engine_through_model_args(registered, tiny_folder):
    from kvrescue_eval.model_adapters.lm_eval.model import KVRescueLM

    # Values as lm-eval hands them over from the command line: text, converted to each option's type.
    lm = KVRescueLM(base=tiny_folder, helper=tiny_folder, evictor="keep-oldest", offset="2.5",
                    scorer="longest-step", weight="-1", n=2, budget=12, buffer=4, max_steps=2, max_step_tokens=6,
                    device="cpu")
    assert lm.args.eviction.evictor == KeepOldest(offset=2.5)
    question = "We compute step by step. First, 3 * 4 = 12. So the total is 12 + 5 = 17. " * 2
    [response] = lm.generate_until([Request(question)])
    assert lm.scorer.weight == -1.0   # built when the models loaded, at the first generate_until

    assert KeepOldest.seen and all(offset == 2.5 for offset, _ in KeepOldest.seen)  # the base evicted with it
    assert lm.scorer.requests  # every step was chosen by the toy scorer: a shortest candidate won (ties drawn)
    text = str(response).replace("\n\n", "")
    for request in lm.scorer.requests:
        shortest = min(map(len, request.candidates))
        won = [c for c in request.candidates if len(c) == shortest and text.startswith(c)]
        assert won, (text, request.candidates)
        text = text[len(won[0]):]
    info = lm.get_model_info()["kvrescue"]
    assert info["evictor"] == "keep-oldest" and info["evictor_options"] == {"offset": 2.5}
    assert info["scorer"] == "longest-step" and info["scorer_options"] == {"weight": -1.0}


def test_options_of_other_plug_ins_are_refused_naming_the_valid_ones(registered):
    from kvrescue_eval.model_adapters.settings.model_args import parse_model_args

    with pytest.raises(ValueError, match=r"\['sinks'\].*options of evictor keep-oldest / scorer longest-step: offset, weight"):
        parse_model_args({"base": "b", "helper": "h", "evictor": "keep-oldest", "scorer": "longest-step", "sinks": 8})
    with pytest.raises(ValueError, match=r"offset='far' must be a number"):
        parse_model_args({"base": "b", "helper": "h", "evictor": "keep-oldest", "scorer": "longest-step",
                          "offset": "far"})

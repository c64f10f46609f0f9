"""A problem's own limits (lm-eval's max_gen_toks and until): the trajectory's token cap and stop strings."""

import pytest

from kvrescue_eval.engine.config import EngineConfig
from kvrescue_eval.engine.sampling import SamplingParams
from kvrescue_eval.engine.engine import Engine, Problem
from hf_probes import make_evicting_cache
from kvrescue_eval.model_adapters.hf.policy import HFPolicy
from tiny_models import looping_model

CONVERSATION = [{"role": "user", "content": "Let x be the number."}]


@pytest.fixture(scope="module")
def loop(tokenizer):
    """A model that writes one token of three characters or more forever, and that token's text."""
    for token_id in range(len(tokenizer)):
        text = tokenizer.decode([token_id])
        if len(text) >= 3 and text.isalpha() and (text[-1] + text[0]) not in text:
            return looping_model(tokenizer, token_id), text
    raise AssertionError("no token of three letters or more in the tiny tokenizer")


def run(tokenizer, model, problem, **config):
    base = HFPolicy(model, tokenizer, SamplingParams(temperature=0.0), lambda: make_evicting_cache(model, budget=None))
    settings = dict(n_base=1, n_helper=0, max_steps=50, max_step_tokens=3, max_problems_in_flight=1, detector=None)
    (result,) = Engine(base, None, None, EngineConfig(**{**settings, **config})).run([problem])
    return result


def test_the_trajectory_stops_at_its_token_cap(tokenizer, loop):
    model, text = loop
    result = run(tokenizer, model, Problem("p", CONVERSATION, max_new_tokens=7))
    assert result.finish_reason == "max_tokens"
    assert [len(ids) for ids in result.step_ids] == [3, 3, 1]   # steps of 3 tokens, the last one cut to the cap
    assert result.stats["output_tokens"] == 7 and result.text == text * 7


def test_a_stop_string_across_two_steps_ends_the_problem_and_cuts_the_text(tokenizer, loop):
    model, text = loop
    stop = text[-1] + text[0]   # "ThenThen" holds "nT" from its 4th character on, across the two tokens
    result = run(tokenizer, model, Problem("p", CONVERSATION, stop=("never written", stop)), max_step_tokens=1)
    assert result.finish_reason == "stop"
    assert result.steps == [text, text]                          # one token per step: the stop spans them
    assert result.text == text[:-1]                              # cut before the stop string


def test_a_candidate_ends_at_a_stop_string_inside_its_step(tokenizer, loop):
    model, text = loop
    result = run(tokenizer, model, Problem("p", CONVERSATION, stop=(text + text[:1],)), max_step_tokens=10)
    assert result.finish_reason == "stop"
    assert result.steps == [text * 2] and result.stats["output_tokens"] == 2   # not the 10 tokens of its cap
    assert result.text == ""


def test_without_limits_a_problem_runs_to_the_engines_caps(tokenizer, loop):
    model, text = loop
    result = run(tokenizer, model, Problem("p", CONVERSATION), max_steps=4)
    assert result.finish_reason == "max_steps" and result.text == text * 12

"""The detector inside the engine: injected incoherent and looping base candidates are aborted at the
token the definitions say, helper candidates never are, and N_h = 0 still progresses."""

import math

import pytest

from kvrescue_eval.detector import gzip_ratio
from kvrescue_eval.engine.config import EngineConfig
from kvrescue_eval.engine.sampling import SamplingParams
from kvrescue_eval.engine.engine import Engine, Problem
from hf_probes import make_evicting_cache
from kvrescue_eval.model_adapters.hf.policy import HFPolicy
from test_engine import ScriptedScorer
from tiny_models import incoherent_model, looping_model, newline_or_eos_ids, tiny_model, tiny_tokenizer, with_filler_tokens

SAMPLING = SamplingParams(temperature=0.8, top_p=1.0, top_k=0)   # keep the whole (uniform) distribution


@pytest.fixture(scope="module")
def big_tokenizer():
    tokenizer = with_filler_tokens(tiny_tokenizer(), 1800)
    assert math.log(len(tokenizer) - len(newline_or_eos_ids(tokenizer))) > 7.0
    return tokenizer


def policy(model, tokenizer, budget=None):
    return HFPolicy(model, tokenizer, SAMPLING, lambda: make_evicting_cache(model, budget=budget))


def problem():
    return [Problem("p", [{"role": "user", "content": "What is 2 + 3?"}])]


def test_incoherent_base_candidates_abort_at_token_25_and_the_helper_is_committed(big_tokenizer):
    base = policy(incoherent_model(big_tokenizer), big_tokenizer, budget=16)
    helper = policy(tiny_model(big_tokenizer, seed=3, scale=20.0), big_tokenizer)
    cfg = EngineConfig(n_base=3, n_helper=2, max_steps=3, max_step_tokens=40)
    result = Engine(base, helper, ScriptedScorer(), cfg).run(problem())[0]
    steps = result.stats["steps"]
    assert set(result.sources) == {"helper"}
    assert result.stats["early_exits"] == result.stats["early_exit_entropy"] == 3 * steps
    # uniform entropy ln(V') > 7 from the first token: the first check after the 24-token guard fires
    assert result.stats["base_tokens"] == 25 * 3 * steps


def test_with_no_helper_all_aborted_candidates_still_make_progress(big_tokenizer):
    base = policy(incoherent_model(big_tokenizer), big_tokenizer, budget=16)
    cfg = EngineConfig(n_base=2, n_helper=0, max_steps=3, max_step_tokens=40)
    result = Engine(base, None, ScriptedScorer(), cfg).run(problem())[0]
    assert result.finish_reason == "max_steps" and result.stats["steps"] == 3
    assert result.stats["aborted_commits"] == 3 and result.stats["early_exit_entropy"] == 6
    assert [len(ids) for ids in result.step_ids] == [25, 25, 25]   # each step: the text up to the abort


def test_looping_base_candidates_abort_by_gzip_once_800_characters_exist(big_tokenizer):
    token = big_tokenizer.convert_tokens_to_ids("<x7>")                   # 4 characters per token
    base = policy(looping_model(big_tokenizer, token), big_tokenizer, budget=16)
    helper = policy(tiny_model(big_tokenizer, seed=3, scale=20.0), big_tokenizer)
    cfg = EngineConfig(n_base=2, n_helper=1, max_steps=2, max_step_tokens=300)
    result = Engine(base, helper, ScriptedScorer(), cfg).run(problem())[0]
    assert set(result.sources) == {"helper"}
    assert result.stats["early_exit_gzip"] == 2 * result.stats["steps"]
    assert result.stats["early_exit_entropy"] == 0
    assert result.stats["base_tokens"] == 200 * 2 * result.stats["steps"]   # 800 / 4 characters
    assert gzip_ratio("<x7>" * 200) < 0.18


def test_helper_candidates_are_never_screened(big_tokenizer):
    base = policy(tiny_model(big_tokenizer, seed=4, scale=20.0), big_tokenizer, budget=16)
    helper = policy(incoherent_model(big_tokenizer), big_tokenizer)
    cfg = EngineConfig(n_base=1, n_helper=2, max_steps=2, max_step_tokens=40)
    result = Engine(base, helper, ScriptedScorer(prefer_rest_after=1), cfg).run(problem())[0]
    assert set(result.sources) == {"helper"}
    assert result.stats["helper_tokens"] == 2 * 40 * 2          # ran to the step cap, never aborted


def test_every_base_candidate_is_recorded_with_the_detector_off_and_as_aborted_with_it_on(big_tokenizer):
    from kvrescue_eval.detector import DetectorConfig

    uniform = math.log(len(big_tokenizer) - len(newline_or_eos_ids(big_tokenizer)))  # the model's entropy, every token
    base = policy(incoherent_model(big_tokenizer), big_tokenizer, budget=16)
    helper = policy(tiny_model(big_tokenizer, seed=3, scale=20.0), big_tokenizer)
    off = EngineConfig(n_base=2, n_helper=1, max_steps=2, max_step_tokens=30, detector=None,
                       detector_when_off=DetectorConfig(window=4))
    result = Engine(base, helper, ScriptedScorer(), off).run(problem())[0]
    records = result.base_candidates
    assert len(records) == 2 * result.stats["steps"] and result.stats["early_exits"] == 0
    # no newline, no EOS: every candidate runs on to the step cap
    assert {(r.outcome, r.tokens) for r in records} == {("degenerate", 30)}
    assert sum(r.tokens for r in records) == result.stats["base_tokens"]
    assert all(r.entropy == pytest.approx(uniform, rel=1e-3) for r in records)

    on = EngineConfig(n_base=2, n_helper=1, max_steps=2, max_step_tokens=30)   # guard 24: aborted at token 25
    result = Engine(base, helper, ScriptedScorer(), on).run(problem())[0]
    assert {(r.outcome, r.tokens) for r in result.base_candidates} == {("aborted", 25)}
    assert len(result.base_candidates) == result.stats["early_exits"] == 2 * result.stats["steps"]

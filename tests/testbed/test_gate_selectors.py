"""The sabotaged selectors that the CI gate must fail (model_adapters/scorers/sabotage.py): their rule on
hand-made requests, their registration as scorers, and what they make of a rescue run in the real engine."""

import sys
from pathlib import Path

import pytest

from kvrescue_eval.engine.engine import Engine
from kvrescue_eval.engine.scoring import ScoreRequest
from kvrescue_eval.model_adapters.scorers import SCORERS, build_scorer, scorer_model_args, scorer_options
from kvrescue_eval.model_adapters.settings.model_args import parse_model_args

sys.path.insert(0, str(Path(__file__).parents[1] / "engine"))
from test_engine import ScriptedScorer, config_for_mode, models, policy, problems  # noqa: E402,F401  (models: a fixture)
from tiny_models import tiny_tokenizer  # noqa: E402


def request(roles, steps=(), key=("doc", 0)):
    return ScoreRequest(key=key, question="q", steps=list(steps), candidates=[f"c{i}" for i in range(len(roles))],
                        roles=list(roles))


def test_first_of_a_role_scores_that_candidate_alone():
    helper, base = build_scorer("sabotage-first-helper"), build_scorer("sabotage-first-base")
    roles = ["base", "base", "helper", "helper"]
    assert helper.score([request(roles)]) == [[0.0, 0.0, 1.0, 0.0]]
    assert base.score([request(roles)]) == [[1.0, 0.0, 0.0, 0.0]]
    # every base candidate aborted: no base in the pool, all 0, so the engine commits the pool's first
    assert base.score([request(["helper", "helper"])]) == [[0.0, 0.0]]


def test_random_is_one_candidate_uniformly_and_reproducible():
    scorer = build_scorer("sabotage-random", sabotage_seed=3)
    picks = []
    for step in range(4000):
        (scores,) = scorer.score([request(["base"] * 2 + ["helper"] * 2, steps=["s"] * (step % 50), key=step // 50)])
        assert sorted(scores) == [0.0, 0.0, 0.0, 1.0]
        picks.append(scores.index(1.0))
    assert [build_scorer("sabotage-random", sabotage_seed=3).score([request(["base"] * 4, ["s"] * (i % 50), i // 50)])[0]
            .index(1.0) for i in range(4000)] == picks
    # uniform: each of 4 candidates 1000 times expected, std sqrt(4000 * 1/4 * 3/4) = 27.4; 5 std = 137
    assert all(abs(picks.count(i) - 1000) < 137 for i in range(4))
    other = [build_scorer("sabotage-random", sabotage_seed=4).score([request(["base"] * 4, ["s"] * (i % 50), i // 50)])[0]
             .index(1.0) for i in range(4000)]
    assert other != picks


def test_a_request_without_roles_is_refused():
    with pytest.raises(ValueError, match="needs the role of every candidate: got 0 roles for 2 candidates"):
        build_scorer("sabotage-first-base").score([ScoreRequest("k", "q", [], ["a", "b"])])


def test_registered_as_scorers_selectable_from_model_args():
    assert {"sabotage-first-helper", "sabotage-first-base", "sabotage-random"} <= set(SCORERS)
    for name in ("sabotage-first-helper", "sabotage-first-base", "sabotage-random"):
        assert scorer_model_args(name) == ()  # no model to load
    assert scorer_options("sabotage-random") == {"sabotage_seed": 0}
    args = parse_model_args({"preset": "recall-cpu", "scorer": "sabotage-random", "sabotage_seed": "5"})
    assert (args.scorer, args.scorer_options) == ("sabotage-random", {"sabotage_seed": 5})


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


def engine_run(tokenizer, models, mode, scorer, n=2, count=4):
    base_model, helper_model = models
    cfg = config_for_mode(mode, n, max_steps=6, max_step_tokens=12, max_problems_in_flight=2)
    engine = Engine(policy(base_model, tokenizer, budget=16, name="base") if cfg.n_base else None,
                    policy(helper_model, tokenizer, name="helper") if cfg.n_helper else None, scorer, cfg)
    return engine.run(problems(count))


def test_first_helper_turns_rescue_into_the_helper_alone(tokenizer, models):
    rescue = engine_run(tokenizer, models, "rescue", build_scorer("sabotage-first-helper"))
    alone = engine_run(tokenizer, models, "helper", ScriptedScorer(prefer_first=1))
    assert [r.text for r in rescue] == [r.text for r in alone]
    assert all(set(r.sources) == {"helper"} for r in rescue)


def test_first_base_turns_rescue_into_the_evicted_base_alone(tokenizer, models):
    rescue = engine_run(tokenizer, models, "rescue", build_scorer("sabotage-first-base"))
    bon = engine_run(tokenizer, models, "bon", ScriptedScorer(prefer_first=1))
    assert [r.text for r in rescue] == [r.text for r in bon]
    assert all(set(r.sources) == {"base"} for r in rescue)


def test_random_mixes_both_models_and_repeats_itself(tokenizer, models):
    first = engine_run(tokenizer, models, "rescue", build_scorer("sabotage-random"))
    again = engine_run(tokenizer, models, "rescue", build_scorer("sabotage-random"))
    assert [(r.text, r.sources) for r in first] == [(r.text, r.sources) for r in again]
    sources = [s for r in first for s in r.sources]
    assert {"base", "helper"} <= set(sources)

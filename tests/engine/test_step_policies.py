"""Step-level policies in the engine: a helper that proposes whole steps (on a background worker,
beside the base's token decoding) gives the trajectories of the token-level helper drawing the same
tokens, in series or overlapped; and the overlap is real."""

import threading

import pytest

from kvrescue_eval.engine.config import EngineConfig
from kvrescue_eval.engine.engine import Engine
from stepped_policy import SteppedPolicy
from test_engine import BUDGET, AlternatingScorer, ScriptedScorer, policy, problems
from tiny_models import incoherent_model, tiny_model


@pytest.fixture(scope="module")
def models(tokenizer):
    return tiny_model(tokenizer, seed=0, scale=20.0), tiny_model(tokenizer, arch="qwen2", seed=1, scale=20.0)


def run(tokenizer, models, n_base, n_helper, scorer, stepped, overlap=True, count=3, helper_cls=SteppedPolicy):
    base_model, helper_model = models
    base = policy(base_model, tokenizer, budget=BUDGET, name="base") if n_base else None
    helper = policy(helper_model, tokenizer, name="helper")
    if stepped:
        helper = helper_cls(helper)
    config = EngineConfig(n_base=n_base, n_helper=n_helper, max_steps=6, max_step_tokens=12,
                          max_problems_in_flight=2)
    engine = Engine(base, helper, scorer, config, overlap=overlap)
    return engine.run(problems(count)), engine


def summary(results):
    return [(r.text, r.steps, r.sources, r.step_ids, r.stats, r.finish_reason) for r in results]


@pytest.mark.parametrize("overlap", [True, False])
def test_step_level_helper_gives_the_token_level_trajectories(tokenizer, models, overlap):
    token_level, _ = run(tokenizer, models, 2, 2, AlternatingScorer(2), stepped=False)
    step_level, engine = run(tokenizer, models, 2, 2, AlternatingScorer(2), stepped=True, overlap=overlap)
    assert summary(step_level) == summary(token_level)
    assert all({"base", "helper"} <= set(r.sources) for r in token_level if r.stats["steps"] > 2)
    stats = engine.worker_statistics()
    assert stats["helper"]["items"] == sum(r.stats["steps"] for r in step_level)  # one proposal per step
    assert stats["scorer"]["items"] == sum(r.stats["steps"] for r in step_level)


def test_helper_mode_runs_entirely_on_the_background_worker(tokenizer, models):
    token_level, _ = run(tokenizer, models, 0, 3, ScriptedScorer(), stepped=False)
    step_level, engine = run(tokenizer, models, 0, 3, ScriptedScorer(), stepped=True)
    assert summary(step_level) == summary(token_level)
    # both problems in flight start together: their first proposals go out in one batched call
    assert engine.worker_statistics()["helper"]["calls"] < engine.worker_statistics()["helper"]["items"]


def test_a_failing_proposal_raises_in_the_caller(tokenizer, models):
    class Broken(SteppedPolicy):
        def propose(self, requests):
            raise RuntimeError("helper engine died")

    with pytest.raises(RuntimeError, match="helper engine died"):
        run(tokenizer, models, 2, 2, ScriptedScorer(), stepped=True, helper_cls=Broken)


class WaitsForTheBase(SteppedPolicy):
    """A helper whose every proposal waits until the base has decoded a token after it began: it can
    only return (before its timeout) if the base keeps decoding while the helper works."""

    def __init__(self, policy, base_decoded: threading.Event, timeout: float):
        super().__init__(policy)
        self.base_decoded, self.timeout, self.waited = base_decoded, timeout, []

    def propose(self, requests):
        self.base_decoded.clear()
        self.waited.append(self.base_decoded.wait(self.timeout))
        return super().propose(requests)


def test_the_base_decodes_while_the_helper_proposes(tokenizer, models):
    base_model, helper_model = models
    base = policy(incoherent_model(tokenizer), tokenizer, budget=BUDGET, name="base")  # always runs to its cap
    decoded = threading.Event()
    decode = base.decode
    base.decode = lambda rows: (decode(rows), decoded.set())[0]
    helper = WaitsForTheBase(policy(helper_model, tokenizer, name="helper"), decoded, timeout=60.0)
    config = EngineConfig(n_base=2, n_helper=2, max_steps=3, max_step_tokens=24, max_problems_in_flight=1,
                          detector=None)
    Engine(base, helper, ScriptedScorer(), config).run(problems(1))
    assert helper.waited and all(helper.waited)


@pytest.mark.parametrize("point", ["helper.propose@3:oom", "scorer.score@4:oom"])
def test_out_of_memory_on_a_background_worker_is_retried_like_any_other(tokenizer, models, point):
    """An error raised on a worker's thread reaches the run, which retries the unfinished problems with
    half as many in flight; per-row seeds make the result that of an undisturbed run."""
    from kvrescue_eval.engine.retry import POLICY_METHODS, SCORER_METHODS, Faults, RetryingRun

    def build(faults):
        base_model, helper_model = models
        base = policy(base_model, tokenizer, budget=BUDGET, name="base")
        helper = SteppedPolicy(policy(helper_model, tokenizer, name="helper"))
        config = EngineConfig(n_base=2, n_helper=2, max_steps=4, max_step_tokens=10, max_problems_in_flight=4)
        return RetryingRun(Engine(base, faults.wrap(helper, "helper", POLICY_METHODS),
                                  faults.wrap(ScriptedScorer(), "scorer", SCORER_METHODS), config))

    undisturbed = build(Faults()).run(problems(4))
    retried = build(faults := Faults.parse(point))
    results = retried.run(problems(4))
    assert retried.retries == 1 and faults.calls[point.split("@")[0]] >= 3
    assert summary(results) == summary(undisturbed)

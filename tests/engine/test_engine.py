"""Algorithm 1 on tiny random models through the real transformers policies and evicting cache."""

import pytest
import torch

from kvrescue_eval.engine.config import EngineConfig
from kvrescue_eval.run_modes import MODES
from kvrescue_eval.engine.sampling import SamplingParams
from kvrescue_eval.engine.engine import Engine, Problem
from hf_probes import committed_cache, make_evicting_cache, next_token_logits, row_logits
from kvrescue_eval.model_adapters.hf.policy import HFPolicy
from kvrescue_eval.model_adapters.prompts import render_prompt
from tiny_models import tiny_model

SAMPLING = SamplingParams(temperature=1.0, top_p=0.95, top_k=50)
BUDGET, BUFFER = 16, 4


def policy(model, tokenizer, budget=None, name="policy", batch_problems=False):
    return HFPolicy(model, tokenizer, SAMPLING, lambda: make_evicting_cache(model, budget=budget, buffer=BUFFER),
                    name=name, batch_problems=batch_problems)


def config_for_mode(mode, n, **settings):
    """The engine's config of a mode of the paper's Table 5 with n candidates per model it uses."""
    return EngineConfig(n_base=n if MODES[mode].uses_base else 0, n_helper=n if MODES[mode].uses_helper else 0,
                        **settings)


def problems(count=3):
    return [Problem(("doc", i), [{"role": "system", "content": "Please reason step by step."},
                                 {"role": "user", "content": f"Let x be {i}. What is 2x + 3?"}])
            for i in range(count)]


class ScriptedScorer:
    """Prefers the first `prefer` candidates (the base rows: the engine scores base rows first) or the
    rest, and inside a group the text with the smallest checksum."""

    name = "scripted"

    def __init__(self, prefer_first: int | None = None, prefer_rest_after: int | None = None):
        self.prefer_first, self.prefer_rest_after = prefer_first, prefer_rest_after
        self.released = []

    def score(self, requests):
        out = []
        for request in requests:
            scores = []
            for i, text in enumerate(request.candidates):
                bonus = 0.0
                if self.prefer_first is not None and i < self.prefer_first:
                    bonus = 1000.0
                if self.prefer_rest_after is not None and i >= self.prefer_rest_after:
                    bonus = 1000.0
                scores.append(bonus - (sum(text.encode("utf-8")) % 997))
            out.append(scores)
        return out

    def release(self, key):
        self.released.append(key)


class AlternatingScorer(ScriptedScorer):
    """Base winner on even steps, helper winner on odd steps (with n_base candidates first)."""

    def __init__(self, n_base):
        super().__init__()
        self.n_base = n_base

    def score(self, requests):
        return [[float((i < self.n_base) == (len(r.steps) % 2 == 0)) for i in range(len(r.candidates))]
                for r in requests]


@pytest.fixture(scope="module")
def models(tokenizer):
    return tiny_model(tokenizer, seed=0, scale=20.0), tiny_model(tokenizer, arch="qwen2", seed=1, scale=20.0)


def run(tokenizer, models, mode, n=2, scorer=None, budget=BUDGET, count=3, **config):
    base_model, helper_model = models
    base = policy(base_model, tokenizer, budget=None if mode == "full" else budget, name="base")
    helper = policy(helper_model, tokenizer, name="helper")
    settings = dict(max_steps=6, max_step_tokens=12, max_problems_in_flight=2)
    settings.update(config)
    cfg = config_for_mode(mode, n, **settings)
    engine = Engine(base if cfg.n_base else None, helper if cfg.n_helper else None, scorer, cfg)
    return engine.run(problems(count)), engine


def test_trajectory_lengths_and_memory_bound_after_every_commit(tokenizer, models):
    base_model, helper_model = models
    base = policy(base_model, tokenizer, budget=BUDGET, name="base")
    helper = policy(helper_model, tokenizer, name="helper")
    checked = []

    def on_event(kind, key=None, **info):
        if kind != "commit":
            return
        steps, step_ids = info["steps"], info["step_ids"]
        trajectory = [t for ids in step_ids for t in ids]
        assert "".join(steps) == tokenizer.decode(trajectory)
        fed_eos = int(info["eos"] and info["role"] == "base")   # a base winner ending at EOS has fed it
        assert base.length(key) == info["prompt_length"] + len(trajectory) + fed_eos
        cache = committed_cache(base, key)
        assert int(cache.lengths[0]) == base.length(key)
        assert cache.physical_size <= BUDGET + BUFFER
        assert cache.nbytes() <= cache_bytes_bound(base_model)
        checked.append(key)

    cfg = EngineConfig(n_base=2, n_helper=2, max_steps=8, max_step_tokens=12, max_problems_in_flight=2)
    results = Engine(base, helper, AlternatingScorer(2), cfg, on_event=on_event).run(problems(3))
    assert len(checked) == sum(r.stats["steps"] for r in results)
    for p in (base, helper):  # finished problems leave no state behind (memory stays bounded over a run)
        assert not p.committed and not p.table.rows
    for result in results:
        assert result.text == "".join(result.steps)
        assert result.stats["output_tokens"] == sum(map(len, result.step_ids))
        assert result.stats["helper_steps"] == result.sources.count("helper")
        assert {"base", "helper"} <= set(result.sources) or result.stats["steps"] < 2


def cache_bytes_bound(model):
    """Keys and values of budget + buffer slots per layer and KV head, plus the per-slot bookkeeping."""
    cfg = model.config
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    per_slot = cfg.num_key_value_heads * (2 * head_dim * 4 + 8 + 1)   # per KV head: float32 K and V, int64 position, valid
    return cfg.num_hidden_layers * (BUDGET + BUFFER) * per_slot


@pytest.mark.parametrize("helper_budget", [None])
def test_helper_cache_equals_a_fresh_full_prefill(tokenizer, models, helper_budget):
    base_model, helper_model = models
    base = policy(base_model, tokenizer, budget=BUDGET, name="base")
    helper = policy(helper_model, tokenizer, budget=helper_budget, name="helper")
    conversations = {p.key: p.conversation for p in problems(2)}
    compared = []

    def on_event(kind, key=None, **info):
        if kind != "commit" or info["eos"]:
            return
        ids = render_prompt(tokenizer, conversations[key]) + [t for s in info["step_ids"] for t in s]
        with torch.no_grad():
            fresh = helper_model(torch.tensor([ids])).logits[0, -1].float()
        torch.testing.assert_close(next_token_logits(helper, key), fresh, atol=1e-4, rtol=0)
        compared.append(info["role"])

    cfg = EngineConfig(n_base=2, n_helper=2, max_steps=8, max_step_tokens=12)
    Engine(base, helper, AlternatingScorer(2), cfg, on_event=on_event).run(problems(2))
    assert {"base", "helper"} <= set(compared)  # both commit paths: helper keeps its fork / appends


def test_scorer_preferring_helper_reproduces_helper_only(tokenizer, models):
    rescue, _ = run(tokenizer, models, "rescue", n=2, scorer=ScriptedScorer(prefer_rest_after=2))
    alone, _ = run(tokenizer, models, "helper", n=2, scorer=ScriptedScorer())
    assert [r.text for r in rescue] == [r.text for r in alone]
    assert all(set(r.sources) == {"helper"} for r in rescue)
    assert [r.finish_reason for r in rescue] == [r.finish_reason for r in alone]


def test_scorer_preferring_base_reproduces_evicted_best_of_n(tokenizer, models):
    rescue, _ = run(tokenizer, models, "rescue", n=2, scorer=ScriptedScorer(prefer_first=2))
    bon, _ = run(tokenizer, models, "bon", n=2, scorer=ScriptedScorer())
    assert [r.text for r in rescue] == [r.text for r in bon]
    assert all(set(r.sources) == {"base"} for r in rescue)
    assert [r.stats["base_tokens"] for r in rescue] == [r.stats["base_tokens"] for r in bon]


def test_same_seed_same_output_and_another_seed_differs(tokenizer, models):
    first, _ = run(tokenizer, models, "rescue", scorer=ScriptedScorer(), seed=7)
    again, _ = run(tokenizer, models, "rescue", scorer=ScriptedScorer(), seed=7)
    other, _ = run(tokenizer, models, "rescue", scorer=ScriptedScorer(), seed=8)
    assert [(r.text, r.stats) for r in first] == [(r.text, r.stats) for r in again]
    assert [r.text for r in first] != [r.text for r in other]


@pytest.mark.parametrize("batch_problems", [False, True])
def test_continuous_batching_gives_each_problem_its_trajectory_alone(tokenizer, models, batch_problems):
    """With one forward pass per problem the trajectories are bit-identical; with the problems in one
    forward pass they differ only if float rounding (bounded below) flips a draw, which these do not."""
    base_model, helper_model = models
    cfg = dict(n_base=2, n_helper=2, max_steps=6, max_step_tokens=12)

    def engine(in_flight):
        return Engine(policy(base_model, tokenizer, BUDGET, batch_problems=batch_problems),
                      policy(helper_model, tokenizer, batch_problems=batch_problems), ScriptedScorer(),
                      EngineConfig(max_problems_in_flight=in_flight, **cfg))

    batched = engine(3).run(problems(4))
    for index, expected in enumerate(batched):
        alone = engine(1).run([problems(4)[index]])[0]
        assert (alone.text, alone.stats, alone.sources) == (expected.text, expected.stats, expected.sources)


class TiedScorer(ScriptedScorer):
    """Every candidate scores the same: each step is a tie over all of them."""

    def score(self, requests):
        return [[0.0] * len(r.candidates) for r in requests]


def test_ties_are_drawn_per_step_not_given_to_the_base_and_do_not_depend_on_batching(tokenizer, models):
    base_model, helper_model = models

    def engine(in_flight):
        return Engine(policy(base_model, tokenizer, BUDGET), policy(helper_model, tokenizer), TiedScorer(),
                      EngineConfig(n_base=2, n_helper=2, max_steps=6, max_step_tokens=12,
                                   max_problems_in_flight=in_flight))

    batched = engine(3).run(problems(4))
    sources = [source for result in batched for source in result.sources]
    assert 0 < sources.count("helper") < len(sources)     # the first-of-best rule gave every step to the base
    for index, expected in enumerate(batched):
        alone = engine(1).run([problems(4)[index]])[0]
        assert (alone.text, alone.sources) == (expected.text, expected.sources)


def test_rows_of_several_problems_in_one_forward_pass_match_each_alone(tokenizer, models):
    base_model, _ = models
    uneven = [Problem(i, [{"role": "user", "content": "Compute step by step. " * (i + 1)}]) for i in range(3)]
    together = policy(base_model, tokenizer, BUDGET, batch_problems=True)
    assert len({together.start(p.key, p.conversation) for p in uneven}) == 3   # three prompt lengths
    rows = {p.key: together.fork(p.key, [1, 2]) for p in uneven}
    for _ in range(30):  # long enough for the prompt-compressed caches to compress again (budget + buffer)
        together.decode([r for key in rows for r in rows[key]])
    for p in uneven:
        alone = policy(base_model, tokenizer, BUDGET)
        alone.start(p.key, p.conversation)
        alone_rows = alone.fork(p.key, [1, 2])
        for _ in range(30):
            alone.decode(alone_rows)
        for mine, theirs in zip(rows[p.key], alone_rows):
            torch.testing.assert_close(row_logits(together, mine), row_logits(alone, theirs), atol=1e-5, rtol=0)


@pytest.mark.parametrize("mode", ["rescue", "bon", "full", "helper"])
def test_every_mode_runs_with_one_candidate(tokenizer, models, mode):
    scorer = ScriptedScorer() if mode == "rescue" else None  # one candidate per step needs no scorer
    results, _ = run(tokenizer, models, mode, n=1, scorer=scorer, max_steps=3)
    for result in results:
        assert 1 <= result.stats["steps"] <= 3
        assert result.finish_reason in {"eos", "max_steps"}
        assert (result.stats["base_tokens"] > 0) == (mode != "helper")
        assert (result.stats["helper_tokens"] > 0) == (mode in {"rescue", "helper"})


def test_stops_at_max_steps_and_at_the_context_limit(tokenizer, models):
    by_steps, _ = run(tokenizer, models, "bon", n=1, max_steps=2, max_step_tokens=3)
    assert all(r.stats["steps"] == 2 or r.finish_reason == "eos" for r in by_steps)
    prompt = len(render_prompt(tokenizer, problems(1)[0].conversation))
    by_context, _ = run(tokenizer, models, "bon", n=1, count=1, max_steps=100, max_step_tokens=5,
                        max_context=prompt + 12)
    result = by_context[0]
    if result.finish_reason != "eos":
        assert result.finish_reason == "context"
        assert result.stats["output_tokens"] == 12   # steps of 5, 5, then 2: capped by the context
        assert [len(ids) for ids in result.step_ids] == [5, 5, 2]

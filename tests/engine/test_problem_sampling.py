"""A problem carries its own sampling settings (as nano-vllm's Sequence carries its SamplingParams): problems of
different settings share one engine run and one batch, and each is drawn exactly as it would be alone."""

import torch

from kvrescue_eval.engine.config import EngineConfig
from kvrescue_eval.engine.engine import Engine, Problem
from kvrescue_eval.engine.sampling import SamplingParams
from hf_probes import make_evicting_cache
from kvrescue_eval.model_adapters.hf.policy import HFPolicy
from kvrescue_eval.model_adapters.prompts import render_prompt
from tiny_models import tiny_model

GREEDY, HOT, DEFAULT = SamplingParams(0.0), SamplingParams(1.0, 1.0, 0), SamplingParams(0.5, 0.9, 5)
CONFIG = EngineConfig(n_base=1, n_helper=0, max_steps=3, max_step_tokens=6, max_problems_in_flight=2, detector=None)


def conversation(i):
    return [{"role": "user", "content": f"Let x be {i}. What is 2x + 3?"}]


def texts(model, tokenizer, default, problems):
    policy = HFPolicy(model, tokenizer, default, lambda: make_evicting_cache(model, budget=None),
                      name="base", batch_problems=True)
    return [r.text for r in Engine(policy, None, None, CONFIG).run(problems)]


def test_each_problem_is_drawn_with_its_own_sampling_in_a_shared_batch(tokenizer):
    model = tiny_model(tokenizer)
    together = texts(model, tokenizer, DEFAULT, [Problem(0, conversation(0), sampling=GREEDY),
                                                 Problem(1, conversation(1), sampling=HOT)])
    alone = [texts(model, tokenizer, GREEDY, [Problem(0, conversation(0))])[0],
             texts(model, tokenizer, HOT, [Problem(1, conversation(1))])[0]]
    assert together == alone
    ids = render_prompt(tokenizer, conversation(0))
    with torch.no_grad():
        greedy = model.generate(torch.tensor([ids]), max_new_tokens=18, do_sample=False)[0, len(ids):]
    assert together[0] and tokenizer.decode(greedy.tolist()).startswith(together[0])  # transformers' greedy
    assert together[1] != texts(model, tokenizer, GREEDY, [Problem(1, conversation(1))])[0]  # HOT was not greedy

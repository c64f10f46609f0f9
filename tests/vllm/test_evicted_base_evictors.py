"""Every registered evictor runs inside the vLLM evicted base as in the transformers evicting cache, on Qwen2 and
Qwen3: its log-probabilities within 1e-4 of the teacher-forced transformers cache. Covers the layer's duties
beyond R-KV and SnapKV (test_evicted_base_equality.py): per-slot state (h2o), values and the output projection
(criticalkv), per-layer budgets (pyramidkv, whose blocks differ per layer), per-head validity (adakv), which slots
hold the prompt (randomattention, whose 60-token prompt is longer than the budget and whose 12-token one is kept)
and a stream of draws that goes on across requests (random, randomattention).

Every evictor but KNorm: over 80 sampled decode tokens (at least three compressions per request), two prompts of
which one longer than budget + buffer, through one sequence slot (the second request reuses the first one's
blocks). KNorm: RoPE keeps a key's norm, so one token at two positions gets two equal KNorm scores in the first
layer, and which of the two float rounding keeps differs between any two implementations of the projections
(vLLM's and transformers'); on these small vocabularies sampled tokens recur, so over a long decode its kept sets
legitimately differ. It is checked where no token recurs before a compression: prompts of distinct tokens longer
than the budget (compressed at prefill), then decode tokens up to the next compression."""

import gc

import pytest
import torch
from conftest import ENGINE
from test_evicted_base_equality import VOCAB, teacher_forced_logprobs, tiny_checkpoint

from kvrescue_eval.eviction import EVICTORS, build_evictor
from kvrescue_eval.model_adapters.vllm.evicted_base.models import engine_overrides
from kvrescue_eval.model_adapters.vllm.evicted_base.schedule_config import eviction_settings

DECODE = 80


def worst_gap_to_the_transformers_cache(folder, model_type, method, prompts, params, min_compressions):
    """Generate on the vLLM evicted base; the largest log-probability gap to the teacher-forced transformers cache."""
    from vllm import LLM
    from vllm.inputs import TokensPrompt

    import test_evicted_base_equality as equality

    model = tiny_checkpoint(folder, model_type)
    llm = LLM(model=str(folder), skip_tokenizer_init=True, max_model_len=256, max_num_seqs=1,
              enable_chunked_prefill=False, max_num_batched_tokens=256, enable_prefix_caching=False,
              hf_overrides=engine_overrides(model_type, eviction_settings(method, budget=equality.BUDGET,
                                                                          buffer=equality.BUFFER, window=equality.WINDOW)),
              **ENGINE)
    outputs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)
    compressions = llm.apply_model(lambda m: [layer.self_attn.attn.compressions for layer in m.model.layers])[0]
    assert min(compressions) >= min_compressions
    evictor = build_evictor(method)   # one for both requests, as the engine's: an evictor that draws goes on drawing
    worst = 0.0
    for prompt, output in zip(prompts, outputs):
        tokens = list(output.outputs[0].token_ids)
        on_vllm = [next(iter(step.values())).logprob for step in output.outputs[0].logprobs]
        reference = teacher_forced_logprobs(model, prompt, tokens, equality.BUDGET, evictor)
        worst = max(worst, max(abs(a - b) for a, b in zip(on_vllm, reference)))
    del llm
    gc.collect()
    return worst


@pytest.mark.parametrize("model_type", ["qwen2", "qwen3"])
@pytest.mark.parametrize("method", sorted(set(EVICTORS) - {"rkv", "snapkv", "knorm"}))
def test_every_evictor_on_vllm_equals_the_transformers_evicting_cache(tmp_path, method, model_type):
    from vllm import SamplingParams

    generator = torch.Generator().manual_seed(5)
    prompts = [torch.randperm(VOCAB, generator=generator)[:length].tolist() for length in (60, 12)]
    params = SamplingParams(temperature=1.0, seed=7, max_tokens=DECODE, ignore_eos=True, logprobs=0)
    assert worst_gap_to_the_transformers_cache(tmp_path, model_type, method, prompts, params, 2 * 3) < 1e-4


@pytest.mark.parametrize("model_type", ["qwen2", "qwen3"])
def test_knorm_on_vllm_equals_the_transformers_evicting_cache_where_no_token_recurs(tmp_path, model_type):
    from vllm import SamplingParams

    import test_evicted_base_equality as equality

    generator = torch.Generator().manual_seed(6)
    prompts = [torch.randperm(VOCAB, generator=generator)[:length].tolist() for length in (60, 40)]
    assert min(map(len, prompts)) > equality.BUDGET
    # after the prefill's compression to the budget, one slot per decode token: the next compression would come
    # with the buffer's last slot, which these tokens do not reach
    params = SamplingParams(temperature=1.0, seed=7, max_tokens=equality.BUFFER, ignore_eos=True, logprobs=0)
    assert worst_gap_to_the_transformers_cache(tmp_path, model_type, "knorm", prompts, params, len(prompts)) < 1e-4

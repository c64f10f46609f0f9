"""The evicted base on vLLM equals the transformers evicting cache: the log-probabilities vLLM reports for the
tokens it decodes greedily are those the transformers `EvictingCache` gives the same tokens (teacher-forced,
each request alone), within 1e-4 in float32.

Over 300 decode tokens per request with a buffer of 12 (so over 20 compressions each, the count stated by the
schedule's definition below), for R-KV and SnapKV, on random Qwen2, Qwen3 (per-head norm of queries and keys
before RoPE, norm weights away from 1) and Llama checkpoints with grouped KV heads (4 query heads over 2 KV
heads, head_dim 32), prompts of mixed lengths (one longer than budget + buffer, one shorter than the budget),
and continuous batching: five requests through two sequence slots, so state blocks are reused. A full-KV
reference differs from both by far more than the tolerance: the eviction is real.
"""

import pytest
import torch
from conftest import ENGINE

from kvrescue_eval.eviction import EvictionSchedule, build_evictor
from kvrescue_eval.model_adapters.hf.evicting_attention import use_evicting_attention
from kvrescue_eval.model_adapters.hf.evicting_cache import EvictingCache
from kvrescue_eval.model_adapters.vllm.evicted_base.models import engine_overrides
from kvrescue_eval.model_adapters.vllm.evicted_base.schedule_config import eviction_settings

BUDGET, BUFFER, WINDOW, DECODE = 32, 12, 8, 300
PROMPTS = [7, 70, 20, 40, 33]          # 70 > budget + buffer = 44; 7 and 20 < budget
VOCAB = 256


def tiny_checkpoint(folder, model_type: str):
    from transformers import (LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config,
                              Qwen3ForCausalLM)

    config_class, model_class = {"qwen2": (Qwen2Config, Qwen2ForCausalLM), "qwen3": (Qwen3Config, Qwen3ForCausalLM),
                                 "llama": (LlamaConfig, LlamaForCausalLM)}[model_type]
    torch.manual_seed(3)
    config = config_class(vocab_size=VOCAB, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=1024,
                          initializer_range=0.15, tie_word_embeddings=False, architectures=[model_class.__name__])
    model = model_class(config).float().eval()
    with torch.no_grad():   # Qwen3's per-head norms of queries and keys away from the identity
        for name, weight in model.named_parameters():
            if name.endswith(("q_norm.weight", "k_norm.weight")):
                weight.uniform_(0.5, 1.5)
    model.save_pretrained(folder)
    return model


def compressions_by_definition(prompt: int, forwards: int) -> int:
    """Compressions of one row: at its prompt when it is longer than the budget (to `budget` slots), then
    whenever it holds budget + buffer slots, one slot added per decode forward pass."""
    slots = BUDGET + BUFFER
    count, total = prompt, 0
    if count > BUDGET:
        count, total = BUDGET, 1
    for _ in range(forwards):
        count += 1
        if count >= slots:
            count, total = BUDGET, total + 1
    return total


def teacher_forced_logprobs(model, prompt: list[int], tokens: list[int], budget: int | None, method) -> list[float]:
    """`method`: a name of EVICTORS, or an evictor object (one that draws goes on with its stream)."""
    use_evicting_attention(model)
    evictor = build_evictor(method) if isinstance(method, str) else method
    schedule = None if budget is None else EvictionSchedule(evictor, budget, BUFFER, WINDOW)
    cache = EvictingCache(model.config.num_hidden_layers, schedule)
    ids, out = torch.tensor([prompt]), []
    with torch.no_grad():
        for token in tokens:
            logits = model(ids, past_key_values=cache, position_ids=cache.next_positions(ids.shape[1])).logits[0, -1]
            out.append(torch.log_softmax(logits.float(), dim=-1)[token].item())
            ids = torch.tensor([[token]])
    return out


@pytest.mark.slow
@pytest.mark.parametrize("model_type", ["qwen2", "qwen3", "llama"])
@pytest.mark.parametrize("method", ["rkv", "snapkv"])
def test_vllm_evicted_base_equals_the_transformers_evicting_cache(tmp_path, model_type, method):
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    model = tiny_checkpoint(tmp_path, model_type)
    generator = torch.Generator().manual_seed(len(method))
    prompts = [torch.randint(0, VOCAB, (length,), generator=generator).tolist() for length in PROMPTS]
    settings = eviction_settings(method, budget=BUDGET, buffer=BUFFER, window=WINDOW)
    llm = LLM(model=str(tmp_path), skip_tokenizer_init=True, max_model_len=512, max_num_seqs=2,
              enable_chunked_prefill=False, max_num_batched_tokens=512, enable_prefix_caching=False,
              hf_overrides=engine_overrides(model_type, settings), **ENGINE)
    params = SamplingParams(temperature=0, max_tokens=DECODE, ignore_eos=True, logprobs=0)
    outputs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)
    compressions = llm.apply_model(lambda m: [layer.self_attn.attn.compressions for layer in m.model.layers])[0]

    expected = [compressions_by_definition(len(p), DECODE - 1) for p in prompts]
    assert min(expected) >= 20
    assert compressions == [sum(expected)] * 2          # every layer, every request, on the schedule
    worst = 0.0
    for prompt, output in zip(prompts, outputs):
        tokens = list(output.outputs[0].token_ids)
        assert len(tokens) == DECODE
        on_vllm = [next(iter(step.values())).logprob for step in output.outputs[0].logprobs]
        reference = teacher_forced_logprobs(model, prompt, tokens, BUDGET, method)
        worst = max(worst, max(abs(a - b) for a, b in zip(on_vllm, reference)))
    assert worst < 1e-4
    full = teacher_forced_logprobs(model, prompts[1], list(outputs[1].outputs[0].token_ids), None, method)
    assert max(abs(a - next(iter(s.values())).logprob) for a, s in zip(full, outputs[1].outputs[0].logprobs)) > 1e-2

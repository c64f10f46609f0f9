"""The evicting cache against its definition: attention over a full cache in which exactly the evicted
slots are masked, with the kept set chosen by `kept_indices` on the last `window` post-RoPE queries.

The reference is an attention function registered under its own name that computes softmax attention
from the formula over the full (never evicted) keys, masking per layer, row and KV head every position
the evicting cache does not hold at that step.
"""

import sys
from pathlib import Path

import pytest
import torch
from transformers import (DynamicCache, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config,
                          Qwen3ForCausalLM)
from transformers.modeling_utils import AttentionInterface

from kvrescue_eval.eviction import kept_indices
from kvrescue_eval.eviction import EvictionSchedule
from kvrescue_eval.model_adapters.hf.evicting_cache import EvictingCache

sys.path.insert(0, str(Path(__file__).parents[1] / "engine"))
from hf_probes import concat, make_evicting_cache, split  # noqa: E402

VOCAB = 64
TOL = 1e-4
KINDS = ["qwen2", "llama", "qwen3"]


def tiny_model(kind="qwen2", attention="sdpa", layers=2, seed=0, **extra):
    torch.manual_seed(seed)
    shape = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                 num_attention_heads=4, max_position_embeddings=4096, attn_implementation=attention, **extra)
    if kind == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(num_key_value_heads=2, **shape))   # grouped-query attention
    elif kind == "qwen3":   # grouped queries; per-head RMSNorm of queries and keys before RoPE
        model = Qwen3ForCausalLM(Qwen3Config(num_key_value_heads=2, head_dim=8, **shape))
        with torch.no_grad():   # norm weights away from 1, so a key cached before the norm would differ
            for name, weight in model.named_parameters():
                if name.endswith(("q_norm.weight", "k_norm.weight")):
                    weight.uniform_(0.5, 1.5)
    else:
        model = LlamaForCausalLM(LlamaConfig(num_key_value_heads=4, **shape))
    return model.eval()


def clone_model(model, attention):
    twin = type(model)(model.config.__class__.from_dict(model.config.to_dict(), attn_implementation=attention))
    twin.load_state_dict(model.state_dict())
    return twin.eval()


class MaskedFullAttention:
    """Softmax attention over the full cache; `visible[layer]` (batch, kv_heads, T) says which past
    positions each KV head may see this step. Also records the post-RoPE queries per layer."""

    name = "test_masked_full"

    def __init__(self):
        self.visible, self.queries = {}, {}
        AttentionInterface.register(self.name, self)

    def __call__(self, module, query, key, value, attention_mask, scaling, **kwargs):
        batch, q_heads, q_length, _ = query.shape
        total = key.shape[2]
        group = q_heads // key.shape[1]
        past = torch.zeros(batch, key.shape[1], total, dtype=torch.bool)
        past[..., : total - q_length] = self.visible[module.layer_idx][..., : total - q_length]
        causal = torch.arange(total)[None, :] <= torch.arange(total - q_length, total)[:, None]
        chunk = causal & (torch.arange(total) >= total - q_length)
        allowed = (past[:, :, None, :] | chunk).repeat_interleave(group, dim=1)
        logits = (query @ key.repeat_interleave(group, 1).transpose(2, 3)) * scaling
        weights = logits.masked_fill(~allowed, float("-inf")).softmax(-1)
        self.queries[module.layer_idx] = torch.cat(
            [self.queries.get(module.layer_idx, query[:, :, :0]), query], dim=2)[:, :, -8:]
        return (weights @ value.repeat_interleave(group, 1)).transpose(1, 2), None


def visible_positions(cache, batch, kv_heads, total):
    """(batch, kv_heads, total) for every layer: the positions the evicting cache holds."""
    out = {}
    for index, layer in enumerate(cache.layers):
        mask = torch.zeros(batch, kv_heads, total + 1, dtype=torch.bool)
        if layer.is_initialized:
            mask.scatter_(2, layer.positions + 1, True)         # invalid slots (-1) land in column 0
        out[index] = mask[..., 1:]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("chunk", [1, 5])
def test_logits_equal_full_cache_with_evicted_slots_masked(kind, attention, chunk):
    budget, buffer, prompt, decode = 48, 32, 64, 600
    model = tiny_model(kind, attention)
    kv_heads = model.config.num_key_value_heads
    reference = MaskedFullAttention()
    full = clone_model(model, reference.name)
    cache = make_evicting_cache(model, budget=budget, buffer=buffer, method="rkv")
    full_cache = DynamicCache(config=full.config)
    tokens = torch.randint(0, VOCAB, (2, prompt + decode), generator=torch.Generator().manual_seed(1))
    compressions, start = 0, 0
    while start < prompt + decode:
        end = prompt if start == 0 else min(start + chunk, prompt + decode)
        before = [layer.keys.shape[-2] if layer.is_initialized else 0 for layer in cache.layers]
        reference.visible = visible_positions(cache, 2, kv_heads, end)
        with torch.no_grad():
            got = model(tokens[:, start:end], past_key_values=cache).logits
            want = full(tokens[:, start:end], past_key_values=full_cache).logits
        assert (got - want).abs().max() < TOL, f"tokens {start}:{end}"
        for index, layer in enumerate(cache.layers):
            assert layer.get_seq_length() == end
            if layer.keys.shape[-2] < before[index] + (end - start):
                compressions += 1
                held = reference.visible[index].clone()
                held[..., start:end] = True
                assert_kept_set(layer, reference.queries[index], full_cache.layers[index].keys, held, budget)
        start = end
    assert compressions >= 2 * 10                       # prompt + several decode compressions, both layers


def assert_kept_set(layer, queries, full_keys, held, budget):
    """After a compression the layer holds exactly what kept_indices picks among the positions it held."""
    candidates = torch.stack([torch.stack([h.nonzero().squeeze(-1) for h in row]) for row in held])
    keys = full_keys.gather(2, candidates[..., None].expand(-1, -1, -1, full_keys.shape[-1]))
    chosen = kept_indices("rkv", queries, keys, budget=budget, window=8)
    assert layer.positions.shape[-1] == budget
    assert torch.equal(layer.positions, candidates.gather(2, chosen))


def test_physical_size_and_bytes_stay_bounded_over_2000_tokens():
    budget, buffer = 24, 16
    model = tiny_model("qwen2")
    cache = make_evicting_cache(model, budget=budget, buffer=buffer, method="snapkv")
    heads, dim = model.config.num_key_value_heads, model.config.hidden_size // model.config.num_attention_heads
    slot_bytes = heads * dim * 4 * 2 + heads * 8 + heads    # keys + values (float32), position, validity per KV head
    tokens = torch.randint(0, VOCAB, (1, 2000 + 40), generator=torch.Generator().manual_seed(2))
    sizes = []
    with torch.no_grad():
        model(tokens[:, :40], past_key_values=cache)
        for step in range(2000):
            model(tokens[:, 40 + step:41 + step], past_key_values=cache)
            for layer in cache.layers:
                assert layer.keys.shape[-2] <= budget + buffer
                assert layer.keys.nbytes + layer.values.nbytes <= (budget + buffer) * heads * dim * 4 * 2
                assert layer.nbytes() == (budget + buffer) * slot_bytes   # preallocated once: exactly the bound
            sizes.append(cache.physical_size)
    assert cache.get_seq_length() == 2040
    assert sizes.count(budget) == 2000 // buffer           # compressed every `buffer` tokens, to the budget
    assert max(sizes) == budget + buffer - 1


def decode_alone(model, tokens, prompt, policy_kwargs):
    """Logits of every decode step of one row run in its own cache."""
    cache = make_evicting_cache(model, **policy_kwargs)
    with torch.no_grad():
        model(tokens[None, :prompt], past_key_values=cache)
        return torch.stack([model(tokens[None, t:t + 1], past_key_values=cache).logits[0, -1]
                            for t in range(prompt, len(tokens))])


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_forked_rows_equal_each_row_alone(attention):
    policy = dict(budget=16, buffer=8, method="rkv")
    model = tiny_model("qwen2", attention)
    prompt, steps = 20, 40
    shared = torch.randint(0, VOCAB, (prompt,), generator=torch.Generator().manual_seed(3))
    own = torch.randint(0, VOCAB, (3, steps), generator=torch.Generator().manual_seed(4))
    rows = [torch.cat([shared, own[r]]) for r in range(3)]
    cache = make_evicting_cache(model, **policy)
    with torch.no_grad():
        model(shared[None], past_key_values=cache)
        forked = cache.fork(3)
        got = torch.stack([model(own[:, t:t + 1], past_key_values=forked).logits[:, -1] for t in range(steps)], 1)
    assert cache.lengths.tolist() == [prompt]                           # the source is untouched
    for r in range(3):
        assert (got[r] - decode_alone(model, rows[r], prompt, policy)).abs().max() < TOL


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_concatenated_rows_of_different_lengths_equal_each_row_alone(attention):
    policy = dict(budget=16, buffer=8, method="rkv")
    model = tiny_model("llama", attention)
    prompts, steps = [10, 37, 23], 50
    gen = torch.Generator().manual_seed(5)
    rows = [torch.randint(0, VOCAB, (p + 2 * steps,), generator=gen) for p in prompts]
    caches = []
    with torch.no_grad():
        for row, p in zip(rows, prompts):
            caches.append(make_evicting_cache(model, **policy))
            model(row[None, :p], past_key_values=caches[-1])
        batch = concat(caches)
        assert batch.lengths.tolist() == prompts
        got = []
        for t in range(steps):
            step = torch.stack([row[p + t] for row, p in zip(rows, prompts)])[:, None]
            got.append(model(step, past_key_values=batch, position_ids=batch.next_positions(1)).logits[:, -1])
        parts = split(batch, [1, 2])
        assert [part.lengths.tolist() for part in parts] == [[prompts[0] + steps], [p + steps for p in prompts[1:]]]
        for t in range(steps, 2 * steps):
            step = torch.stack([row[p + t] for row, p in zip(rows, prompts)])[:, None]
            first = model(step[:1], past_key_values=parts[0]).logits[:, -1]
            rest = model(step[1:], past_key_values=parts[1], position_ids=parts[1].next_positions(1)).logits[:, -1]
            got.append(torch.cat([first, rest]))
    got = torch.stack(got, 1)
    assert parts[0].physical_size <= 16 + 8
    for r, (row, p) in enumerate(zip(rows, prompts)):
        assert (got[r] - decode_alone(model, row, p, policy)).abs().max() < TOL


def test_selected_rows_equal_each_row_alone():
    policy = dict(budget=16, buffer=8, method="snapkv")
    model = tiny_model("qwen2")
    tokens = torch.randint(0, VOCAB, (3, 60), generator=torch.Generator().manual_seed(6))
    cache = make_evicting_cache(model, **policy)
    with torch.no_grad():
        model(tokens[:, :30], past_key_values=cache)
        picked = cache.select(torch.tensor([2, 0]))
        got = torch.stack([model(tokens[[2, 0], t:t + 1], past_key_values=picked).logits[:, -1]
                           for t in range(30, 60)], 1)
    for out, r in zip(got, (2, 0)):
        assert (out - decode_alone(model, tokens[r], 30, policy)).abs().max() < TOL


def test_in_place_row_operations_of_the_transformers_api():
    """batch_repeat_interleave, batch_select_indices and reorder_cache move positions with the rows."""
    policy = dict(budget=16, buffer=8, method="rkv")
    model = tiny_model("qwen2")
    tokens = torch.randint(0, VOCAB, (2, 70), generator=torch.Generator().manual_seed(10))
    cache = make_evicting_cache(model, **policy)
    with torch.no_grad():
        model(tokens[:, :30], past_key_values=cache)
        before = cache.layers[1].positions.clone()
        cache.batch_repeat_interleave(2)                         # rows 0, 0, 1, 1
        cache.reorder_cache(torch.tensor([3, 0, 2, 1]))          # rows 1, 0, 1, 0
        cache.batch_select_indices(torch.tensor([0, 1]))         # rows 1, 0
        assert torch.equal(cache.layers[1].positions, before[[1, 0]])
        got = torch.stack([model(tokens[[1, 0], t:t + 1], past_key_values=cache).logits[:, -1]
                           for t in range(30, 70)], 1)
    for out, r in zip(got, (1, 0)):
        assert (out - decode_alone(model, tokens[r], 30, policy)).abs().max() < TOL


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_padded_chunks_append_different_numbers_of_tokens_per_row(attention):
    """attention_mask (batch, q) marks each row's real tokens in a right-padded chunk."""
    policy = dict(budget=16, buffer=8, method="rkv")
    model = tiny_model("qwen2", attention)
    tokens = torch.randint(0, VOCAB, (2, 80), generator=torch.Generator().manual_seed(7))
    lengths = [[3, 5], [5, 1], [2, 4]] * 5
    cache = make_evicting_cache(model, **policy)
    alone = [make_evicting_cache(model, **policy) for _ in range(2)]
    seen = [10, 10]
    with torch.no_grad():
        model(tokens[:, :10], past_key_values=cache)
        for r in range(2):
            model(tokens[r:r + 1, :10], past_key_values=alone[r])
        for counts in lengths:
            chunk = torch.zeros(2, max(counts), dtype=torch.long)
            mask = torch.zeros(2, max(counts), dtype=torch.long)
            for r, n in enumerate(counts):
                chunk[r, :n], mask[r, :n] = tokens[r, seen[r]:seen[r] + n], 1
            got = model(chunk, attention_mask=mask, past_key_values=cache,
                        position_ids=cache.next_positions(max(counts))).logits
            for r, n in enumerate(counts):
                want = model(chunk[r:r + 1, :n], past_key_values=alone[r]).logits
                assert (got[r, :n] - want[0]).abs().max() < TOL
                seen[r] += n
    assert cache.lengths.tolist() == seen


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_left_padded_prompts_prefilled_together_equal_each_prompt_alone(attention):
    policy = dict(budget=16, buffer=8, method="rkv")
    model = tiny_model("llama", attention)
    prompts = [torch.randint(0, VOCAB, (n,), generator=torch.Generator().manual_seed(n)) for n in (30, 12)]
    follow = torch.randint(0, VOCAB, (2, 30), generator=torch.Generator().manual_seed(9))
    ids, mask = torch.zeros(2, 30, dtype=torch.long), torch.zeros(2, 30, dtype=torch.long)
    positions = torch.zeros(2, 30, dtype=torch.long)
    for r, prompt in enumerate(prompts):
        ids[r, 30 - len(prompt):], mask[r, 30 - len(prompt):] = prompt, 1
        positions[r, 30 - len(prompt):] = torch.arange(len(prompt))
    cache = make_evicting_cache(model, **policy)
    with torch.no_grad():
        got = [model(ids, attention_mask=mask, position_ids=positions, past_key_values=cache).logits[:, -1]]
        assert cache.lengths.tolist() == [30, 12]
        for t in range(30):
            got.append(model(follow[:, t:t + 1], past_key_values=cache,
                             position_ids=cache.next_positions(1)).logits[:, -1])
    got = torch.stack(got, 1)
    for r, prompt in enumerate(prompts):
        alone = make_evicting_cache(model, **policy)
        with torch.no_grad():
            want = [model(prompt[None], past_key_values=alone).logits[0, -1]]
            want += [model(follow[r:r + 1, t:t + 1], past_key_values=alone).logits[0, -1] for t in range(30)]
        assert (got[r] - torch.stack(want)).abs().max() < TOL


def test_rows_of_different_lengths_need_per_row_positions():
    model = tiny_model("qwen2")
    caches = [make_evicting_cache(model, budget=None) for _ in range(2)]
    with torch.no_grad():
        model(torch.ones(1, 3, dtype=torch.long), past_key_values=caches[0])
        model(torch.ones(1, 5, dtype=torch.long), past_key_values=caches[1])
        with pytest.raises(ValueError, match=r"different numbers of tokens \(\[3, 5\]\).*next_positions"):
            model(torch.ones(2, 1, dtype=torch.long), past_key_values=concat(caches))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_before_the_first_compression_equals_stock_attention_with_a_full_cache(kind, attention):
    """Until the cache first reaches budget + buffer slots nothing is evicted: the logits are the stock model's
    (transformers' own attention over a DynamicCache), for a prompt and every decode step."""
    budget, buffer, prompt = 24, 16, 20
    model = tiny_model(kind, attention)
    stock = clone_model(model, attention)
    cache, dynamic = make_evicting_cache(model, budget=budget, buffer=buffer), DynamicCache(config=stock.config)
    tokens = torch.randint(0, VOCAB, (2, budget + buffer), generator=torch.Generator().manual_seed(12))
    with torch.no_grad():
        for start, end in [(0, prompt), *[(t, t + 1) for t in range(prompt, budget + buffer - 1)]]:
            got = model(tokens[:, start:end], past_key_values=cache).logits
            want = stock(tokens[:, start:end], past_key_values=dynamic).logits
            assert (got - want).abs().max() < 1e-5, f"tokens {start}:{end}"
        assert cache.physical_size == budget + buffer - 1
        model(tokens[:, -1:], past_key_values=cache)
    assert cache.physical_size == budget                  # the next token fills the cache: the first compression


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_budget_none_equals_dynamic_cache(attention):
    model = tiny_model("qwen2", attention)
    stock = clone_model(model, attention)
    tokens = torch.randint(0, VOCAB, (2, 300), generator=torch.Generator().manual_seed(8))
    cache, dynamic = make_evicting_cache(model, budget=None), DynamicCache(config=stock.config)
    with torch.no_grad():
        for start, end in [(0, 50), (50, 57), *[(t, t + 1) for t in range(57, 300)]]:
            got = model(tokens[:, start:end], past_key_values=cache).logits
            want = stock(tokens[:, start:end], past_key_values=dynamic).logits
            assert (got - want).abs().max() < 1e-5
    assert cache.physical_size == 300


@pytest.mark.parametrize("kwargs, message", [
    (dict(budget=8, window=8), r"budget must be larger than window, got budget=8 <= window=8"),
    (dict(budget=64, buffer=0), r"buffer must be >= 1.*got 0"),
    (dict(budget=64, method="lru"), r"unknown eviction method 'lru'; valid methods: .*rkv.*snapkv"),
])
def test_bad_policy_is_rejected(kwargs, message):
    schedule = {("evictor" if name == "method" else name): value for name, value in kwargs.items()}
    with pytest.raises(ValueError, match=message):
        EvictionSchedule(**({"evictor": "rkv"} | schedule))
    with pytest.raises(ValueError, match=message):
        make_evicting_cache(tiny_model("qwen2"), **kwargs)


def test_architectures_it_cannot_serve_are_rejected():
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=1, n_head=2))
    with pytest.raises(ValueError, match=r"cannot serve model_type 'gpt2'.*supported: llama, qwen2, qwen3"):
        make_evicting_cache(gpt2, budget=64)
    sliding = tiny_model("qwen2", use_sliding_window=True, sliding_window=16, max_window_layers=0)
    with pytest.raises(ValueError, match=r"full-attention layers only.*sliding_attention"):
        make_evicting_cache(sliding, budget=64)


def test_cache_used_without_the_evicting_attention_is_an_error():
    model = tiny_model("qwen2")
    cache = make_evicting_cache(model, budget=32)
    model.set_attn_implementation("sdpa")
    with pytest.raises(RuntimeError, match="does not use the evicting attention"):
        with torch.no_grad():
            model(torch.ones(1, 4, dtype=torch.long), past_key_values=cache)

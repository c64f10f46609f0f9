"""Every registered evictor through the transformers evicting cache: logits equal attention over a full cache
with exactly the evicted slots masked (per layer, row and KV head), every head holds what its budget allows,
and the cache's bytes are the schedule's stated bound from the first compression on.

Covers the protocol's cache-side duties: values handed to value-aware evictors (criticalkv), per-slot state
accumulated and gathered (h2o, whose kept set is checked against the accumulated attention of the masked
reference), per-layer budgets (pyramidkv) and per-head validity (adakv)."""

import sys
from pathlib import Path

import pytest
import torch
from test_evicting_cache import VOCAB, MaskedFullAttention, clone_model, tiny_model, visible_positions
from transformers import DynamicCache

from kvrescue_eval.eviction import EVICTORS
sys.path.insert(0, str(Path(__file__).parents[1] / "engine"))
from hf_probes import make_evicting_cache  # noqa: E402

BUDGET, BUFFER, PROMPT, DECODE, LAYERS = 20, 8, 30, 90, 4


class RecordingAttention(MaskedFullAttention):
    """The masked full attention, also summing each position's attention weights per layer and KV head
    (over the step's queries and each KV head's group): H2O's accumulated attention, by definition."""

    name = "test_masked_full_recording"

    def __init__(self):
        super().__init__()
        self.received = {}

    def __call__(self, module, query, key, value, attention_mask, scaling, **kwargs):
        out = super().__call__(module, query, key, value, attention_mask, scaling, **kwargs)
        batch, q_heads, q_length, _ = query.shape
        total, kv_heads = key.shape[2], key.shape[1]
        group = q_heads // kv_heads
        past = torch.zeros(batch, kv_heads, total, dtype=torch.bool)
        past[..., : total - q_length] = self.visible[module.layer_idx][..., : total - q_length]
        causal = torch.arange(total)[None, :] <= torch.arange(total - q_length, total)[:, None]
        allowed = (past[:, :, None, :] | (causal & (torch.arange(total) >= total - q_length))).repeat_interleave(group, 1)
        logits = (query @ key.repeat_interleave(group, 1).transpose(2, 3)) * scaling
        weights = logits.masked_fill(~allowed, float("-inf")).softmax(-1)
        mass = weights.view(batch, kv_heads, group, q_length, total).sum(dim=(2, 3))
        before = self.received.get(module.layer_idx, mass.new_zeros(batch, kv_heads, 0))
        self.received[module.layer_idx] = torch.nn.functional.pad(before, (0, total - before.shape[-1])) + mass
        return out


@pytest.mark.parametrize("kind", ["qwen2", "qwen3"])
@pytest.mark.parametrize("evictor", sorted(EVICTORS))
def test_every_evictor_equals_its_masked_full_cache_and_stays_at_its_bound(evictor, kind):
    model = tiny_model(kind, layers=LAYERS)
    kv_heads, dim = model.config.num_key_value_heads, model.config.hidden_size // model.config.num_attention_heads
    reference = RecordingAttention()
    full = clone_model(model, reference.name)
    cache = make_evicting_cache(model, budget=BUDGET, buffer=BUFFER, method=evictor)
    schedule = cache.schedule
    bound = schedule.kv_bytes(num_layers=LAYERS, kv_heads=kv_heads, key_dim=dim, value_dim=dim, itemsize=4,
                              extra_per_slot=kv_heads * 9) * 2       # int64 position + bool validity per head; 2 rows
    full_cache = DynamicCache(config=full.config)
    tokens = torch.randint(0, VOCAB, (2, PROMPT + DECODE), generator=torch.Generator().manual_seed(4))
    start, compressions = 0, 0
    while start < PROMPT + DECODE:
        end = PROMPT if start == 0 else start + 1
        reference.visible = visible_positions(cache, 2, kv_heads, end)
        before = [layer.store.width if layer.is_initialized else 0 for layer in cache.layers]
        with torch.no_grad():
            got = model(tokens[:, start:end], past_key_values=cache).logits
            want = full(tokens[:, start:end], past_key_values=full_cache).logits
        assert (got - want).abs().max() < 1e-4, f"tokens {start}:{end}"
        for index, layer in enumerate(cache.layers):
            held = (layer.positions >= 0).sum(-1)                       # tokens per row and head
            budget = schedule.layer_budget(index, LAYERS)
            assert layer.store.width <= schedule.slots(index, LAYERS)
            if layer.store.width < before[index] + (end - start):          # it compressed this step
                compressions += 1
                # a uniform budget: every head holds it; per-head budgets: the heads share it
                assert (held.sum(-1) == budget * kv_heads).all(), (index, held)
                if evictor != "adakv":
                    assert (held == budget).all()
                if evictor == "h2o":
                    held_before = reference.visible[index].clone()
                    held_before[..., start:end] = True
                    assert_heavy_hitters(layer, reference.received[index], held_before, budget)
        assert cache.nbytes() == bound
        start = end
    assert compressions >= LAYERS * 2


def assert_heavy_hitters(layer, received, held_before, budget, window=8):
    """Right after a compression H2O holds the newest `window` positions plus, of the older ones it held,
    the budget - window that received the most attention so far."""
    for row in range(held_before.shape[0]):
        for head in range(held_before.shape[1]):
            held = held_before[row, head].nonzero().squeeze(-1).tolist()
            older = torch.tensor(held[:-window])
            top = older[received[row, head, older].topk(budget - window).indices].tolist()
            assert sorted(layer.positions[row, head].tolist()) == sorted(top + held[-window:])


def test_randomattention_keeps_every_prompt_token_through_forks_and_compressions():
    # a 10-token prompt under budget 20 (window 8): 12 candidates kept, the prompt's 10 among them at every
    # compression, in each of the rows forked after the prompt, joined with another problem's row (whose 25-token
    # prompt outgrows the budget: it keeps prompt tokens only)
    model = tiny_model("qwen2", layers=2)
    prompt_length, generated = 10, 60
    cache = make_evicting_cache(model, budget=BUDGET, buffer=BUFFER, method="randomattention")
    other = make_evicting_cache(model, budget=BUDGET, buffer=BUFFER, method=cache.schedule.evictor)
    tokens = torch.randint(0, VOCAB, (1, prompt_length + generated), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        model(tokens[:, :prompt_length], past_key_values=cache)
        model(tokens[:, :25], past_key_values=other)                       # a 25-token prompt, compressed at once
        rows = type(cache).gather([(cache.fork(2), None), (other, None)])
        held_generated = set()
        for step in range(prompt_length, prompt_length + generated):
            model(tokens[:, step:step + 1].expand(3, 1), past_key_values=rows, position_ids=rows.next_positions(1))
            for layer in rows.layers:
                for row, length in ((0, prompt_length), (1, prompt_length)):
                    for head in layer.positions[row]:
                        held = set(head.tolist())
                        assert set(range(length)) <= held, (step, row)
                        held_generated |= held - set(range(length))
                for head in layer.positions[2]:   # the prompt fills the budget: a generated token goes with the window
                    generated_held = sorted(p for p in head.tolist() if p >= 25)
                    assert generated_held == list(range(generated_held[0], 25 + step - prompt_length + 1)), step
    assert len(held_generated) > 30               # the generated tokens kept vary (drawn), beyond the window


def test_criticalkv_gets_each_layers_output_projection_per_query_head():
    from kvrescue_eval.eviction import CriticalKV

    class Recorded(CriticalKV):
        def select(self, view, budget):
            seen.append(view)
            return super().select(view, budget)

    seen = []
    model = tiny_model("qwen2", layers=LAYERS)
    cache = make_evicting_cache(model, budget=BUDGET, buffer=BUFFER, method=Recorded())
    with torch.no_grad():
        model(torch.randint(0, VOCAB, (2, PROMPT), generator=torch.Generator().manual_seed(1)), past_key_values=cache)
    assert sorted(view.layer for view in seen) == list(range(LAYERS))
    dim = model.config.hidden_size // model.config.num_attention_heads
    for view in seen:
        weight = model.model.layers[view.layer].self_attn.o_proj.weight          # (hidden, q_heads x dim)
        for head in range(model.config.num_attention_heads):
            assert torch.equal(view.out_proj[head], weight[:, head * dim:(head + 1) * dim])

"""A model switched to our attention (`kvrescue_sdpa` / `kvrescue_eager`) behaves exactly like the stock
model with any cache that is not an `EvictingCache`, or none: the evicting logic is for our cache only.

The reference is the same weights with transformers' own attention, fed the same left-padded batch.
"""

import sys
from pathlib import Path

import pytest
import torch
from transformers import DynamicCache

from kvrescue_eval.model_adapters.hf.evicting_attention import use_evicting_attention
sys.path.insert(0, str(Path(__file__).parents[1] / "engine"))
from hf_probes import make_evicting_cache  # noqa: E402

from test_evicting_cache import KINDS, VOCAB, clone_model, tiny_model

TOL = 1e-5
LENGTHS = (9, 4, 7)   # prompts of different lengths, left-padded to the longest
DECODE_STEPS = 4


def left_padded_batch(seed=3):
    width = max(LENGTHS)
    ids = torch.zeros(len(LENGTHS), width, dtype=torch.long)
    mask = torch.zeros(len(LENGTHS), width, dtype=torch.long)
    generator = torch.Generator().manual_seed(seed)
    for row, n in enumerate(LENGTHS):
        ids[row, width - n:] = torch.randint(1, VOCAB, (n,), generator=generator)
        mask[row, width - n:] = 1
    return ids, mask


def positions(mask):
    """Each real token's index among its row's real tokens (as `generate` computes them); pads get 1."""
    return (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)


def ours_and_stock(kind, attention):
    stock = tiny_model(kind, attention)
    ours = clone_model(stock, attention)
    use_evicting_attention(ours)
    assert ours.config._attn_implementation.startswith("kvrescue_")
    return ours, stock


def decode_with_dynamic_cache(model, ids, mask):
    """Logits of the real prefill tokens, then of DECODE_STEPS greedy-free fixed next tokens."""
    follow = torch.randint(1, VOCAB, (ids.shape[0], DECODE_STEPS), generator=torch.Generator().manual_seed(5))
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        out = [model(ids, attention_mask=mask, position_ids=positions(mask), past_key_values=cache).logits[mask == 1]]
        for step in range(DECODE_STEPS):
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=-1)
            out.append(model(follow[:, step:step + 1], attention_mask=mask, position_ids=positions(mask)[:, -1:],
                             past_key_values=cache).logits[:, -1])
    return torch.cat(out)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_left_padded_batch_with_dynamic_cache_equals_stock_attention(kind, attention):
    ours, stock = ours_and_stock(kind, attention)
    ids, mask = left_padded_batch()
    got, want = decode_with_dynamic_cache(ours, ids, mask), decode_with_dynamic_cache(stock, ids, mask)
    assert torch.isfinite(want).all()
    assert (got - want).abs().max() < TOL


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_left_padded_batch_without_cache_equals_stock_attention(kind, attention):
    ours, stock = ours_and_stock(kind, attention)
    ids, mask = left_padded_batch()
    with torch.no_grad():
        got, want = (model(ids, attention_mask=mask, position_ids=positions(mask), use_cache=False).logits[mask == 1]
                     for model in (ours, stock))
    assert (got - want).abs().max() < TOL


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_plain_cache_between_evicting_cache_steps_equals_stock_attention(attention):
    """One model serving both: the evicting cache's steps leave nothing behind that changes a plain cache's."""
    ours, stock = ours_and_stock("qwen2", attention)
    ids, mask = left_padded_batch()
    evicting = make_evicting_cache(ours, budget=16, buffer=4)
    tokens = torch.randint(1, VOCAB, (2, 30), generator=torch.Generator().manual_seed(11))
    with torch.no_grad():
        ours(tokens[:, :20], past_key_values=evicting)
        got = decode_with_dynamic_cache(ours, ids, mask)
        for t in range(20, 30):
            ours(tokens[:, t:t + 1], past_key_values=evicting, position_ids=evicting.next_positions(1))
    assert evicting.physical_size <= 16 + 4
    assert (got - decode_with_dynamic_cache(stock, ids, mask)).abs().max() < TOL


def test_helper_logprob_scorer_shares_the_helper_model_and_scores_as_a_separate_copy(tmp_path):
    """build_components gives the helper-logprob scorer the helper policy's own model (switched to our
    attention); its scores over trajectories of different lengths (left-padded prefixes, batched) equal
    those of a separately loaded stock copy, also while the helper decodes with its evicting cache."""
    from test_scorers import CANDIDATES, QUESTION, STEPS, tiny_tokenizer

    from kvrescue_eval.engine.scoring import ScoreRequest
    from kvrescue_eval.model_adapters.backends import build_components
    from kvrescue_eval.model_adapters.hf.loading import load_causal_lm
    from kvrescue_eval.model_adapters.settings.model_args import parse_model_args
    from kvrescue_eval.model_adapters.scorers import build_scorer
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = tiny_tokenizer(tmp_path, "helper")
    torch.manual_seed(1)
    LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                                 initializer_range=0.2)).save_pretrained(tmp_path / "helper")
    folder = str(tmp_path / "helper")
    args = parse_model_args(dict(base=folder, helper=folder, scorer="helper-logprob", n=2, budget=16, buffer=8,
                                 dtype="float32", device="cpu"))
    _, helper, shared, _ = build_components(args)
    assert shared.model is helper.model and helper.model.config._attn_implementation == "kvrescue_sdpa"
    model, tokenizer = load_causal_lm(folder, "float32", "cpu")
    separate = build_scorer("helper-logprob", model=model, tokenizer=tokenizer)
    assert model.config._attn_implementation == "sdpa"

    evicting = make_evicting_cache(helper.model, budget=16, buffer=8)
    decoded = torch.randint(1, len(tokenizer), (2, 40), generator=torch.Generator().manual_seed(2))
    history = {"a": [], "bbbbbbbb": []}  # questions of different lengths: prefixes left-padded in one batch
    with torch.no_grad():
        helper.model(decoded[:, :10], past_key_values=evicting)
        for n in range(3):
            requests = [ScoreRequest(key, f"{QUESTION} {key}", list(steps), CANDIDATES) for key, steps in history.items()]
            got = shared.score(requests)
            for t in range(10 + 10 * n, 20 + 10 * n):
                helper.model(decoded[:, t:t + 1], past_key_values=evicting, position_ids=evicting.next_positions(1))
            assert got == [pytest.approx(want, abs=TOL) for want in separate.score(requests)]
            for key in history:
                history[key].append(STEPS[(n + len(key)) % len(STEPS)])
    assert evicting.physical_size <= 16 + 8

"""Writes kvpress_cases.pt: kept sets of kvpress 0.5.5's presses on saved random tensors, for
tests/eviction/test_reference.py. kvpress cannot be installed beside this package (it needs
transformers < 5.3), so this runs in a venv of its own and imports nothing of ours:

    python -m venv /work/venvs/kvpress            # no --system-site-packages
    /work/venvs/kvpress/bin/pip install torch==2.13.0 && /work/venvs/kvpress/bin/pip install kvpress==0.5.5
    /work/venvs/kvpress/bin/python tests/eviction/reference/generate_kvpress_cases.py

Each case stores its inputs (queries, keys, values: post-RoPE, float32; out_proj: the random output projection
W_o, o_proj.weight of shape (hidden, q_heads * head_dim), which CriticalKV reads), budget and window, and what the
press keeps. Presses that score the candidates only (AdaKV, CriticalKV over KnormPress) are run on the n = L - window
older slots with compression_ratio = 1 - k / n (k = budget - window, exact in binary), since our selection
always keeps the window and shares out only the candidates.
"""

import argparse
import math
from pathlib import Path
from types import SimpleNamespace

import torch
from kvpress import (AdaKVPress, CriticalKVPress, KeyDiffPress, KnormPress, PyramidKVPress, RandomPress,
                     SnapKVPress, StreamingLLMPress, TOVAPress)

HERE = Path(__file__).resolve().parent
BUDGET, WINDOW, LENGTH, DIM = 18, 8, 48, 8   # k = 10 of n = 40 candidates: compression_ratio 0.75 exactly


def module(q_heads, kv_heads, layer_idx=0, num_layers=1, out_proj=None):
    """What a press reads from an attention module: its config, layer index, head size, and its output
    projection (CriticalKV's W_o: `out_proj`, else the identity)."""
    hidden = q_heads * DIM
    config = SimpleNamespace(num_attention_heads=q_heads, num_key_value_heads=kv_heads, head_dim=DIM,
                             hidden_size=hidden, num_hidden_layers=num_layers, _attn_implementation="sdpa")
    o_proj = torch.nn.Linear(hidden, hidden, bias=False)
    o_proj.weight.data = torch.eye(hidden) if out_proj is None else out_proj
    return SimpleNamespace(config=config, layer_idx=layer_idx, head_dim=DIM, o_proj=o_proj,
                           num_key_value_groups=q_heads // kv_heads)


def inputs(seed, q_heads, kv_heads, batch=2):
    generator = torch.Generator().manual_seed(seed)
    queries = torch.randn(batch, q_heads, LENGTH, DIM, generator=generator)
    keys = torch.randn(batch, kv_heads, LENGTH, DIM, generator=generator)
    values = torch.randn(batch, kv_heads, LENGTH, DIM, generator=generator) * torch.rand(
        batch, kv_heads, LENGTH, 1, generator=generator) * 3
    # a random W_o whose heads weigh the value dimensions very differently (a scale per column), so that
    # ||W_o v||_1 ranks slots otherwise than ||v||_1 does
    out_proj = torch.randn(q_heads * DIM, q_heads * DIM, generator=generator) * torch.rand(
        1, q_heads * DIM, generator=generator) * 2
    return queries, keys, values, out_proj


def attention(queries, keys):
    """Causal softmax attention weights (batch, q_heads, L, L), as the model's attention gives them."""
    group = queries.shape[1] // keys.shape[1]
    logits = queries @ keys.repeat_interleave(group, dim=1).transpose(-1, -2) / math.sqrt(DIM)
    causal = torch.ones(LENGTH, LENGTH, dtype=torch.bool).tril()
    return logits.masked_fill(~causal, float("-inf")).softmax(dim=-1)


def kept_by_scores(press, mod, keys, values, attn, n_kept, hidden_len=LENGTH):
    hidden = torch.zeros(keys.shape[0], hidden_len, 1)
    scores = press.score(mod, hidden, keys, values, attn, {})
    return scores.topk(n_kept, dim=-1).indices.sort(dim=-1).values


def kept_by_mask(press, mod, keys, values):
    """AdaKV-style presses mask evicted keys instead of removing them: the kept slots are the unmasked ones."""
    press.compress(mod, torch.zeros(keys.shape[0], keys.shape[2], 1), keys, values, None, {})
    kept = torch.ones(keys.shape[:3], dtype=torch.bool)
    batch, head, slot = mod.masked_key_indices
    kept[batch, head, slot] = False
    return kept


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=HERE / "kvpress_cases.pt")
    args = parser.parse_args()
    candidates, picks = LENGTH - WINDOW, BUDGET - WINDOW
    ratio = 1 - BUDGET / LENGTH
    cases = {}
    for name, q_heads, kv_heads, seed in (("gqa", 4, 2, 0), ("one_kv_head", 4, 1, 1)):
        queries, keys, values, out_proj = inputs(seed, q_heads, kv_heads)
        mod, attn = module(q_heads, kv_heads, out_proj=out_proj), attention(queries, keys)
        kept = {
            # whole-cache presses: the window is theirs too (kept because it scores highest or is newest)
            "streamingllm": kept_by_scores(StreamingLLMPress(compression_ratio=ratio, n_sink=4), mod, keys, values,
                                           attn, BUDGET),
            "snapkv": kept_by_scores(SnapKVPress(compression_ratio=ratio, window_size=WINDOW, kernel_size=7), mod,
                                     keys, values, attn, BUDGET),
            "tova": kept_by_scores(TOVAPress(compression_ratio=ratio), mod, keys, values, attn, BUDGET),
            # candidate scores of presses that score every slot: their top k of the n candidates
            "knorm": KnormPress().score(mod, None, keys, values, None, {})[..., :candidates]
            .topk(picks, dim=-1).indices.sort(dim=-1).values,
            "keydiff": KeyDiffPress().score(mod, None, keys, values, None, {})[..., :candidates]
            .topk(picks, dim=-1).indices.sort(dim=-1).values,
            "random": RandomPress(seed=7).score(mod, None, keys, values, None, {})[..., :candidates]
            .topk(picks, dim=-1).indices.sort(dim=-1).values,
            # presses that share out or rescale the candidates (run on the candidates only)
            "adakv": kept_by_mask(AdaKVPress(KnormPress(compression_ratio=1 - picks / candidates), alpha_safeguard=0.2),
                                  mod, keys[:, :, :candidates], values[:, :, :candidates]),
            "criticalkv": CriticalKVPress(KnormPress(compression_ratio=1 - picks / candidates), first_stage_ratio=0.5)
            .score(mod, None, keys[:, :, :candidates], values[:, :, :candidates], None, {})
            .topk(picks, dim=-1).indices.sort(dim=-1).values,
        }
        cases[name] = dict(queries=queries, keys=keys, values=values, out_proj=out_proj, budget=BUDGET, window=WINDOW,
                           kept=kept)
    layers = 24
    pyramid = PyramidKVPress(compression_ratio=1 - 256 / 4096, window_size=8, beta=20)   # 256 kept on average
    cases["pyramidkv_budgets"] = dict(q_len=4096, window=8, kept_per_layer=256, layers=layers, budgets=[
        pyramid.get_layer_budget(module(4, 2, layer, layers), 4096) for layer in range(layers)])
    torch.save(cases, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

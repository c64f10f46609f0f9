"""Base KV memory against generated length: bounded by budget + buffer, against the full-KV helper.

SmolLM2-135M-Instruct decodes a GSM8K prompt token by token through the evicting cache (R-KV,
budget 64, buffer 128: compressed to 64 slots whenever it reaches 192), and the same tokens run
through the full cache (budget=None, the helper's cache). `EvictingCache.nbytes()` is read after
every forward: the allocated slots (keys, values and per-slot bookkeeping) of every layer. The base
preallocates budget + buffer slots per row and layer, so its bytes are the bound from the first
token on; the full cache grows in steps of 256 slots.

base_kv_growth = peak base bytes over the last length interval / peak base bytes over the first
interval after the first compression (1.0: flat). Each interval spans at least one full
compression cycle, so a peak is the bound itself, which is also computed from the model's shape.
"""

import sys
from pathlib import Path

import torch

from bench_common import fail, gsm8k_conversations, load_smollm2_sdpa, setup_threads, show, sizes
from records import machine, record

from kvrescue_eval.engine.sampling import SamplingParams, filtered_probs
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "engine"))  # the tests' helper
from hf_probes import make_evicting_cache  # noqa: E402
from kvrescue_eval.model_adapters.prompts import render_prompt

BUDGET = 64


def bytes_per_slot(model) -> int:
    """Bytes one slot costs in one layer: keys and values (kv_heads x head_dim each), a position per
    KV head (int64) and a validity flag per KV head (bool)."""
    config = model.config
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    kv_heads = config.num_key_value_heads
    return 2 * kv_heads * head_dim * model.dtype.itemsize + kv_heads * 8 + kv_heads


@torch.inference_mode()
def base_trace(model, prompt, generated, buffer):
    """Tokens sampled by the evicting base and its cache bytes after each forward (index 0: prefill)."""
    cache = make_evicting_cache(model, budget=BUDGET, buffer=buffer, method="rkv")
    generator = torch.Generator().manual_seed(0)
    logits = model(input_ids=torch.tensor([prompt]), past_key_values=cache, use_cache=True,
                   logits_to_keep=1).logits[:, -1]
    tokens, trace = [], [cache.nbytes()]
    for _ in range(generated):
        token = torch.multinomial(filtered_probs(logits, SamplingParams()), 1, generator=generator)
        tokens.append(int(token))
        logits = model(input_ids=token, past_key_values=cache, position_ids=cache.next_positions(1),
                       use_cache=True, logits_to_keep=1).logits[:, -1]
        trace.append(cache.nbytes())
    return tokens, trace


@torch.inference_mode()
def helper_bytes(model, prompt, tokens, lengths, chunk=128):
    """Full-cache bytes after the prompt and the first `length` generated tokens, for each length."""
    cache = make_evicting_cache(model, budget=None)
    model(input_ids=torch.tensor([prompt]), past_key_values=cache, use_cache=True, logits_to_keep=1)
    done, out = 0, {}
    for length in lengths:
        while done < length:
            piece = tokens[done:min(done + chunk, length)]
            model(input_ids=torch.tensor([piece]), past_key_values=cache, position_ids=cache.next_positions(len(piece)),
                  use_cache=True, logits_to_keep=1)
            done += len(piece)
        out[length] = cache.nbytes()
    return out


def main():
    threads = setup_threads()
    print(f"machine: {machine()}")
    buffer = sizes(128, 64)
    lengths = sizes([256, 512, 1024], [128, 256])  # each interval holds >= one compression cycle (buffer)
    model, tokenizer = load_smollm2_sdpa()
    prompt = render_prompt(tokenizer, gsm8k_conversations(1)[0])
    if len(prompt) <= BUDGET:
        fail(f"the prompt has {len(prompt)} tokens; it must exceed the budget {BUDGET} to be compressed at prefill")
    tokens, trace = base_trace(model, prompt, lengths[-1], buffer)
    edges = [0, *lengths]
    peaks = {end: max(trace[start + 1:end + 1]) for start, end in zip(edges[:-1], edges[1:])}
    helper = helper_bytes(model, prompt, tokens, lengths)
    layers = model.config.num_hidden_layers
    bound = (BUDGET + buffer) * layers * bytes_per_slot(model)  # the preallocated slots
    if max(trace[1:]) > bound:
        fail(f"base KV reached {max(trace[1:])} bytes, above the bound {bound} of budget + buffer slots")
    growth = peaks[lengths[-1]] / peaks[lengths[0]]
    show([record("base_kv_growth", growth, "x", target=1.0, higher_is_better=False, detail={
        "model": "SmolLM2-135M-Instruct float32", "evictor": "rkv", "budget": BUDGET, "buffer": buffer,
        "prompt_tokens": len(prompt), "generated_lengths": lengths,
        "base_peak_bytes": [peaks[n] for n in lengths], "base_bytes_at_length": [trace[n] for n in lengths],
        "base_bound_bytes": bound, "helper_full_kv_bytes": [helper[n] for n in lengths],
        "helper_over_base_at_longest": helper[lengths[-1]] / peaks[lengths[-1]],
        "bytes_per_slot_all_layers": layers * bytes_per_slot(model), "threads": threads})])


if __name__ == "__main__":
    main()

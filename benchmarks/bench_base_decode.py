"""The evicted base's decode speed: the preallocated, sync-free cache against the one it replaced.

base_decode_speedup: seconds of the frozen previous cache (`legacy/evicting_cache_v1.py`: slots grown by
concatenation, validity read back several times per layer, sdpa repeating the KV heads under a mask)
over seconds of today's `EvictingCache`, for the same work on the same weights: SmolLM2-135M-Instruct
(float32, GQA 9/3 heads), a GSM8K prompt, 8 rows forked from it, R-KV budget 64 with buffer 128 (so
each row is compressed at prefill and every 128 tokens), fixed random tokens fed one per forward pass
(the cost does not depend on which tokens). Two batch layouts: the 8 rows of one problem, and 2 problems
of different prompt lengths joined in one batch (empty slots masked). Runs alternate; the fastest of each
is kept. Time is the process's CPU time (one thread): on a machine shared with other jobs it measures
the work done, where wall time mostly measures the neighbours (wall seconds are reported too). Both
caches must give the same logits (they compute the same attention), which is checked.
"""

import sys
import time
from pathlib import Path

import torch

from bench_common import fail, gsm8k_conversations, load_smollm2_sdpa, setup_threads, show, sizes
from records import machine, record

from kvrescue_eval.model_adapters.hf import evicting_cache
from kvrescue_eval.model_adapters.prompts import render_prompt

sys.path.insert(0, str(Path(__file__).resolve().parent / "legacy"))
import evicting_cache_v1  # noqa: E402

BUDGET, BUFFER, ROWS = 64, 128, 8
IMPLEMENTATIONS = {"new": evicting_cache, "old": evicting_cache_v1}


@torch.inference_mode()
def decode_seconds(module, model, prompts, tokens):
    """Seconds to feed `tokens` (ROWS, steps) one column per forward pass, and the last logits (the rows
    split evenly over `prompts`)."""
    caches = []
    for prompt in prompts:
        cache = module.make_evicting_cache(model, budget=BUDGET, buffer=BUFFER, method="rkv", attention="sdpa")
        model(input_ids=torch.tensor([prompt]), past_key_values=cache, use_cache=True, logits_to_keep=1)
        caches.append(cache.fork(ROWS // len(prompts)))
    cache = caches[0] if len(caches) == 1 else type(caches[0]).gather([(c, None) for c in caches])
    start, wall = time.process_time(), time.perf_counter()
    for column in tokens.T:
        logits = model(input_ids=column[:, None], past_key_values=cache, position_ids=cache.next_positions(1),
                       use_cache=True, logits_to_keep=1).logits[:, -1]
    return time.process_time() - start, time.perf_counter() - wall, logits


def main():
    threads = setup_threads()
    print(f"machine: {machine()}")
    steps, repeats = sizes(256, 140), sizes(2, 1)
    model, tokenizer = load_smollm2_sdpa()
    rendered = sorted((p for p in (render_prompt(tokenizer, c) for c in gsm8k_conversations(8)) if len(p) > BUDGET),
                      key=len)
    prompts = {"one_problem": [rendered[-1]], "two_problems_joined": [rendered[0], rendered[-1]]}
    if len(rendered[0]) == len(rendered[-1]) or len(rendered[0]) <= BUDGET:
        fail(f"prompts of {len(rendered[0])} and {len(rendered[-1])} tokens: they must differ and exceed the budget")
    detail, speedups = {}, []
    for layout, layout_prompts in prompts.items():
        tokens = torch.randint(0, len(tokenizer), (ROWS, steps), generator=torch.Generator().manual_seed(0))
        decode_seconds(evicting_cache, model, layout_prompts, tokens[:, :4])  # warm-up: first forwards allocate
        runs = {name: [] for name in IMPLEMENTATIONS}
        walls = {name: [] for name in IMPLEMENTATIONS}
        logits = {}
        for _ in range(repeats):
            for name, module in IMPLEMENTATIONS.items():
                seconds, wall, logits[name] = decode_seconds(module, model, layout_prompts, tokens)
                runs[name].append(seconds)
                walls[name].append(wall)
        difference = (logits["new"] - logits["old"]).abs().max().item()
        if difference > 1e-3:
            fail(f"{layout}: the two caches give different logits (max difference {difference:.2e})")
        speedups.append(min(runs["old"]) / min(runs["new"]))
        detail[layout] = {"old_cpu_seconds": runs["old"], "new_cpu_seconds": runs["new"], "speedup": speedups[-1],
                          "old_wall_seconds": walls["old"], "new_wall_seconds": walls["new"],
                          "new_tokens_per_s": ROWS * steps / min(runs["new"]), "max_logit_difference": difference}
    show([record("base_decode_speedup", min(speedups), "x", target=1.0, detail={
        "model": "SmolLM2-135M-Instruct float32", "rows": ROWS, "budget": BUDGET, "buffer": BUFFER,
        "decode_steps": steps, "repeats": repeats, "threads": threads, "value": "the smaller of the layouts",
        **detail})])


if __name__ == "__main__":
    main()

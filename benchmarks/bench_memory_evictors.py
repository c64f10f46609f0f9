"""Evicted-base KV memory over 1,024 generated tokens for every registered evictor, against the schedule's bound.

A tiny random Qwen2 (2 layers, 4 query / 2 KV heads of 16, float32; GQA) decodes a 40-token prompt plus 1,024
tokens, token by token, through the evicting cache (budget 32, buffer 16, window 8: a compression every 16
tokens). After every forward `EvictingCache.nbytes()` (all allocated slot storage: keys, values, positions,
per-head validity, and the float32 state when the evictor keeps one) is compared with
`EvictionSchedule.kv_bytes(...)`, the stated bound (positions int64 + validity bool per KV head as the cache's
bookkeeping). Writes docs/results/bench_memory_evictors.json and prints a table; exits 1 if any evictor exceeds it.

    OMP_NUM_THREADS=1 python benchmarks/bench_memory_evictors.py
"""

import json
import sys
from pathlib import Path

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from records import machine

from kvrescue_eval.eviction import EVICTORS
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "engine"))  # the tests' helper
from hf_probes import make_evicting_cache  # noqa: E402

PROMPT, GENERATED, BUDGET, BUFFER, LAYERS = 40, 1024, 32, 16, 2
OUT = Path(__file__).resolve().parents[1] / "docs" / "results" / "bench_memory_evictors.json"


def tiny_model():
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=LAYERS,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096)
    return Qwen2ForCausalLM(config).eval()


@torch.inference_mode()
def trace(model, evictor):
    cache = make_evicting_cache(model, budget=BUDGET, buffer=BUFFER, method=evictor)
    tokens = torch.randint(0, 64, (1, PROMPT + GENERATED), generator=torch.Generator().manual_seed(1))
    model(tokens[:, :PROMPT], past_key_values=cache)
    sizes, widths = [cache.nbytes()], [cache.physical_size]
    for t in range(PROMPT, PROMPT + GENERATED):
        model(tokens[:, t:t + 1], past_key_values=cache, position_ids=cache.next_positions(1))
        sizes.append(cache.nbytes())
        widths.append(cache.physical_size)
    return cache, sizes, widths


def main():
    torch.set_num_threads(1)
    model = tiny_model()
    heads, dim = 2, 16
    rows, failed = [], []
    for name in EVICTORS:
        cache, sizes, widths = trace(model, name)
        bound = cache.schedule.kv_bytes(num_layers=LAYERS, kv_heads=heads, key_dim=dim, value_dim=dim, itemsize=4,
                                      extra_per_slot=heads * 9)
        rows.append({"evictor": name, "bound_bytes": bound, "max_bytes": max(sizes), "min_bytes": min(sizes),
                     "max_slots_per_head": max(widths), "slots_by_layer": [cache.schedule.slots(i, LAYERS) for i in range(LAYERS)],
                     "tokens": PROMPT + GENERATED})
        if max(sizes) > bound:
            failed.append(name)
    print(f"{'evictor':<13} {'bound B':>8} {'max B':>8} {'min B':>8} {'slots/layer':>12}")
    for row in rows:
        print(f"{row['evictor']:<13} {row['bound_bytes']:>8} {row['max_bytes']:>8} {row['min_bytes']:>8} "
              f"{str(row['slots_by_layer']):>12}")
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps({"machine": machine(), "threads": 1, "budget": BUDGET, "buffer": BUFFER,
                               "window": 8, "rows": rows}, indent=1))
    if failed:
        print(f"above the bound: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

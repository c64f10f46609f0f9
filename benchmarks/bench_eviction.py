"""Per-token decode time with the evicting cache vs a full cache, and the crossover context length.

Model: Qwen2.5-0.5B shapes (24 layers, hidden 896, 14 query / 2 KV heads of 64, MLP 4864, vocab
151936, tied embeddings), random weights, float32, CPU, batch 1, sdpa. Caches are filled with random
keys/values (the work per token does not depend on their values), so no 4k-token prefill is needed:
  full:      transformers' DynamicCache holding C slots (stock sdpa);
  full-ours: our EvictingCache with budget=None holding C slots (our attention wrapper);
  evict:     our EvictingCache (R-KV) at logical length C. Over one compression cycle it holds
             budget .. budget + buffer slots and compresses once, at the step that reaches
             budget + buffer. Per-token time = the median step around budget + buffer/2 slots (the
             cycle's mean size) + the compressing step's extra time over the steps just before it
             (median over --repeats) / buffer.
Steps of all configurations are timed in turn (round robin), so load changes on a shared machine hit
them alike; figures are medians.
Crossover: the context at which the full cache's per-token time (a + b*C, least squares over the
contexts) equals the evicting cache's mean per-token time. Compare R-KV's App. D: about 2.5k for
budget 512. Prints a table and JSON; exits non-zero when a figure could not be measured.
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from records import emit, machine, record  # noqa: E402

QUICK = os.environ.get("KVRESCUE_BENCH_QUICK") == "1"


def build_model(layers: int):
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from transformers.initialization import no_init_weights

    config = Qwen2Config(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=layers,
                         num_attention_heads=14, num_key_value_heads=2, tie_word_embeddings=True,
                         max_position_embeddings=32768, attn_implementation="sdpa")
    with no_init_weights():
        model = Qwen2ForCausalLM(config)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.02)
    return model.eval()


def random_kv(slots: int, generator):
    return (torch.randn(1, 2, slots, 64, generator=generator), torch.randn(1, 2, slots, 64, generator=generator))


def full_cache(model, context: int, ours: bool):
    from transformers import DynamicCache

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "engine"))  # the tests' helper
    from hf_probes import make_evicting_cache

    generator = torch.Generator().manual_seed(1)
    if not ours:
        cache = DynamicCache(config=model.config)
        for index in range(model.config.num_hidden_layers):
            cache.update(*random_kv(context, generator), index)
        return cache
    cache = make_evicting_cache(model, budget=None)
    cache.layers = [fill(layer, *random_kv(context, generator), torch.arange(context), context, None)
                    for layer in cache.layers]
    return cache


def evicting_cache(model, context: int, budget: int, buffer: int, slots: int):
    """The evicting cache at logical length `context` holding `slots` slots (a random subset of the
    older positions and the newest ones), `slots - budget` tokens after its last compression."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "engine"))  # the tests' helper
    from hf_probes import make_evicting_cache

    generator = torch.Generator().manual_seed(2)
    cache = make_evicting_cache(model, budget=budget, buffer=buffer, method="rkv")
    recent = slots - budget + 8
    layers = []
    for layer in cache.layers:
        older = torch.randperm(context - recent, generator=generator)[: slots - recent].sort().values
        positions = torch.cat([older, torch.arange(context - recent, context)])
        queries = torch.randn(1, 14, 8, 64, generator=generator)
        layers.append(fill(layer, *random_kv(slots, generator), positions, context, queries))
    cache.layers = layers
    return cache


def step(model, cache, position: int) -> float:
    from transformers import DynamicCache

    implementation = "sdpa" if isinstance(cache, DynamicCache) else "kvrescue_sdpa"
    if model.config._attn_implementation != implementation:
        model.set_attn_implementation(implementation)
    start = time.perf_counter()
    model(torch.tensor([[17]]), past_key_values=cache, position_ids=torch.tensor([[position]]), logits_to_keep=1)
    return time.perf_counter() - start


def round_robin(model, states: dict, steps: int) -> dict:
    """Per-step times of every state, one step of each in turn, so load changes hit all alike."""
    times = {name: [] for name in states}
    with torch.inference_mode():
        for _ in range(steps):
            for name, (cache, context) in states.items():
                times[name].append(step(model, cache, context + len(times[name])))
    return times


def compression_extra(model, contexts, budgets, buffer: int, repeats: int) -> dict:
    """Extra time of the step that compresses, over the 3 steps before it; median over repeats."""
    extra = {}
    for _ in range(repeats):
        states = {(c, b): (evicting_cache(model, c, b, buffer, b + buffer - 4), c) for c in contexts for b in budgets}
        times = round_robin(model, states, 4)
        for key, (cache, _) in states.items():
            check_compressed(cache, key[1])
            extra.setdefault(key, []).append(times[key][-1] - statistics.median(times[key][:-1]))
    return {key: statistics.median(values) for key, values in extra.items()}


def check_compressed(cache, budget):
    if cache.physical_size != budget:
        raise RuntimeError(f"the timed cycle did not end in a compression (holds {cache.physical_size} slots)")


def fill(layer, keys, values, positions, seen, queries):
    """An EvictingLayer like `layer` holding a synthetic state (what a long prefill would have left there):
    one row with the given slots at the given positions, having seen `seen` tokens."""
    from kvrescue_eval.model_adapters.hf.evicting_cache import EvictingLayer
    from kvrescue_eval.model_adapters.hf.kv_slots import SlotStore

    bound = layer.schedule.slots(layer.layer, layer.num_layers) if layer.schedule is not None else None
    store = SlotStore.empty(1, keys.shape[1], keys.shape[-1], values.shape[-1], keys.dtype, keys.device, bound,
                            keys.shape[2])
    store.append(keys, values)
    store.write_positions(positions[None])
    store.seen = [seen]
    return EvictingLayer(layer.schedule, store, queries, layer.layer, layer.num_layers)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1")))
    parser.add_argument("--contexts", type=int, nargs="+", default=[1024, 4096] if QUICK else [1024, 2048, 4096])
    parser.add_argument("--budgets", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--buffer", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4 if QUICK else 24)
    parser.add_argument("--steps", type=int, default=8 if QUICK else 10, help="timed steps per configuration")
    parser.add_argument("--repeats", type=int, default=1 if QUICK else 3, help="compressing steps timed per setting")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"threads={torch.get_num_threads()} layers={args.layers} contexts={args.contexts} "
          f"budgets={args.budgets} buffer={args.buffer}", flush=True)

    model = build_model(args.layers)
    round_robin(model, {"warm-up": (full_cache(model, 64, ours=False), 64)}, 3)
    states = {}
    for context in args.contexts:
        states[("full", context)] = (full_cache(model, context, ours=False), context)
        states[("full_ours", context)] = (full_cache(model, context, ours=True), context)
        for budget in args.budgets:
            middle = budget + args.buffer // 2 - args.steps // 2
            states[(f"evict_{budget}", context)] = (evicting_cache(model, context, budget, args.buffer, middle), context)
    times = round_robin(model, states, args.steps)
    extra = compression_extra(model, args.contexts, args.budgets, args.buffer, args.repeats)
    rows = []
    for context in args.contexts:
        row = {"context": context, "full": statistics.median(times[("full", context)]),
               "full_ours": statistics.median(times[("full_ours", context)])}
        for budget in args.budgets:
            row[f"compress_extra_{budget}"] = extra[(context, budget)]
            row[f"evict_{budget}"] = statistics.median(times[(f"evict_{budget}", context)]) + extra[(context, budget)] / args.buffer
        rows.append(row)
        print(json.dumps({k: round(v, 5) if isinstance(v, float) else v for k, v in row.items()}), flush=True)

    contexts = torch.tensor([float(r["context"]) for r in rows])
    full = torch.tensor([r["full"] for r in rows])
    slope, intercept = linear_fit(contexts, full)
    crossover = {b: (statistics.mean(r[f"evict_{b}"] for r in rows) - intercept) / slope if slope > 0 else float("nan")
                 for b in args.budgets}
    print_table(rows, args.budgets, crossover)
    result = {"machine": dict(machine(), torch_threads=torch.get_num_threads()), "layers": args.layers,
              "steps": args.steps, "repeats": args.repeats,
              "buffer": args.buffer, "rows": rows, "full_fit": {"intercept_s": intercept, "slope_s_per_token": slope},
              "crossover_tokens": crossover}
    print(json.dumps(result, indent=1))

    records = []
    for budget, tokens in crossover.items():
        name = "eviction_crossover_tokens" if budget == 512 else f"eviction_crossover_tokens_b{budget}"
        records.append(record(name, tokens, "tokens", higher_is_better=False,
                              detail={"budget": budget, "buffer": args.buffer, "paper_app_d_b512": 2500,
                                      "threads": torch.get_num_threads(), "layers": args.layers,
                                      "rows_seconds_per_token": rows, "full_fit": result["full_fit"]}))
        longest = rows[-1]
        records.append(record(f"eviction_speedup_{longest['context']}_b{budget}",
                              longest["full"] / longest[f"evict_{budget}"], "x",
                              detail={"full_s": longest["full"], "evict_s": longest[f"evict_{budget}"]}))
    records.append(record(f"full_cache_wrapper_overhead_{rows[-1]['context']}", rows[-1]["full_ours"] / rows[-1]["full"],
                          "x", higher_is_better=False))
    emit(records)
    return 0


def linear_fit(x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    design = torch.stack([x, torch.ones_like(x)], 1).double()
    slope, intercept = torch.linalg.lstsq(design, y.double()[:, None]).solution.squeeze(1).tolist()
    return slope, intercept


def print_table(rows, budgets, crossover):
    head = f"{'context':>8} {'full ms':>9} {'full(ours) ms':>14}" + "".join(f" {f'evict B={b} ms':>15}" for b in budgets)
    print(head)
    for r in rows:
        print(f"{r['context']:>8} {1e3 * r['full']:>9.1f} {1e3 * r['full_ours']:>14.1f}"
              + "".join(f" {1e3 * r[f'evict_{b}']:>15.1f}" for b in budgets))
    print("crossover (tokens): " + ", ".join(f"B={b}: {c:.0f}" for b, c in crossover.items()))


if __name__ == "__main__":
    sys.exit(main())

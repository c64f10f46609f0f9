"""Engine cost on a real model (SmolLM2-135M-Instruct, float32, CPU).

engine_overhead: candidate tokens per second of the engine (mode `full`, N = 8 candidates, one
problem, detector on) against plain batched decoding of the same model: a stock DynamicCache, one
forward and one batched top-k/top-p draw per token, replaying the engine's own batch sizes (the
engine forks 8 rows per step and drops rows as they end their step). Scoring time is excluded
(timed and reported separately): it is model work the plain decoder does not do.
overhead = engine seconds / plain seconds - 1 for the same tokens.

batching_speedup: problems per minute with 8 problems in flight against 1, mode `rescue`,
N = 4 base (R-KV, budget 64) + 4 helper, scorer helper-logprob. The same problems and seeds: the
trajectories are identical (checked), so both runs do the same work.
"""

import time

import torch
from transformers import DynamicCache

from bench_common import Stopwatch, fail, gsm8k_conversations, setup_threads, show, sizes
from records import machine, record

from kvrescue_eval.engine.sampling import filtered_probs
from kvrescue_eval.engine.scheduler import Engine, Problem
from kvrescue_eval.model_adapters.hf_loading import build_components
from kvrescue_eval.model_adapters.hf_policy import render_prompt
from kvrescue_eval.model_adapters.model_args import parse_model_args


def components(**overrides):
    return build_components(parse_model_args({"preset": "smollm2-cpu", **overrides}))


def measure_engine_overhead(threads):
    n, steps, step_tokens, repeats = 8, sizes(4, 2), sizes(48, 16), sizes(3, 1)
    base, _, scorer, config = components(mode="full", n=n, max_steps=steps, max_step_tokens=step_tokens,
                                         max_problems_in_flight=1)
    scoring = Stopwatch()
    scorer.score = scoring.wrap(scorer.score)
    batch_sizes = []
    decode = base.decode
    base.decode = lambda rows: (batch_sizes.append(len(rows)), decode(rows))[1]
    conversation = gsm8k_conversations(1)[0]
    prompt = render_prompt(base.tokenizer, conversation)
    model, attention = base.model, base.model.config._attn_implementation

    def engine_seconds():
        batch_sizes.clear()
        scoring.seconds = 0.0
        start = time.perf_counter()
        [result] = Engine(base, None, scorer, config).run([Problem("p0", conversation)])
        return time.perf_counter() - start - scoring.seconds, result

    def plain_seconds(sizes_):
        model.set_attn_implementation("sdpa")  # the stock attention, on the same weights
        try:
            return plain_decode_seconds(model, prompt, sizes_, base.sampling)
        finally:
            model.set_attn_implementation(attention)

    plain_seconds([n] * 4)  # warm-up: first forwards of a process allocate
    engine, plain = [], []
    for _ in range(repeats):  # alternate, keep the fastest of each: load on a shared machine only slows
        seconds, result = engine_seconds()
        engine.append(seconds)
        plain.append(plain_seconds(list(batch_sizes)))
    tokens = result.stats["base_tokens"]
    if tokens != sum(batch_sizes):
        fail(f"engine reported {tokens} base tokens but decoded {sum(batch_sizes)} rows")
    overhead = min(engine) / min(plain) - 1
    return record("engine_overhead", overhead, "fraction", target=0.20, higher_is_better=False, detail={
        "model": "SmolLM2-135M-Instruct float32", "mode": "full", "n": n, "steps": result.stats["steps"],
        "max_step_tokens": step_tokens, "candidate_tokens": tokens, "decode_calls": len(batch_sizes),
        "mean_batch": tokens / len(batch_sizes), "engine_seconds": engine, "plain_seconds": plain,
        "engine_tokens_per_s": tokens / min(engine), "plain_tokens_per_s": tokens / min(plain),
        "scoring_seconds_excluded": scoring.seconds, "threads": threads})


@torch.inference_mode()
def plain_decode_seconds(model, prompt_ids, batch_sizes, sampling) -> float:
    """Seconds to decode len(batch_sizes) tokens, the i-th for batch_sizes[i] rows: prefill once, fork
    the prompt's row when the batch grows (a new step), keep the first rows when it shrinks."""
    generator = torch.Generator().manual_seed(0)
    start = time.perf_counter()
    cache = DynamicCache()
    logits = model(input_ids=torch.tensor([prompt_ids]), past_key_values=cache, use_cache=True,
                   logits_to_keep=1).logits[:, -1]
    rows = 1
    for size in batch_sizes:
        if size != rows:
            keep = torch.arange(size) if size < rows else torch.zeros(size, dtype=torch.long)
            cache.batch_select_indices(keep)
            logits, rows = logits[keep], size
        tokens = torch.multinomial(filtered_probs(logits, sampling), 1, generator=generator)
        logits = model(input_ids=tokens, past_key_values=cache, use_cache=True, logits_to_keep=1).logits[:, -1]
    return time.perf_counter() - start


def measure_batching_speedup(threads):
    problems, steps, step_tokens = sizes(16, 8), sizes(3, 1), sizes(32, 12)
    conversations = gsm8k_conversations(problems)
    runs = {}
    for in_flight in (1, 8):
        base, helper, scorer, config = components(mode="rescue", n=4, max_steps=steps, max_step_tokens=step_tokens,
                                                  max_problems_in_flight=in_flight)
        start = time.perf_counter()
        results = Engine(base, helper, scorer, config).run(
            [Problem(f"p{i}", c) for i, c in enumerate(conversations)])
        runs[in_flight] = (time.perf_counter() - start, results)
    (alone, alone_results), (batched, batched_results) = runs[1], runs[8]
    if [r.text for r in alone_results] != [r.text for r in batched_results]:
        fail("trajectories differ between 1 and 8 problems in flight: the runs did not do the same work")
    tokens = sum(r.stats["base_tokens"] + r.stats["helper_tokens"] for r in alone_results)
    return record("batching_speedup", alone / batched, "x", target=3.0, detail={
        "model": "SmolLM2-135M-Instruct float32 (base R-KV budget 64, helper full KV)", "mode": "rescue",
        "n_base": 4, "n_helper": 4, "problems": problems, "max_steps": steps, "max_step_tokens": step_tokens,
        "candidate_tokens": tokens, "problems_per_min_1": 60 * problems / alone,
        "problems_per_min_8": 60 * problems / batched, "threads": threads})


def main():
    threads = setup_threads()
    print(f"machine: {machine()}")
    show([measure_engine_overhead(threads), measure_batching_speedup(threads)])


if __name__ == "__main__":
    main()

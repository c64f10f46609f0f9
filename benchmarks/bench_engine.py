"""Engine cost on a real model (SmolLM2-135M-Instruct, float32, CPU), with the lm-eval model's policies.

engine_overhead: candidate tokens per second of the engine (mode `full`, N = 8 candidates, one
problem, detector on) against plain batched decoding of the same weights: a stock DynamicCache and
stock sdpa, one forward and one batched top-k/top-p draw per token, replaying the engine's own batch
sizes (the engine forks 8 rows per step and drops rows as they end their step). Scoring time is
excluded (timed and reported): it is model work the plain decoder does not do.
overhead = engine seconds / plain seconds - 1 for the same tokens (runs alternate; fastest of each).
All times in this script are CPU seconds of the process (run it with one thread).

batching_speedup: problems per minute with 8 problems in flight against 1, in CPU time of the process
(the wall-time ratio is reported too), mode `rescue`, N = 4 base (R-KV, budget 64) + 4 helper, scorer
helper-logprob, the same problems and seeds, overlap off (what the lm-eval model runs with transformers
roles). The rows of all problems go through one forward pass, so trajectories may differ by float
rounding (the runs' token counts and identical trajectories are reported). Also reported: seconds per
phase (prefill, decode, scoring).

Its target is 3, or `batching_ceiling` when that is lower: the gain of plain batched forward passes on
the same shapes. Every forward pass of both runs (base, helper, scorer) is recorded as (model, rows, new
tokens, cached slots, logits kept) and replayed with stock sdpa attention over a stock DynamicCache of
that size: the ceiling is the replayed 1-in-flight time over the replayed 8-in-flight time (runs and
replays alternate, the fastest of two each counts: load on a shared machine only slows). It counts
what batching can and cannot gain on this machine (prefill and scoring forwards are compute-bound on a
CPU and gain little), and none of the engine's own work (sampling, eviction, row copies, detector).
Beside it: `batching_decode_speedup`, the decode phase alone, and `batching_decode_ceiling`, the tokens/s
gain of plain decoding with 32 rows over 4.
"""

import time
from dataclasses import replace

import torch
from transformers import DynamicCache

from bench_common import Stopwatch, fail, gsm8k_conversations, setup_threads, show, sizes
from forward_replay import ForwardShapes
from records import machine, record

from kvrescue_eval.engine.sampling import candidates
from kvrescue_eval.engine.engine import Engine, Problem
from kvrescue_eval.model_adapters.backends import build_components
from kvrescue_eval.model_adapters.prompts import render_prompt
from kvrescue_eval.model_adapters.settings.model_args import parse_model_args


def components(**overrides):
    return build_components(parse_model_args({"preset": "smollm2-cpu", **overrides}))


def measure_engine_overhead(threads):
    n, steps, step_tokens, repeats = 8, sizes(3, 2), sizes(48, 16), sizes(2, 1)
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
        scoring.seconds = scoring.cpu_seconds = 0.0
        start = time.process_time()
        [result] = Engine(base, None, scorer, config).run([Problem("p0", conversation)])
        return time.process_time() - start - scoring.cpu_seconds, result

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
        "scoring_seconds_excluded": scoring.cpu_seconds, "clock": "process CPU time", "threads": threads})


@torch.inference_mode()
def plain_decode_seconds(model, prompt_ids, batch_sizes, sampling) -> float:
    """Seconds to decode len(batch_sizes) tokens, the i-th for batch_sizes[i] rows: prefill once, fork
    the prompt's row when the batch grows (a new step), keep the first rows when it shrinks."""
    generator = torch.Generator().manual_seed(0)
    start = time.process_time()
    cache = DynamicCache()
    logits = model(input_ids=torch.tensor([prompt_ids]), past_key_values=cache, use_cache=True,
                   logits_to_keep=1).logits[:, -1]
    rows = 1
    for size in batch_sizes:
        if size != rows:
            keep = torch.arange(size) if size < rows else torch.zeros(size, dtype=torch.long)
            cache.batch_select_indices(keep)
            logits, rows = logits[keep], size
        ids, probs = candidates(logits, sampling)  # the engine's own top-k-first filtering: like for like
        tokens = ids.gather(1, torch.multinomial(probs, 1, generator=generator))
        logits = model(input_ids=tokens, past_key_values=cache, use_cache=True, logits_to_keep=1).logits[:, -1]
    return time.process_time() - start


def measure_batching_speedup(threads):
    problems, steps, step_tokens, repeats = 8, sizes(3, 1), sizes(24, 12), sizes(2, 1)
    conversations = gsm8k_conversations(problems)
    base, helper, scorer, config = components(mode="rescue", n=4, max_steps=steps, max_step_tokens=step_tokens)
    phases = {"prefill": Stopwatch(), "decode": Stopwatch(), "scoring": Stopwatch()}
    for policy in (base, helper):  # where the time goes, per phase
        policy.start, policy.decode = phases["prefill"].wrap(policy.start), phases["decode"].wrap(policy.decode)
    scorer.score = phases["scoring"].wrap(scorer.score)
    recorder = ForwardShapes([base.model, helper.model, scorer.model])
    runs = {1: [], 8: []}
    for _ in range(repeats):  # alternate, keep the fastest of each
        for in_flight in runs:
            for watch in phases.values():
                watch.seconds = watch.cpu_seconds = 0.0
            engine = Engine(base, helper, scorer, replace(config, max_problems_in_flight=in_flight), overlap=False)
            with recorder.recording() as shapes:
                wall, cpu = time.perf_counter(), time.process_time()
                results = engine.run([Problem(f"p{i}", c) for i, c in enumerate(conversations)])
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            runs[in_flight].append((wall, cpu, results, {name: round(watch.cpu_seconds, 2)
                                                          for name, watch in phases.items()}, shapes))
    fastest = {k: min(v, key=lambda run: run[1]) for k, v in runs.items()}
    (alone, alone_cpu, alone_results, alone_phases, alone_shapes), (
        batched, batched_cpu, batched_results, batched_phases, batched_shapes) = fastest[1], fastest[8]
    tokens = [sum(r.stats["base_tokens"] + r.stats["helper_tokens"] for r in results)
              for results in (alone_results, batched_results)]
    # One forward for all problems' rows changes logits by float rounding, which may flip a draw:
    # then the two runs do slightly different work, shown by the token counts.
    identical = sum(a.text == b.text for a, b in zip(alone_results, batched_results))
    replays = [[recorder.replay_seconds(shapes) for shapes in (alone_shapes, batched_shapes)] for _ in range(repeats)]
    plain_phases = [min((replay[i] for replay in replays), key=lambda phases: sum(phases.values())) for i in (0, 1)]
    plain = [sum(phase.values()) for phase in plain_phases]
    ceiling = plain[0] / plain[1]
    decode_ceiling = forward_ceiling(base)
    decode_speedup = alone_phases["decode"] / batched_phases["decode"]
    return [record("batching_speedup", alone_cpu / batched_cpu, "x", target=min(3.0, ceiling), detail={
        "model": "SmolLM2-135M-Instruct float32 (base R-KV budget 64, helper full KV)", "mode": "rescue",
        "n_base": 4, "n_helper": 4, "problems": problems, "max_steps": steps, "max_step_tokens": step_tokens,
        "candidate_tokens_1": tokens[0], "candidate_tokens_8": tokens[1], "identical_trajectories": identical,
        "problems_per_min_1": 60 * problems / alone, "problems_per_min_8": 60 * problems / batched,
        "seconds_1": alone, "seconds_8": batched, "phase_seconds_1": alone_phases, "phase_seconds_8": batched_phases,
        "wall_time_speedup": alone / batched, "cpu_seconds_1": alone_cpu, "cpu_seconds_8": batched_cpu,
        "phase_cpu_seconds": "phase_seconds_* are CPU seconds", "forward_passes_1": len(alone_shapes),
        "forward_passes_8": len(batched_shapes), "plain_replay_cpu_seconds_1": plain[0],
        "plain_replay_cpu_seconds_8": plain[1], "plain_replay_phase_seconds_1": plain_phases[0],
        "plain_replay_phase_seconds_8": plain_phases[1], "batching_ceiling": ceiling,
        "target": "3, or batching_ceiling when lower", "repeats": repeats, "threads": threads}),
        record("batching_ceiling", ceiling, "x", detail={
            "what": "plain forward passes on the shapes of the two runs: 1-in-flight seconds / 8-in-flight seconds",
            "plain_cpu_seconds_1": plain[0], "plain_cpu_seconds_8": plain[1], "threads": threads}),
        record("batching_decode_speedup", decode_speedup, "x", target=min(3.0, decode_ceiling), detail={
            "decode_seconds_1": alone_phases["decode"], "decode_seconds_8": batched_phases["decode"],
            "threads": threads}),
        record("batching_decode_ceiling", decode_ceiling, "x", detail={"rows": [4, 32], "threads": threads})]


def forward_ceiling(policy, rows=(4, 32), tokens=6) -> float:
    """Tokens/s of plain batched decoding with 32 rows (8 problems x 4) over 4 rows (one problem): the
    most that one forward pass for all problems can gain on this machine."""
    prompt = render_prompt(policy.tokenizer, gsm8k_conversations(1)[0])
    attention = policy.model.config._attn_implementation
    policy.model.set_attn_implementation("sdpa")
    try:
        seconds = [plain_decode_seconds(policy.model, prompt, [size] * tokens, policy.sampling) for size in rows]
    finally:
        policy.model.set_attn_implementation(attention)
    return (rows[1] / seconds[1]) / (rows[0] / seconds[0])


def main():
    threads = setup_threads()
    print(f"machine: {machine()}")
    show([measure_engine_overhead(threads), *measure_batching_speedup(threads)])


if __name__ == "__main__":
    main()

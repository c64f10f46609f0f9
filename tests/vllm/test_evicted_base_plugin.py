"""The plugin registers the evicted base in every vLLM process: with vLLM's engine core in its own process
(VLLM_ENABLE_V1_MULTIPROCESSING=1, where only the `vllm.general_plugins` entry point can register the model
class there), a greedy generation gives the in-process run's tokens and log-probabilities."""

import json
import os
import subprocess
import sys

import pytest

SCRIPT = """
import json, sys
from vllm import LLM, SamplingParams
from vllm.inputs import TokensPrompt
from kvrescue_eval.model_adapters.vllm.evicted_base.models import engine_overrides
from kvrescue_eval.model_adapters.vllm.evicted_base.schedule_config import eviction_settings

if __name__ == "__main__":
    llm = LLM(model=sys.argv[1], skip_tokenizer_init=True, max_model_len=256, max_num_seqs=2, dtype="float32",
              enable_chunked_prefill=False, max_num_batched_tokens=256, enable_prefix_caching=False, seed=0,
              enforce_eager=True, kv_cache_memory_bytes=64 << 20,
              hf_overrides=engine_overrides("qwen2", eviction_settings("rkv", budget=32, buffer=12)))
    out = llm.generate([TokensPrompt(prompt_token_ids=list(range(3, 63)))],
                       SamplingParams(temperature=0, max_tokens=40, ignore_eos=True, logprobs=0), use_tqdm=False)[0]
    print("RESULT " + json.dumps([list(out.outputs[0].token_ids),
                                  [next(iter(s.values())).logprob for s in out.outputs[0].logprobs]]))
"""


@pytest.mark.slow
def test_the_evicted_base_runs_in_vllms_own_engine_process(tmp_path):
    from test_evicted_base_equality import tiny_checkpoint

    tiny_checkpoint(tmp_path, "qwen2")
    (tmp_path / "run.py").write_text(SCRIPT)
    results = {}
    for multiprocessing in ("0", "1"):
        env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": multiprocessing, "OMP_NUM_THREADS": "1"}
        done = subprocess.run([sys.executable, str(tmp_path / "run.py"), str(tmp_path)], capture_output=True,
                              text=True, env=env, timeout=600)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
        line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
        results[multiprocessing] = json.loads(line.removeprefix("RESULT "))
    (tokens, logprobs), (mp_tokens, mp_logprobs) = results["0"], results["1"]
    assert mp_tokens == tokens and len(tokens) == 40
    assert max(abs(a - b) for a, b in zip(logprobs, mp_logprobs)) < 1e-5

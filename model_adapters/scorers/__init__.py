"""Step scorers (kvrescue_eval.engine.scoring.StepScorer): name -> factory.

A new scorer is one file with a class that has `name`, `score(requests)` and `release(key)`, and
one line here. A scorer whose reward depends only on the text wraps its scoring in
`kvrescue_eval.engine.scoring.score_each_text_once`, as both of ours do.
"""

import importlib
import inspect

# name -> "module:factory"; modules import lazily so that listing names loads no framework.
SCORERS = {
    "qwen-prm": "kvrescue_eval.model_adapters.scorers.qwen_prm:load_qwen_prm",
    "qwen-prm-vllm": "kvrescue_eval.model_adapters.scorers.vllm_prm:load_vllm_qwen_prm",
    "helper-logprob": "kvrescue_eval.model_adapters.scorers.helper_logprob:HelperLogProbScorer",
}


def scorer_factory(name: str):
    if name not in SCORERS:
        raise ValueError(f"unknown scorer {name!r}; valid scorers: {', '.join(sorted(SCORERS))}")
    module, attribute = SCORERS[name].split(":")
    return getattr(importlib.import_module(module), attribute)


def build_scorer(name: str, **kwargs):
    """qwen-prm: build_scorer("qwen-prm", path=..., dtype="bfloat16", device="cpu", use_prefix_cache=True)
    qwen-prm-vllm: build_scorer("qwen-prm-vllm", path=..., dtype="float32", kv_cache_memory_bytes=...)  (vLLM)
    helper-logprob: build_scorer("helper-logprob", model=..., tokenizer=..., use_prefix_cache=True)"""
    factory = scorer_factory(name)
    parameters = inspect.signature(factory).parameters
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    unknown = sorted(set(kwargs) - set(parameters))
    if unknown and not accepts_any:
        raise TypeError(f"scorer {name!r} got unknown argument(s) {unknown}; valid: {sorted(parameters)}")
    return factory(**kwargs)

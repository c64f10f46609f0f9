"""Step scorers (kvrescue_eval.engine.scoring.StepScorer): name -> factory.

A new scorer is one file with a class that has `name`, `score(requests)` and `release(key)`, and one line
in SCORERS. A scorer whose reward depends only on the text wraps its scoring in
`kvrescue_eval.engine.scoring.score_each_text_once`, as both of ours do.

What a factory gets is read from its signature, never from its name: a parameter named in RESOURCES is
handed over by the loader (and makes the model_arg it names required); every other parameter with a default
is an option settable from `--model_args` (e.g. `max_batch_rows=8`).
"""

import importlib
import inspect

# name -> the factory, or "module:factory" (a module relative to this package, or absolute), imported lazily
# so that listing names loads no framework.
SCORERS = {
    "qwen-prm": ".qwen_prm:load_qwen_prm",
    "qwen-prm-vllm": ".vllm_prm:load_vllm_qwen_prm",
    "helper-logprob": ".helper_logprob:HelperLogProbScorer",
    # reserved for testing the CI gate: selectors that pick by who proposed a candidate (sabotage.py)
    "sabotage-first-helper": ".sabotage:first_helper",
    "sabotage-first-base": ".sabotage:first_base",
    "sabotage-random": ".sabotage:uniform_random",
}

# scorer -> the scorer that computes the same rewards on vLLM (what prm_backend=vllm selects)
VLLM_VARIANTS = {"qwen-prm": "qwen-prm-vllm"}

# factory parameter -> the model_arg whose model the loader hands over (None: the run's own settings)
RESOURCES = {
    "model": "helper",      # the helper's loaded transformers model (shared with the helper policy)
    "tokenizer": "helper",  # and its tokenizer
    "path": "prm",          # the local folder of the `prm` checkpoint
    "dtype": None,          # "float32", "bfloat16" or "float16", from model_arg dtype and the device
    "device": None,
    "engine_kwargs": None,  # `**engine_kwargs`: the vLLM engine settings of the prm role (vllm/engine.py)
}


def scorer_factory(name: str):
    if name not in SCORERS:
        raise ValueError(f"unknown scorer {name!r}; valid scorers: {', '.join(sorted(SCORERS))}")
    factory = SCORERS[name]
    if isinstance(factory, str):
        module, attribute = factory.split(":")
        factory = getattr(importlib.import_module(module, __name__), attribute)
    return factory


def _parameters(name: str):
    return inspect.signature(scorer_factory(name)).parameters


def scorer_resources(name: str) -> tuple[str, ...]:
    """The RESOURCES that the scorer `name` takes."""
    return tuple(p for p in _parameters(name) if p in RESOURCES)


def scorer_model_args(name: str) -> tuple[str, ...]:
    """The model_args (e.g. "prm", "helper") whose models the scorer `name` reads."""
    return tuple(dict.fromkeys(RESOURCES[p] for p in scorer_resources(name) if RESOURCES[p]))


def scorer_options(name: str) -> dict:
    """option -> default, for the scorer's parameters that model_args may set."""
    return {p: param.default for p, param in _parameters(name).items()
            if p not in RESOURCES and param.default is not inspect.Parameter.empty}


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

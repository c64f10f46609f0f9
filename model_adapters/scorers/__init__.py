"""Step scorers (kvrescue_eval.engine.scoring.StepScorer): name -> factory, per backend.

A new scorer is one file with a class that has `name`, `score(requests)` and `release(key)`, and one line
in SCORERS. A scorer whose reward depends only on the text wraps its scoring in
`kvrescue_eval.engine.scoring.score_each_text_once`, as both of ours do.

A scorer declares the backends it runs on (model_adapters/backends): its SCORERS entry is one factory (a
transformers scorer, backend "hf") or {backend: factory}, the first one its default; model_arg
`prm_backend` chooses among them. What a factory gets is read from its signature, never from its name: a
parameter named in RESOURCES is handed over by the backend (and makes the model_arg it names required);
every other parameter with a default is an option settable from `--model_args` (e.g. `max_batch_rows=8`).
"""

import importlib
import inspect

# name -> the factory, or "module:factory" (a module relative to this package, or absolute), imported lazily
# so that listing names loads no framework; or {backend: such a factory} for a scorer on several backends.
SCORERS = {
    "qwen-prm": {"hf": ".qwen_prm:load_qwen_prm", "vllm": ".vllm_prm:load_vllm_qwen_prm",
                 "http": ".http_prm:load_http_qwen_prm"},
    "qwen-prm-vllm": {"vllm": ".vllm_prm:load_vllm_qwen_prm"},  # the same rewards, on vLLM by name
    "helper-logprob": {"hf": ".helper_logprob:HelperLogProbScorer", "http": ".http_logprob:load_http_helper_logprob"},
    # reserved for testing the CI gate: selectors that pick by who proposed a candidate (sabotage.py)
    "sabotage-first-helper": ".sabotage:first_helper",
    "sabotage-first-base": ".sabotage:first_base",
    "sabotage-random": ".sabotage:uniform_random",
}
DEFAULT_BACKEND = "hf"  # of a scorer given as one factory

# factory parameter -> the model_arg whose model the backend hands over (None: the run's own settings)
RESOURCES = {
    "model": "helper",      # the helper's loaded transformers model (shared with the helper policy)
    "tokenizer": "helper",  # and its tokenizer
    "path": "prm",          # the local folder of the `prm` checkpoint
    "dtype": None,          # "float32", "bfloat16" or "float16", from model_arg dtype and the device
    "device": None,
    "thinking": None,       # True when base and helper run in thinking mode (model_arg thinking, resolved)
    "engine_kwargs": None,  # `**engine_kwargs`: the vLLM engine settings of the prm role (vllm/engine.py)
    "server": None,         # the prm role's server (http/server.py)
    "helper_server": "helper",  # the helper's server (http/server.py)
}


def _check(name: str) -> None:
    if name not in SCORERS:
        raise ValueError(f"unknown scorer {name!r}; valid scorers: {', '.join(sorted(SCORERS))}")


def scorer_backends(name: str) -> tuple[str, ...]:
    """The backends the scorer `name` runs on, its default first."""
    _check(name)
    entry = SCORERS[name]
    return tuple(entry) if isinstance(entry, dict) else (DEFAULT_BACKEND,)


def scorer_factory(name: str, backend: str | None = None):
    """The factory of scorer `name` on `backend` (default: the scorer's first)."""
    backends = scorer_backends(name)
    backend = backends[0] if backend is None else backend
    if backend not in backends:
        raise ValueError(f"scorer {name!r} does not run on backend {backend!r}; it runs on: {', '.join(backends)}")
    factory = SCORERS[name][backend] if isinstance(SCORERS[name], dict) else SCORERS[name]
    if isinstance(factory, str):
        module, attribute = factory.split(":")
        factory = getattr(importlib.import_module(module, __name__), attribute)
    return factory


def _parameters(name: str, backend: str | None):
    return inspect.signature(scorer_factory(name, backend)).parameters


def scorer_resources(name: str, backend: str | None = None) -> tuple[str, ...]:
    """The RESOURCES that the scorer `name` takes on `backend`."""
    return tuple(p for p in _parameters(name, backend) if p in RESOURCES)


def scorer_model_args(name: str, backend: str | None = None) -> tuple[str, ...]:
    """The model_args (e.g. "prm", "helper") whose models the scorer `name` reads."""
    return tuple(dict.fromkeys(RESOURCES[p] for p in scorer_resources(name, backend) if RESOURCES[p]))


def scorer_options(name: str, backend: str | None = None) -> dict:
    """option -> default, for the scorer's parameters that model_args may set."""
    return {p: param.default for p, param in _parameters(name, backend).items()
            if p not in RESOURCES and param.default is not inspect.Parameter.empty}


def build_scorer(name: str, backend: str | None = None, **kwargs):
    """qwen-prm: build_scorer("qwen-prm", path=..., dtype="bfloat16", device="cpu", use_prefix_cache=True)
    qwen-prm on vLLM: build_scorer("qwen-prm", "vllm", path=..., dtype="float32", kv_cache_memory_bytes=...)
    helper-logprob: build_scorer("helper-logprob", model=..., tokenizer=..., use_prefix_cache=True)"""
    factory = scorer_factory(name, backend)
    parameters = inspect.signature(factory).parameters
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    unknown = sorted(set(kwargs) - set(parameters))
    if unknown and not accepts_any:
        raise TypeError(f"scorer {name!r} got unknown argument(s) {unknown}; valid: {sorted(parameters)}")
    return factory(**kwargs)

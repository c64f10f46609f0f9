"""Building the engine's policies and scorer from `ModelArgs`: transformers for every role by default
(model_adapters/hf/), vLLM for the roles whose `*_backend` is vllm (model_adapters/vllm/)."""

from dataclasses import replace
from functools import partial

from kvrescue_eval.engine.config import EngineConfig
from kvrescue_eval.engine.sampling import SamplingParams

from .hf.loading import load_causal_lm, new_cache, resolve_device, torch_dtype
from .model_files.locate import model_folder
from .settings.model_args import ModelArgs


def build_components(args: ModelArgs):
    """(base policy or None, helper policy or None, scorer or None, EngineConfig), loading each model
    once (base, helper and a scorer that reads the helper share it when they are the same model). The evictor
    is the object model_args built; the scorer gets the resources its factory asks for (scorers.RESOURCES)."""
    from kvrescue_eval.eviction import EvictionSchedule

    from .hf.evicting_attention import use_evicting_attention
    from .hf.policy import HFPolicy
    from .scorers import VLLM_VARIANTS, build_scorer, scorer_resources

    args = replace(args, device=resolve_device(args.device))
    n_base, n_helper = args.counts
    sampling = SamplingParams(args.temperature, args.top_p, args.top_k)
    loaded = {}

    def model(name):
        if name not in loaded:
            loaded[name] = load_causal_lm(name, args.dtype, args.device, args.device_map)
            use_evicting_attention(loaded[name][0])
        return loaded[name]

    dtype_name = str(torch_dtype(args.dtype, args.device)).removeprefix("torch.")

    def vllm_settings(role):
        from .vllm.engine import engine_kwargs

        return engine_kwargs(args, role, dtype_name)

    def vllm_policy(name, role):
        from .vllm.engine import start_llm
        from .vllm.step_policy import VLLMStepPolicy

        return VLLMStepPolicy(start_llm(model_folder(name), **vllm_settings(role)), sampling, name=role)

    backends = args.backends
    base = helper = scorer = None
    if n_base and backends["base"] == "vllm" and args.evicts:   # the evicted base inside vLLM
        from .vllm.evicted_base.builder import evicted_base_policy

        base = evicted_base_policy(model_folder(args.base), args, vllm_settings("base"), sampling)
    elif n_base and backends["base"] == "vllm":
        base = vllm_policy(args.base, "base")
    elif n_base:
        eviction = EvictionSchedule(args.eviction, args.budget, args.buffer, args.window) if args.evicts else None
        base_model, base_tokenizer = model(args.base)
        base = HFPolicy(base_model, base_tokenizer, sampling, partial(new_cache, base_model, eviction), name="base",
                        batch_problems=True)
    if n_helper and backends["helper"] == "vllm":
        helper = vllm_policy(args.helper, "helper")
    elif n_helper:
        helper_model, helper_tokenizer = model(args.helper)
        helper = HFPolicy(helper_model, helper_tokenizer, sampling, partial(new_cache, helper_model, None),
                          name="helper", batch_problems=True)
    if args.scored:
        offered = {  # what a scorer factory may ask for, by parameter name
            # the helper policy's own model: with the scorer's plain caches our attention is the stock one
            "model": lambda: model(args.helper)[0],
            "tokenizer": lambda: model(args.helper)[1],
            "path": lambda: model_folder(args.prm),
            "dtype": lambda: dtype_name,
            "device": lambda: args.device,
            "engine_kwargs": lambda: vllm_settings("prm"),
        }
        # prm_backend=vllm: the same rewards from the scorer's vLLM variant
        name = VLLM_VARIANTS[args.scorer] if backends.get("prm") == "vllm" else args.scorer
        resources = {resource: offered[resource]() for resource in scorer_resources(name)}
        settings = resources.pop("engine_kwargs", {})
        options = args.scorer_options if name == args.scorer else {}  # options were read for args.scorer
        scorer = build_scorer(name, **resources, **settings, **options)
    config = EngineConfig(n_base=n_base, n_helper=n_helper, max_steps=args.max_steps,
                          max_step_tokens=args.max_step_tokens, max_context=args.max_context,
                          max_problems_in_flight=args.max_problems_in_flight, seed=args.seed,
                          detector=args.detector_config)
    return base, helper, scorer, config

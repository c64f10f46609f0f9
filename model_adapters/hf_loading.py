"""Loading models and building the engine's policies and scorer from `ModelArgs`: transformers for
every role by default, vLLM for the roles whose `*_backend` is vllm (model_adapters/vllm_loading.py)."""

import logging
from dataclasses import replace
from functools import partial

from kvrescue_eval.engine.config import EngineConfig
from kvrescue_eval.engine.sampling import SamplingParams

from .model_args import ModelArgs
from .model_files import model_folder


def resolve_device(device: str) -> str:
    """lm-eval passes `--device`, cuda:0 unless told otherwise: without a GPU, that default means CPU."""
    import torch

    if str(device).startswith("cuda") and not torch.cuda.is_available():
        logging.getLogger(__name__).warning("device %s requested but CUDA is not available: running on cpu", device)
        return "cpu"
    return device


def torch_dtype(name: str, device: str):
    import torch

    if name == "auto":  # bfloat16 where it is fast, float32 on CPU
        return torch.float32 if str(device).startswith("cpu") else torch.bfloat16
    return getattr(torch, name)


def load_causal_lm(name: str, dtype: str, device: str, device_map: str | None = None):
    """(model, tokenizer); `name` is a hub id, a local folder, or "smollm2" / "testbed:NAME" (packaged models).
    `device_map` ("auto", ...): the layers spread over all visible GPUs by accelerate (a model too large
    for one); the evicting cache keeps each layer's slots on that layer's device."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    name = model_folder(name)
    placement = {"device_map": device_map} if device_map is not None else {}
    model = AutoModelForCausalLM.from_pretrained(name, dtype=torch_dtype(dtype, device), attn_implementation="sdpa",
                                                 **placement)
    return (model if device_map is not None else model.to(device)).eval(), AutoTokenizer.from_pretrained(name)


def new_cache(model, eviction):
    from .evicting_cache import EvictingCache

    return EvictingCache(model.config.get_text_config(decoder=True).num_hidden_layers, eviction)


def build_components(args: ModelArgs):
    """(base policy or None, helper policy or None, scorer or None, EngineConfig), loading each model
    once (base, helper and a scorer that reads the helper share it when they are the same model). The evictor
    is the object model_args built; the scorer gets the resources its factory asks for (scorers.RESOURCES)."""
    from .evicting_attention import use_evicting_attention
    from kvrescue_eval.eviction import EvictionSchedule
    from .hf_policy import HFPolicy
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

    def vllm_settings(role):
        from .vllm_loading import engine_kwargs

        return engine_kwargs(args, role)

    def vllm_policy(name, role):
        from .vllm_loading import engine_kwargs, start_llm
        from .vllm_policy import VLLMStepPolicy

        return VLLMStepPolicy(start_llm(model_folder(name), **engine_kwargs(args, role)), sampling, name=role)

    backends = args.backends
    base = helper = scorer = None
    if n_base and backends["base"] == "vllm":
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
            "dtype": lambda: str(torch_dtype(args.dtype, args.device)).removeprefix("torch."),
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

"""The evicted base policy on vLLM from model_args: `base_backend=vllm` in the modes whose base evicts
(rescue, bon). Reads the checkpoint's model type (Qwen2 and Llama are served) and the eviction settings
(`evictor` with its options, `budget`, `buffer`, `window`), refuses what breaks the state semantics before
anything loads (engine_args.py), then starts the engine in this process."""

import json
from pathlib import Path

from .engine_args import base_engine_kwargs
from .models import ARCHITECTURES
from .schedule_config import eviction_settings


def checkpoint_model_type(folder) -> str:
    config = Path(folder) / "config.json"
    try:
        model_type = json.loads(config.read_text()).get("model_type")
    except (OSError, ValueError) as error:
        raise ValueError(f"cannot read the base's model type from {config}: {error}") from None
    if model_type not in ARCHITECTURES:
        raise ValueError(f"base_backend=vllm with an evicting base serves model types "
                         f"{', '.join(sorted(ARCHITECTURES))}; {folder} is {model_type!r}: use base_backend=hf")
    return model_type


def base_settings(args) -> dict:
    return eviction_settings(args.evictor, budget=args.budget, buffer=args.buffer, window=args.window,
                             **dict(args.evictor_options))


def evicted_base_policy(folder, args, engine_kwargs: dict, sampling):
    """A `VLLMEvictedPolicy` for the checkpoint in `folder` with the role's vLLM `engine_kwargs`
    (model_adapters/vllm/engine.py's `engine_kwargs(args, "base", dtype)`)."""
    from ..engine import start_llm
    from ..step_policy import _load_tokenizer, eos_token_ids
    from .policy import VLLMEvictedPolicy

    kwargs = base_engine_kwargs(engine_kwargs, model_type=checkpoint_model_type(folder), settings=base_settings(args),
                                on_cpu=str(args.device).startswith("cpu"))
    llm = start_llm(str(folder), **kwargs)
    tokenizer = _load_tokenizer(folder)
    return VLLMEvictedPolicy(llm, sampling, tokenizer, eos_token_ids(llm, tokenizer), name="base")

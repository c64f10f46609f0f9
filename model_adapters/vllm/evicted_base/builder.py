"""The evicted base policy on vLLM from model_args: `base_backend=vllm` in the modes whose base evicts
(rescue, bon). Reads the checkpoint's model type (Qwen2, Qwen3 and Llama are served) and the eviction settings
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


def base_settings(evictor: str, schedule) -> dict:
    """The eviction settings of evictor `evictor` (a name of EVICTORS) as `schedule` (an EvictionSchedule) holds
    it, with the values of its options."""
    from kvrescue_eval.eviction import EVICTORS, evictor_options

    options = {name: getattr(schedule.evictor, name) for name in evictor_options(EVICTORS[evictor])}
    return eviction_settings(evictor, budget=schedule.budget, buffer=schedule.buffer, window=schedule.window,
                             compress_prompt=schedule.compress_prompt, **options)


def evicted_base_policy(folder, settings, engine_kwargs: dict):
    """A `VLLMEvictedPolicy` for the checkpoint in `folder` with the run's `settings` (settings/tree.py) and the
    base role's vLLM `engine_kwargs` (model_adapters/vllm/engine.py's `engine_kwargs`)."""
    from ..engine import start_llm
    from ..step_policy import _load_tokenizer, eos_token_ids
    from .policy import VLLMEvictedPolicy

    kwargs = base_engine_kwargs(engine_kwargs, model_type=checkpoint_model_type(folder),
                                settings=base_settings(settings.evictor, settings.eviction),
                                on_cpu=str(settings.device).startswith("cpu"))
    llm = start_llm(str(folder), **kwargs)
    tokenizer = _load_tokenizer(folder)
    return VLLMEvictedPolicy(llm, settings.sampling, tokenizer, eos_token_ids(llm, tokenizer), name="base",
                             thinking=settings.thinking == "on")

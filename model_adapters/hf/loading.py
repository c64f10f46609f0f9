"""Loading a transformers causal LM (device, dtype, placement) and the evicting cache of its policy."""

import logging

from ..model_files.locate import model_folder


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
